#include "kwatt/meter/activity/activity_record.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/testing/fake_procfs.h"
#include "src/testing/temp_dir.h"

namespace kwatt::meter::activity_record_test {
namespace {

std::string ReadText(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TargetSample Sample(TargetKind kind, const std::string& key, const std::string& name, int64_t pid,
                    int64_t cpu, int64_t cycles = -1, int64_t instructions = -1) {
  TargetSample sample;
  sample.target = {kind, key, name, pid};
  sample.cpu_microseconds = cpu;
  sample.cycles = cycles;
  sample.instructions = instructions;
  return sample;
}

ActivitySnapshot Snapshot(int64_t second, std::vector<TargetSample> targets) {
  ActivitySnapshot s;
  s.monotonic_nanos = second * kNanosPerSecond + 17;
  s.wall = 1'745'000'000 * kNanosPerSecond + second * kNanosPerSecond + 123'456'789;
  s.cpus = 2;
  s.busy_microseconds = 1'000'000 + second * 700'000;
  s.total_microseconds = 5'000'000 + second * 2'000'000;
  s.targets = std::move(targets);
  return s;
}

void ExpectSameSnapshots(const std::vector<ActivitySnapshot>& a,
                         const std::vector<ActivitySnapshot>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].monotonic_nanos, b[i].monotonic_nanos);
    EXPECT_EQ(a[i].wall, b[i].wall);
    EXPECT_EQ(a[i].cpus, b[i].cpus);
    EXPECT_EQ(a[i].busy_microseconds, b[i].busy_microseconds);
    EXPECT_EQ(a[i].total_microseconds, b[i].total_microseconds);
    ASSERT_EQ(a[i].targets.size(), b[i].targets.size()) << "snapshot " << i;
    for (size_t t = 0; t < a[i].targets.size(); ++t) {
      const TargetSample& x = a[i].targets[t];
      const TargetSample& y = b[i].targets[t];
      EXPECT_EQ(x.target.kind, y.target.kind);
      EXPECT_EQ(x.target.key, y.target.key);
      EXPECT_EQ(x.target.name, y.target.name);
      EXPECT_EQ(x.target.pid, y.target.pid);
      EXPECT_EQ(x.cpu_microseconds, y.cpu_microseconds) << x.target.key;
      EXPECT_EQ(x.cycles, y.cycles) << x.target.key;
      EXPECT_EQ(x.instructions, y.instructions) << x.target.key;
    }
  }
}

ActivityRecordHeader Header(bool counters = false) {
  ActivityRecordHeader header;
  header.writer = "kwatt test";
  header.host = "nova-1.lyon.grid5000.fr";
  header.boot_id = "3e9f5c1a-5c1e-4d5e-9a0b-1d2c3b4a5f6e";
  header.kernel = "6.1.0-18-amd64";
  header.clock_ticks = 100;
  header.cpus = 2;
  header.start = 1'745'000'000 * kNanosPerSecond;
  header.selection.pids = {1234, 99};
  header.selection.trees = false;
  header.selection.cgroups = {"/system.slice/a \"b\".service"};
  header.selection.commands = {"python3"};
  header.selection.all_processes = true;
  header.selection.cgroup_depth = 3;
  header.selection.hardware_counters = counters;
  return header;
}

