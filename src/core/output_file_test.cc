#include "kwatt/core/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace kwatt::output_file_test {
namespace {

namespace fs = std::filesystem;

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kwatt-output-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
  static std::string Read(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, WholeFileReplacesAndLeavesNoTemporary) {
  std::string path = (dir_ / "state.json").string();
  ASSERT_TRUE(WriteWholeFile(path, "first\n").ok());
  ASSERT_TRUE(WriteWholeFile(path, "second, longer\n").ok());
  EXPECT_EQ(Read(path), "second, longer\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  Status nowhere = WriteWholeFile((dir_ / "no" / "x").string(), "x");
  EXPECT_EQ(nowhere.code(), Status::Code::kIOError);
  EXPECT_NE(nowhere.message().find("does not exist"), std::string::npos);
}

TEST_F(OutputFileTest, NewFileIsWrittenAsideThenRenamed) {
  std::string path = (dir_ / "out.csv").string();
  Result<OutputFile> out = OutputFile::Plan(path);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_TRUE(out->replaces());
  EXPECT_NE(out->write_path(), path);
  Write(out->write_path(), "rows\n");
  EXPECT_FALSE(fs::exists(path));  // nothing that looks finished before the commit
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_EQ(Read(path), "rows\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(OutputFileTest, AnExistingFileIsKeptUntilTheCommitAndAfterAnAbandon) {
  std::string path = (dir_ / "out.csv").string();
  Write(path, "old\n");
  {
    Result<OutputFile> out = OutputFile::Plan(path);
    ASSERT_TRUE(out.ok());
    Write(out->write_path(), "half");
    out->Abandon();
    EXPECT_FALSE(out->Commit().ok());
  }
  EXPECT_EQ(Read(path), "old\n");
  {
    Result<OutputFile> out = OutputFile::Plan(path);
    ASSERT_TRUE(out.ok());
    Write(out->write_path(), "half");
  }  // destroyed without a commit: the temporary file goes
  EXPECT_EQ(Read(path), "old\n");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(OutputFileTest, ALinkKeepsBeingALinkAndItsTargetIsReplaced) {
  fs::path target = dir_ / "target.csv", link = dir_ / "link.csv";
  Write(target.string(), "old\n");
  fs::create_symlink(target, link);
  Result<OutputFile> out = OutputFile::Plan(link.string());
  ASSERT_TRUE(out.ok());
  Write(out->write_path(), "new\n");
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(Read(target), "new\n");
}

TEST_F(OutputFileTest, DevicesAndFifosAreWrittenThroughNeverReplaced) {
  Result<OutputFile> null = OutputFile::Plan("/dev/null");
  ASSERT_TRUE(null.ok());
  EXPECT_FALSE(null->replaces());
  EXPECT_EQ(null->write_path(), "/dev/null");
  ASSERT_TRUE(null->Commit().ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  fs::path fifo = dir_ / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  Result<OutputFile> out = OutputFile::Plan(fifo.string());
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->replaces());
  EXPECT_EQ(out->write_path(), fifo.string());
  ASSERT_TRUE(out->Commit().ok());
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(OutputFileTest, RefusesWhatCannotBeAFile) {
  Result<OutputFile> empty = OutputFile::Plan("");
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Status::Code::kInvalidArgument);
  Result<OutputFile> directory = OutputFile::Plan(dir_.string());
  ASSERT_FALSE(directory.ok());
  EXPECT_EQ(directory.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);
  Result<OutputFile> nowhere = OutputFile::Plan((dir_ / "no" / "such" / "x.csv").string());
  ASSERT_FALSE(nowhere.ok());
  EXPECT_EQ(nowhere.status().code(), Status::Code::kIOError);
  EXPECT_NE(nowhere.status().message().find("does not exist"), std::string::npos);
}

// Issue 21, item 5: an output is never inside an input (`export A -o A/manifest.json`).
TEST_F(OutputFileTest, RefusesAnOutputInsideAnInput) {
  fs::path archive = dir_ / "archive";
  fs::create_directories(archive / "data");
  Write((archive / "manifest.json").string(), "{}");
  fs::create_directory_symlink(archive, dir_ / "link");
  for (const fs::path& inside : {archive / "manifest.json", archive / "data" / "new.csv",
                                 archive / "data" / ".." / "x", dir_ / "link" / "manifest.json"}) {
    Result<OutputFile> planned = OutputFile::Plan(inside.string(), {archive.string()});
    ASSERT_FALSE(planned.ok()) << inside;
    EXPECT_EQ(planned.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(planned.status().message().find("which this command reads"), std::string::npos);
  }
  EXPECT_TRUE(OutputFile::Plan((dir_ / "archive.csv").string(), {archive.string()}).ok());
  EXPECT_TRUE(OutputFile::Plan((dir_ / "out.csv").string(), {archive.string()}).ok());
  EXPECT_EQ(Read(archive / "manifest.json"), "{}");
}

}  // namespace
}  // namespace kwatt::output_file_test
