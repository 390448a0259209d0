#include "kwatt/core/process.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "src/testing/archive_files.h"
#include "src/testing/temp_dir.h"

namespace kwatt::process_test {
namespace {

TEST(ProcessOutputFile, GetsStandardOutputAndErrorAndAnEmptyInput) {
  testing::TempDir dir("kwatt_process_test");
  std::filesystem::path log = dir.root() / "child.log";
  {
    std::ofstream old(log);
    old << "an earlier run's log, longer than the new one\n";
  }
  SpawnOptions options;
  options.output_file = log.string();
  // Reads its standard input (/dev/null: at once end of file, `read` fails), then writes on its
  // output and its error.
  Result<Process> child = Process::Spawn(
      {"/bin/sh", "-c", "read line; echo \"out [$line] read: $?\"; echo err >&2; echo out again"},
      options);
  ASSERT_TRUE(child.ok()) << child.status().message();
  Result<ProcessExit> exit = child->Wait();
  ASSERT_TRUE(exit.ok()) << exit.status().message();
  EXPECT_TRUE(exit->ok()) << exit->Describe();
  EXPECT_EQ(archive::test_files::ReadFile(log), "out [] read: 1\nerr\nout again\n");
}

TEST(ProcessOutputFile, ErrorsAreNamed) {
  SpawnOptions options;
  options.output_file = "/nonexistent-kwatt-dir/child.log";
  Result<Process> child = Process::Spawn({"/bin/true"}, options);
  ASSERT_FALSE(child.ok());
  EXPECT_EQ(child.status().code(), Status::Code::kIOError);
  EXPECT_NE(
      child.status().message().find("cannot run /bin/true: /nonexistent-kwatt-dir/child.log: "),
      std::string::npos)
      << child.status().message();

  options.output_file = "child.log";
  options.apart = true;
  EXPECT_EQ(Process::Spawn({"/bin/true"}, options).status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kwatt::process_test
