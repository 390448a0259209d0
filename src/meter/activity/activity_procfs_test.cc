#include "src/meter/activity/activity_procfs.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <string>

#include "src/testing/temp_dir.h"

namespace kwatt::meter::procfs::activity_procfs_test {
namespace {

// A real line of this machine's kernel (cat's own stat), the fields after the name as written.
constexpr std::string_view kFieldsAfterName =
    " R 13455 13455 7669 0 -1 4194304 100 0 0 0 7 3 11 2 20 0 1 0 126159 3133440 409 "
    "18446744073709551615 94682359898112 94682359917993 140726336409792 0 0 0 0 0 0 0 0 0 17 0 0 "
    "0 0 0 0 94682359934000 94682359935616 94682545266688 140726336416448 140726336416468 "
    "140726336416468 140726336417771 0\n";

std::string StatLine(std::string_view pid, std::string_view comm) {
  return std::string(pid) + " (" + std::string(comm) + ")" + std::string(kFieldsAfterName);
}

TEST(ParseProcessStat, ReadsTheFieldsProcDocuments) {
  ProcessStat stat;
  std::string line = StatLine("13457", "cat");  // the name points into it
  ASSERT_TRUE(ParseProcessStat(line, &stat).ok());
  EXPECT_EQ(stat.pid, 13457);
  EXPECT_EQ(stat.comm, "cat");
  EXPECT_EQ(stat.state, 'R');
  EXPECT_EQ(stat.ppid, 13455);
  EXPECT_EQ(stat.utime, 7);
  EXPECT_EQ(stat.stime, 3);
  EXPECT_EQ(stat.cutime, 11);
  EXPECT_EQ(stat.cstime, 2);
  EXPECT_EQ(stat.num_threads, 1);
  EXPECT_EQ(stat.starttime, 126159);
}

TEST(ParseProcessStat, TheNameIsBetweenTheFirstOpeningAndTheLastClosingParenthesis) {
  const std::string names[] = {"my (odd) name",  ") R 1 2 3",     "a)b(c)",      "((((",
                               "))))",           "with\nnewline", "tab\there",   "",
                               " leading",       "x) S 9",        "(",           ")",
                               "kworker/0:1-ev", "name ) ( x",    "\xff\xfe\x01"};
  for (const std::string& name : names) {
    ProcessStat stat;
    std::string line = StatLine("42", name);
    ASSERT_TRUE(ParseProcessStat(line, &stat).ok()) << name;
    EXPECT_EQ(stat.comm, name);
    EXPECT_EQ(stat.pid, 42);
    EXPECT_EQ(stat.ppid, 13455) << name;
    EXPECT_EQ(stat.starttime, 126159) << name;
  }
}

TEST(ParseProcessStat, RefusesWhatIsNotAStatLineNamingWhatIsWrong) {
  struct Case {
    std::string text;
    std::string says;
  } cases[] = {
      {"", "parentheses"},
      {"12 cat R 1", "parentheses"},
      {"12 (cat R 1", "parentheses"},
      {"(cat)" + std::string(kFieldsAfterName), "pid"},
      {"x12 (cat)" + std::string(kFieldsAfterName), "pid"},
      {"-3 (cat)" + std::string(kFieldsAfterName), "pid"},
      {"12 (cat)", "state"},
      {"12 (cat) RR 1", "state"},
      {"12 (cat) R", "ppid"},
      {"12 (cat) R 1 2 3 4 5 6 7 8 9 10 11 12", "utime"},
      {"12 (cat) R 1 2 3 4 5 6 7 8 9 10 x 12", "utime"},
      {"12 (cat) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18", "starttime"},
      {"12 (cat) R 1 2 3 4 5 6 7 8 9 10 -11 12 13 14 15 16 17 18 19", "negative"},
      {"12 (cat) R 1 2 3 4 5 6 7 8 9 10 99999999999999999999 12 13 14", "utime"},
  };
  for (const Case& c : cases) {
    ProcessStat stat;
    Status status = ParseProcessStat(c.text, &stat);
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << c.text;
    EXPECT_NE(status.message().find(c.says), std::string::npos)
        << c.text << ": " << status.ToString();
  }
}

TEST(ParseProcessStat, EveryTruncationOfALineIsRefusedOrReadsTheSameFields) {
  std::string line = StatLine("777", "a (b) c");
  ProcessStat whole;
  ASSERT_TRUE(ParseProcessStat(line, &whole).ok());
  for (size_t n = 0; n < line.size(); ++n) {
    ProcessStat stat;
    if (!ParseProcessStat(line.substr(0, n), &stat).ok()) continue;
    // A prefix that still reads has every wanted field whole: the same as the whole line, but
    // a prefix cut inside starttime reads a shorter number.
    EXPECT_EQ(stat.utime, whole.utime);
    EXPECT_EQ(stat.num_threads, whole.num_threads);
    EXPECT_LE(stat.starttime, whole.starttime);
  }
}

TEST(ParseProcessStat, RandomBytesNeverCrashAndWhatReadsIsConsistent) {
  std::mt19937 random(11);
  std::string alphabet = "0123456789 ()-RSZ\n\tx";
  for (int round = 0; round < 20000; ++round) {
    std::string text;
    size_t length = random() % 80;
    for (size_t i = 0; i < length; ++i) text += alphabet[random() % alphabet.size()];
    ProcessStat stat;
    if (!ParseProcessStat(text, &stat).ok()) continue;
    EXPECT_GT(stat.pid, 0);
    EXPECT_GE(stat.utime, 0);
    EXPECT_EQ(stat.comm, std::string_view(text).substr(text.find('(') + 1,
                                                       text.rfind(')') - text.find('(') - 1));
  }
}

TEST(ParseSchedstat, ReadsTheRunTime) {
  int64_t run = -1;
  EXPECT_TRUE(ParseSchedstat("561858 7183 2\n", &run));
  EXPECT_EQ(run, 561858);
  EXPECT_FALSE(ParseSchedstat("", &run));
  EXPECT_FALSE(ParseSchedstat("x 1 2", &run));
  EXPECT_FALSE(ParseSchedstat("-5 1 2", &run));
}

TEST(ParseMachineStat, BusyAndTotalFromTheFirstLineAndTheCpuLinesCounted) {
  MachineStat machine;
  // user nice system idle iowait irq softirq steal guest guest_nice
  ASSERT_TRUE(ParseMachineStat("cpu  100 2 30 400 5 6 7 8 50 1\n"
                               "cpu0 50 1 15 200 2 3 3 4 25 0\n"
                               "cpu1 50 1 15 200 3 3 4 4 25 1\n"
                               "intr 1 2 3\nbtime 1745000000\n",
                               &machine)
                  .ok());
  EXPECT_EQ(machine.busy_ticks, 100 + 2 + 30 + 6 + 7 + 8);  // guest is inside user already
  EXPECT_EQ(machine.total_ticks, machine.busy_ticks + 400 + 5);
  EXPECT_EQ(machine.cpu_lines, 2);
  // An old kernel's four fields.
  ASSERT_TRUE(ParseMachineStat("cpu 1 2 3 4\n", &machine).ok());
  EXPECT_EQ(machine.busy_ticks, 6);
  EXPECT_EQ(machine.total_ticks, 10);
  EXPECT_EQ(machine.cpu_lines, 0);
  for (std::string bad :
       {"", "cpu0 1 2 3 4\n", "intr 1\n", "cpu 1 2 3\n", "cpu 1 x 3 4\n", "cpu 1 -2 3 4\n"}) {
    EXPECT_EQ(ParseMachineStat(bad, &machine).code(), Status::Code::kCorruption) << bad;
  }
}

TEST(ParseCpuList, RangesAndSingles) {
  EXPECT_EQ(*ParseCpuList("0-1\n"), (std::vector<int>{0, 1}));
  EXPECT_EQ(*ParseCpuList("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(*ParseCpuList("5"), (std::vector<int>{5}));
  for (std::string bad : {"", "\n", "a", "3-1", "1,1", "2,1", "0-", "-1", "1,,2", "0-99999"}) {
    EXPECT_EQ(ParseCpuList(bad).status().code(), Status::Code::kCorruption) << bad;
  }
}

TEST(ParseCgroupUsage, FindsUsageUsecAmongTheOtherKeys) {
  int64_t usage = -1;
  EXPECT_TRUE(ParseCgroupUsage("usage_usec 1674170579\nuser_usec 15\nsystem_usec 14\n", &usage));
  EXPECT_EQ(usage, 1674170579);
  EXPECT_TRUE(ParseCgroupUsage("nr_periods 3\nusage_usec 7\n", &usage));
  EXPECT_EQ(usage, 7);
  EXPECT_FALSE(ParseCgroupUsage("user_usec 15\n", &usage));
  EXPECT_FALSE(ParseCgroupUsage("usage_usec x\n", &usage));
  EXPECT_FALSE(ParseCgroupUsage("", &usage));
}

TEST(TicksToMicros, ExactAtAnyRate) {
  EXPECT_EQ(TicksToMicros(1, 100), 10'000);
  EXPECT_EQ(TicksToMicros(12345, 100), 123'450'000);
  EXPECT_EQ(TicksToMicros(3, 1024), 2929);  // 2929.6875, truncated
  // Ticks of 30 years of 1,000 CPUs at 1,000 Hz: exact; beyond int64's microseconds: saturated.
  int64_t ticks = int64_t(30) * 365 * 86400 * 1000 * 1000;
  EXPECT_EQ(TicksToMicros(ticks, 1000), ticks * 1000);
  EXPECT_EQ(TicksToMicros(INT64_MAX / 10, 100), INT64_MAX);
  EXPECT_EQ(TicksToMicros(kMaxTicks, 100), kMaxTicks * 10'000);
}

TEST(ReadSmallFile, ReadsWholeFilesAndSaysWhyNot) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "f").string();
  std::ofstream(path) << "hello\n";
  char buffer[16];
  EXPECT_EQ(ReadSmallFile(AT_FDCWD, path.c_str(), buffer, sizeof buffer), 6);
  EXPECT_EQ(ReadSmallFile(AT_FDCWD, path.c_str(), buffer, 3), 3);
  EXPECT_EQ(ReadSmallFile(AT_FDCWD, (path + "x").c_str(), buffer, 3), -ENOENT);
  std::string whole;
  EXPECT_EQ(ReadWholeFile(AT_FDCWD, path.c_str(), &whole), 0);
  EXPECT_EQ(whole, "hello\n");
  std::string big(100000, 'x');
  std::ofstream(path) << big;
  EXPECT_EQ(ReadWholeFile(AT_FDCWD, path.c_str(), &whole), 0);
  EXPECT_EQ(whole, big);
  EXPECT_EQ(FileError(ENOENT, "x").code(), Status::Code::kNotFound);
  EXPECT_EQ(FileError(EACCES, "x").code(), Status::Code::kPermissionDenied);
  EXPECT_EQ(FileError(EIO, "x").code(), Status::Code::kIOError);
}

TEST(ParseProcessStat, ReadsThisProcessOwnStat) {
  char buffer[4096];
  ssize_t n = ReadSmallFile(AT_FDCWD, "/proc/self/stat", buffer, sizeof buffer);
  ASSERT_GT(n, 0);
  ProcessStat stat;
  ASSERT_TRUE(ParseProcessStat(std::string_view(buffer, size_t(n)), &stat).ok());
  EXPECT_EQ(stat.pid, ::getpid());
  EXPECT_EQ(stat.ppid, ::getppid());
  EXPECT_GE(stat.num_threads, 1);
}

}  // namespace
}  // namespace kwatt::meter::procfs::activity_procfs_test