std::vector<ActivitySnapshot> Story(bool counters) {
  int64_t c = counters ? 0 : -1;
  auto cycles = [&](int64_t v) { return counters ? v : -1; };
  return {
      Snapshot(0, {Sample(TargetKind::kCgroup, "cgroup:/job", "/job", 0, 10, cycles(5), cycles(9)),
                   Sample(TargetKind::kProcess, "pid:1234:555", "my (odd) \"name\"\n\x01", 1234,
                          1000, cycles(100), cycles(200)),
                   Sample(TargetKind::kProcessTree, "tree:99:42", "sh", 99, 5000, c, c)}),
      // 1234 did not move; the tree did; a new process.
      Snapshot(1, {Sample(TargetKind::kCgroup, "cgroup:/job", "/job", 0, 10, cycles(5), cycles(9)),
                   Sample(TargetKind::kProcess, "pid:1234:555", "my (odd) \"name\"\n\x01", 1234,
                          1000, cycles(100), cycles(200)),
                   Sample(TargetKind::kProcess, "pid:77:600", "\xc3\xa9t\xc3\xa9", 77, 3, cycles(1),
                          cycles(1)),
                   Sample(TargetKind::kProcessTree, "tree:99:42", "sh", 99, 7000, c, c)}),
      // 1234 ended; the cgroup vanished.
      Snapshot(2, {Sample(TargetKind::kProcess, "pid:77:600", "\xc3\xa9t\xc3\xa9", 77, 9, cycles(2),
                          cycles(3)),
                   Sample(TargetKind::kProcessTree, "tree:99:42", "sh", 99, 7000, c, c)}),
      // The cgroup is back (same key, a new definition).
      Snapshot(3, {Sample(TargetKind::kCgroup, "cgroup:/job", "/job", 0, 12, cycles(5), cycles(9)),
                   Sample(TargetKind::kProcess, "pid:77:600", "\xc3\xa9t\xc3\xa9", 77, 9, cycles(2),
                          cycles(3)),
                   Sample(TargetKind::kProcessTree, "tree:99:42", "sh", 99, 7000, c, c)}),
      Snapshot(4, {}),
  };
}

class ActivityRecordTest : public ::testing::Test {
 protected:
  std::string Write(const std::vector<ActivitySnapshot>& snapshots, bool counters,
                    bool finish = true) {
    std::string path = (dir_.root() / "activity.jsonl").string();
    auto writer = ActivityRecordWriter::Create(path, Header(counters));
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    for (const ActivitySnapshot& s : snapshots) EXPECT_TRUE((*writer)->Write(s).ok());
    if (finish) {
      EXPECT_TRUE((*writer)->Finish().ok());
    }
    return path;
  }
  ::kwatt::testing::TempDir dir_{"kwatt_activity_record", ::kwatt::testing::ShmBase()};
};

TEST_F(ActivityRecordTest, WhatIsWrittenReadsBackTheSameWithAndWithoutCounters) {
  for (bool counters : {false, true}) {
    std::vector<ActivitySnapshot> story = Story(counters);
    std::string path = Write(story, counters);
    auto record = ReadActivityRecord(path);
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    EXPECT_TRUE(record->complete);
    EXPECT_FALSE(record->truncated);
    const ActivityRecordHeader& h = record->header;
    ActivityRecordHeader expected = Header(counters);
    EXPECT_EQ(h.writer, expected.writer);
    EXPECT_EQ(h.host, expected.host);
    EXPECT_EQ(h.boot_id, expected.boot_id);
    EXPECT_EQ(h.kernel, expected.kernel);
    EXPECT_EQ(h.clock_ticks, 100);
    EXPECT_EQ(h.cpus, 2);
    EXPECT_EQ(h.start, expected.start);
    EXPECT_EQ(h.selection.pids, expected.selection.pids);
    EXPECT_EQ(h.selection.trees, false);
    EXPECT_EQ(h.selection.cgroups, expected.selection.cgroups);
    EXPECT_EQ(h.selection.commands, expected.selection.commands);
    EXPECT_TRUE(h.selection.all_processes);
    EXPECT_EQ(h.selection.cgroup_depth, 3);
    EXPECT_EQ(h.selection.hardware_counters, counters);
    ExpectSameSnapshots(record->snapshots, story);
  }
}

TEST_F(ActivityRecordTest, TheLinesAreThoseTheSpecShows) {
  std::string path = Write(Story(false), false);
  std::vector<std::string> lines = Lines(ReadText(path));
  ASSERT_EQ(lines.size(),
            12u);  // header, 3 targets, snapshot, target, 2 snapshots, target, 2 snapshots, end
  EXPECT_EQ(lines[0].substr(0, 47), R"({"format":"kwatt-activity","version":1,"writer")");
  EXPECT_NE(lines[0].find(R"("start":"2025-04-18T18:13:20Z")"), std::string::npos) << lines[0];
  // Targets are defined before the snapshot that first has them, with ids from 0.
  EXPECT_EQ(lines[1], R"({"target":0,"key":"cgroup:/job","kind":"cgroup","name":"/job","pid":0})");
  EXPECT_EQ(
      lines[2],
      R"({"target":1,"key":"pid:1234:555","kind":"process","name":"my (odd) \"name\"\n\u0001","pid":1234})");
  EXPECT_EQ(
      lines[4],
      R"({"time_ns":1745000000123456789,"time":"2025-04-18T18:13:20.123456789Z","monotonic_ns":17,"cpus":2,"busy_us":1000000,"total_us":5000000,"targets":[[0,10],[1,1000],[2,5000]],"ended":[]})");
  // Only what moved (2 and the new 3); then what ended.
  EXPECT_EQ(lines[5], R"({"target":3,"key":"pid:77:600","kind":"process","name":"été","pid":77})");
  EXPECT_NE(lines[6].find(R"("targets":[[3,3],[2,7000]],"ended":[]})"), std::string::npos)
      << lines[6];
  EXPECT_NE(lines[7].find(R"("targets":[[3,9]],"ended":[)"), std::string::npos) << lines[7];
  EXPECT_EQ(lines.back(), R"({"end":{"snapshots":5}})");
}

TEST_F(ActivityRecordTest, EachSnapshotIsInTheFileAsSoonAsWrittenAndAnUnfinishedRecordReads) {
  std::string path = (dir_.root() / "live.jsonl").string();
  auto writer = ActivityRecordWriter::Create(path, Header());
  ASSERT_TRUE(writer.ok());
  std::vector<ActivitySnapshot> story = Story(false);
  for (size_t i = 0; i < story.size(); ++i) {
    ASSERT_TRUE((*writer)->Write(story[i]).ok());
    auto record = ReadActivityRecord(path);  // while the writer is still open
    ASSERT_TRUE(record.ok()) << record.status().ToString();
    EXPECT_EQ(record->snapshots.size(), i + 1);
    EXPECT_FALSE(record->complete);
    EXPECT_FALSE(record->truncated);
  }
  writer->reset();  // dropped without Finish: interrupted
  auto record = ReadActivityRecord(path);
  ASSERT_TRUE(record.ok());
  EXPECT_FALSE(record->complete);
  EXPECT_EQ(record->snapshots.size(), story.size());
}

TEST_F(ActivityRecordTest, ARecordCutAnywhereReadsUpToItsLastWholeLine) {
  std::vector<ActivitySnapshot> story = Story(true);
  std::string path = Write(story, true);
  std::string text = ReadText(path);
  std::string cut = (dir_.root() / "cut.jsonl").string();
  size_t header_end = text.find('\n') + 1;
  for (size_t n = header_end; n <= text.size(); ++n) {
    WriteText(cut, text.substr(0, n));
    auto record = ReadActivityRecord(cut);
    ASSERT_TRUE(record.ok()) << n << ": " << record.status().ToString();
    bool at_line_end = text[n - 1] == '\n';
    EXPECT_EQ(record->truncated, !at_line_end) << n;
    EXPECT_EQ(record->complete, n == text.size()) << n;
    // A prefix of the snapshots, each whole.
    ASSERT_LE(record->snapshots.size(), story.size());
    std::vector<ActivitySnapshot> prefix(story.begin(), story.begin() + record->snapshots.size());
    ExpectSameSnapshots(record->snapshots, prefix);
  }
  // Cut inside the header: not a record.
  WriteText(cut, text.substr(0, header_end - 5));
  EXPECT_EQ(ReadActivityRecord(cut).status().code(), Status::Code::kCorruption);
}

TEST_F(ActivityRecordTest, DamageIsCorruptionNamingTheLine) {
  std::string path = Write(Story(false), false);
  std::vector<std::string> lines = Lines(ReadText(path));
  std::string damaged = (dir_.root() / "damaged.jsonl").string();
  auto with = [&](size_t index, const std::string& replacement) {
    std::string text;
    for (size_t i = 0; i < lines.size(); ++i) text += (i == index ? replacement : lines[i]) + "\n";
    WriteText(damaged, text);
    return ReadActivityRecord(damaged).status();
  };
  struct Case {
    size_t line;
    std::string text;
    std::string says;
  } cases[] = {
      {0, "{}", "not an activity record"},
      {0, "[1,2]", "not an activity record"},
      {0, R"({"format":"kwatt-activity","version":1})", "lacks a field"},
      {0, R"({"format":"kwatt-activity"})", "no version"},
      {1, "{not json", "not a JSON object"},
      {1, "17", "not a JSON object"},
      {1, R"({"target":0,"key":"k","kind":"pod","name":"x","pid":0})", "unknown target kind"},
      {1, R"({"target":0,"kind":"cgroup","name":"x","pid":0})", "needs target"},
      {2, R"({"target":0,"key":"x","kind":"process","name":"x","pid":1})", "defined twice"},
      {4, R"({"time_ns":1})", "a snapshot line needs"},
      {4,
       R"({"time_ns":1,"monotonic_ns":1,"cpus":2,"busy_us":1,"total_us":1,"targets":[[9,1]],"ended":[]})",
       "target 9 used before"},
      {4,
       R"({"time_ns":1,"monotonic_ns":1,"cpus":2,"busy_us":1,"total_us":1,"targets":[[0,1,2,3]],"ended":[]})",
       "counters are [id, cpu_us]"},
      {4,
       R"({"time_ns":1,"monotonic_ns":1,"cpus":2,"busy_us":1,"total_us":1,"targets":[[0,1]],"ended":[]})",
       "defined but not in the snapshot"},
      {4,
       R"({"time_ns":1,"monotonic_ns":1,"cpus":2,"busy_us":1,"total_us":1,"targets":[[0,1],[1,1],[2,-4]],"ended":[]})",
       "negative"},
      {6,
       R"({"time_ns":1,"monotonic_ns":1,"cpus":2,"busy_us":1,"total_us":1,"targets":[[2,1]],"ended":[]})",
       "monotonic_ns went back"},
      {6,
       R"({"time_ns":1,"monotonic_ns":999999999999,"cpus":2,"busy_us":1,"total_us":1,"targets":[[2,1]],"ended":[]})",
       "counters went back"},
      {6,
       R"({"time_ns":1,"monotonic_ns":999999999999,"cpus":2,"busy_us":1,"total_us":1,"targets":[],"ended":[7]})",
       "ended but not alive"},
      {lines.size() - 1, R"({"end":{}})", "end line without"},
  };
  for (const Case& c : cases) {
    Status status = with(c.line, c.text);
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << c.text << ": " << status.ToString();
    EXPECT_NE(status.message().find("line " + std::to_string(c.line + 1) + ": "), std::string::npos)
        << status.ToString();
    EXPECT_NE(status.message().find(c.says), std::string::npos)
        << c.line << " " << c.text << " -> " << status.ToString();
  }
  // Something after the end line.
  WriteText(damaged, ReadText(path) + lines[4] + "\n");
  Status after = ReadActivityRecord(damaged).status();
  EXPECT_NE(after.message().find("after the end line"), std::string::npos) << after.ToString();
  // A newer version: say so, and what to do.
  (void)with(0, R"({"format":"kwatt-activity","version":2})");
  Status newer = ReadActivityRecord(damaged).status();
  EXPECT_EQ(newer.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(newer.message().find("upgrade kwatt"), std::string::npos) << newer.ToString();
  // Not there, a directory, empty.
  EXPECT_EQ(ReadActivityRecord((dir_.root() / "none").string()).status().code(),
            Status::Code::kNotFound);
  EXPECT_EQ(ReadActivityRecord(dir_.root().string()).status().code(),
            Status::Code::kInvalidArgument);
  WriteText(damaged, "");
  EXPECT_EQ(ReadActivityRecord(damaged).status().code(), Status::Code::kCorruption);
}

TEST_F(ActivityRecordTest, TheWriterRefusesWhatNoReaderGivesAndBadPaths) {
  std::string path = (dir_.root() / "w.jsonl").string();
  auto writer = ActivityRecordWriter::Create(path, Header());
  ASSERT_TRUE(writer.ok());
  ActivitySnapshot twice = Snapshot(0, {Sample(TargetKind::kProcess, "pid:1:1", "a", 1, 5),
                                        Sample(TargetKind::kProcess, "pid:1:1", "a", 1, 5)});
  EXPECT_EQ((*writer)->Write(twice).code(), Status::Code::kInvalidArgument);
  ASSERT_TRUE(
      (*writer)->Write(Snapshot(1, {Sample(TargetKind::kProcess, "pid:1:1", "a", 1, 5)})).ok());
  Status back = (*writer)->Write(Snapshot(2, {Sample(TargetKind::kProcess, "pid:1:1", "a", 1, 4)}));
  EXPECT_EQ(back.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(back.message().find("went back"), std::string::npos);
  ASSERT_TRUE((*writer)->Finish().ok());
  auto record = ReadActivityRecord(path);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->snapshots.size(), 1u);  // nothing of the refused ones
  EXPECT_EQ(ActivityRecordWriter::Create("", Header()).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(ActivityRecordWriter::Create(dir_.root().string(), Header()).status().code(),
            Status::Code::kInvalidArgument);
  EXPECT_EQ(ActivityRecordWriter::Create((dir_.root() / "no/such/dir/x").string(), Header())
                .status()
                .code(),
            Status::Code::kIOError);
}

TEST_F(ActivityRecordTest, AReadersSnapshotsRecordedOnAFakeMachine) {
  testing::FakeProcfs fake(dir_.root() / "machine", 3);
  std::filesystem::create_directories(fake.procfs() / "sys/kernel/random");
  WriteText(fake.procfs() / "sys/kernel/random/boot_id", "0a1b2c3d-boot\n");
  WriteText(fake.procfs() / "sys/kernel/osrelease", "6.1.0-fake\n");
  ASSERT_TRUE(fake.SetMachineTicks(100, 0, 50, 900, 0, 0, 0, 0).ok());
  testing::FakeProcfs::Process p;
  p.pid = 10;
  p.comm = "a b";
  p.user_nanos = 5'000'000;
  ASSERT_TRUE(fake.Add(p).ok());
  ASSERT_TRUE(fake.AddCgroup("/job", 77).ok());
  TargetSelection selection{.cgroups = {"/job"}, .all_processes = true};
  MeterEnvironment environment = fake.environment();
  auto reader = ActivityReader::Open(environment, selection);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ActivityRecordHeader header = MakeActivityRecordHeader(environment, selection, "kwatt 9");
  EXPECT_EQ(header.host, "fake-node");
  EXPECT_EQ(header.boot_id, "0a1b2c3d-boot");
  EXPECT_EQ(header.kernel, "6.1.0-fake");
  EXPECT_EQ(header.cpus, 3);
  EXPECT_GT(header.start, 0);
  std::string path = (dir_.root() / "fake.jsonl").string();
  auto writer = ActivityRecordWriter::Create(path, header);
  ASSERT_TRUE(writer.ok());
  std::vector<ActivitySnapshot> read;
  for (int i = 0; i < 4; ++i) {
    if (i < 3) {
      ASSERT_TRUE(fake.Run(10, 3'000'000).ok());
    }
    if (i == 2) {
      ASSERT_TRUE(fake.Vanish(10).ok());
    }
    auto s = (*reader)->Read();
    ASSERT_TRUE(s.ok());
    read.push_back(*s);
    ASSERT_TRUE((*writer)->Write(*s).ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
  auto record = ReadActivityRecord(path);
  ASSERT_TRUE(record.ok()) << record.status().ToString();
  EXPECT_EQ(record->header.boot_id, "0a1b2c3d-boot");
  ExpectSameSnapshots(record->snapshots, read);
}

}  // namespace
}  // namespace kwatt::meter::activity_record_test
