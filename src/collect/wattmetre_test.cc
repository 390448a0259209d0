#include "src/collect/wattmetre.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <future>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "src/testing/temp_dir.h"

namespace kwatt::collect::wattmetre_test {
namespace {

constexpr int64_t kS = 1700000000;  // a second of 2023
constexpr UnixNanos kT = kS * kNanosPerSecond;

WattmetreEntry Parsed(std::string_view line, int version, WattmetreLine expected) {
  WattmetreEntry entry;
  EXPECT_EQ(ParseWattmetreLine(line, version, &entry), expected) << line;
  return entry;
}

TEST(WattmetreLine, ReadsVersion2) {
  WattmetreEntry e =
      Parsed("#activepow0,12,1700000000.020000,OK,100.5,,3e2,-1.25\r\n", 2, WattmetreLine::kEntry);
  EXPECT_EQ(e.time, kT + 20 * kNanosPerMilli);
  ASSERT_EQ(e.port_count(), 4u);
  EXPECT_EQ(e.values[0], 100.5);
  EXPECT_FALSE(e.has_value[1]);
  EXPECT_EQ(e.values[2], 300);
  EXPECT_EQ(e.values[3], -1.25);
  for (int i : {0, 2, 3}) EXPECT_TRUE(e.has_value[size_t(i)]);
  // A trailing comma is a last port without a value.
  e = Parsed("a,b,1700000000,OK,1,", 2, WattmetreLine::kEntry);
  ASSERT_EQ(e.port_count(), 2u);
  EXPECT_EQ(e.time, kT);
  EXPECT_TRUE(e.has_value[0]);
  EXPECT_FALSE(e.has_value[1]);
}

TEST(WattmetreLine, ReadsVersion3) {
  // 6 header fields, 3 ports (value, other), 5 trailing fields: 17 fields.
  WattmetreEntry e = Parsed("1700000000.5,true,230.1,50.0,0,0,10.5,0.04,,0.0,30,0.1,1,2,3,4,5", 3,
                            WattmetreLine::kEntry);
  EXPECT_EQ(e.time, kT + kNanosPerSecond / 2);
  ASSERT_EQ(e.port_count(), 3u);
  EXPECT_EQ(e.values[0], 10.5);
  EXPECT_FALSE(e.has_value[1]);
  EXPECT_EQ(e.values[2], 30);
  // An odd count of middle fields: the last port is read (as Kwollect's (fields - 11) / 2).
  e = Parsed("1700000000,true,a,b,c,d,7,x,1,2,3,4,5,6", 3, WattmetreLine::kEntry);
  ASSERT_EQ(e.port_count(), 1u);
  EXPECT_EQ(e.values[0], 7);
  Parsed("1700000000,false,a,b,c,d,7,x,1,2,3,4,5", 3, WattmetreLine::kSkipped);
  Parsed("1700000000,true,a,b,c,d,7,x,1,2", 3, WattmetreLine::kMalformed);
  Parsed("1700000000,true,a,b,c,d,zz,x,1,2,3,4,5", 3, WattmetreLine::kMalformed);
}

TEST(WattmetreLine, TimeIsExactFromTheDigits) {
  EXPECT_EQ(Parsed("d,d,1700000000.123456789,OK,1", 2, WattmetreLine::kEntry).time, kT + 123456789);
  // Past nine digits: truncated, never rounded through a double.
  EXPECT_EQ(Parsed("d,d,1700000000.9999999999,OK,1", 2, WattmetreLine::kEntry).time,
            kT + 999999999);
  EXPECT_EQ(Parsed("d,d,1700000000.,OK,1", 2, WattmetreLine::kEntry).time, kT);
  EXPECT_EQ(Parsed("d,d,.5,OK,1", 2, WattmetreLine::kEntry).time, kNanosPerSecond / 2);
  EXPECT_EQ(Parsed("d,d,1586427890.000001,OK,1", 2, WattmetreLine::kEntry).time,
            1586427890LL * kNanosPerSecond + 1000);
}

TEST(WattmetreLine, SkipsMarkedLinesAndRefusesGarbage) {
  Parsed("d,d,1700000000.02,ERR,1,2", 2, WattmetreLine::kSkipped);
  Parsed("d,d,garbage,KO,1,2", 2, WattmetreLine::kSkipped);
  Parsed("", 2, WattmetreLine::kSkipped);
  Parsed("  \r\n", 2, WattmetreLine::kSkipped);
  for (const char* bad :
       {"d,d,1700000000.02,OK", "d,d,1700000000.02", "x", "d,d,17x,OK,1", "d,d,-5,OK,1",
        "d,d,1700000000,OK,1,abc", "d,d,1700000000,OK,nan", "d,d,1700000000,OK,inf",
        "d,d,1700000000,OK,1e999", "d,d,99999999999999999999,OK,1", "d,d,9223372036.5,OK,1",
        "d,d,,OK,1", "d,d,1.2.3,OK,1", "d,d,1700000000,OK,0x10", "d,d,1700000000,OK,+-5",
        "d,d,1700000000,OK,-", "d,d,1700000000,OK,.", "d,d,1700000000,OK,+"}) {
    Parsed(bad, 2, WattmetreLine::kMalformed);
  }
  Parsed("d,d,1700000000,OK,1", 4, WattmetreLine::kMalformed);
  // Blanks around a value are allowed (Python's float() allows them), and a sign.
  WattmetreEntry e = Parsed("d,d, 1700000000 ,OK, 12.5 ,+3", 2, WattmetreLine::kEntry);
  EXPECT_EQ(e.values[0], 12.5);
  EXPECT_EQ(e.values[1], 3);
}

WattmetreEntry Entry(UnixNanos time, std::vector<std::optional<double>> values) {
  WattmetreEntry e;
  e.time = time;
  for (const auto& v : values) {
    e.values.push_back(v.value_or(0));
    e.has_value.push_back(v.has_value());
  }
  return e;
}

WattmetreOptions TwoPortOptions() {
  WattmetreOptions o;
  o.wattmetre_id = "wattmetre1";
  o.nodes = {{"wattmetre1-port0", "nova-1"}, {"wattmetre1-port5", "nova-9"}};
  o.labels = {{"_device_alias", "\"ignored\""}, {"site", "\"lyon\""}};
  return o;
}

TEST(WattmetreAverager, AveragesEachPortOverEachSecondAtItsStart) {
  WattmetreAverager averager(TwoPortOptions());
  std::vector<Reading> out;
  const StreamSource::Promoted none;
  averager.Add(Entry(kT + 10 * kNanosPerMilli, {1, 10}), none, &out);
  averager.Add(Entry(kT + 30 * kNanosPerMilli, {2, std::nullopt}), none, &out);
  averager.Add(Entry(kT + 990 * kNanosPerMilli, {6, 20}), none, &out);
  EXPECT_TRUE(out.empty());
  averager.Add(Entry(kT + kNanosPerSecond, {std::nullopt, 5}), none, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].time, kT);
  EXPECT_EQ(out[0].device_id, "wattmetre1-port0");
  EXPECT_EQ(out[0].metric_id, "wattmetre_power_watt");
  EXPECT_EQ(out[0].value, 3);  // (1 + 2 + 6) / 3
  Labels mapped = {{"site", "\"lyon\""}, {"_device_alias", "\"nova-1\""}};
  EXPECT_EQ(out[0].labels, mapped);
  EXPECT_EQ(out[1].device_id, "wattmetre1-port1");
  EXPECT_EQ(out[1].value, 15);  // (10 + 20) / 2: the empty field is no value
  // Not mapped: the description's labels as they are.
  EXPECT_EQ(out[1].labels, TwoPortOptions().labels);
  out.clear();
  averager.Flush(none, &out);
  ASSERT_EQ(out.size(), 1u);  // port 0 had no value in that second: no row
  EXPECT_EQ(out[0].time, kT + kNanosPerSecond);
  EXPECT_EQ(out[0].value, 5);
  EXPECT_EQ(averager.counts().lines, 4);
  EXPECT_EQ(averager.counts().seconds, 2);
  EXPECT_EQ(averager.counts().rows, 3);
  out.clear();
  averager.Flush(none, &out);  // nothing more
  EXPECT_TRUE(out.empty());
}

TEST(WattmetreAverager, ScalesOnceAndNamesTheMetric) {
  WattmetreOptions options = TwoPortOptions();
  options.scale_factor = 0.5;
  options.metric = "power_in";
  WattmetreAverager averager(options);
  std::vector<Reading> out;
  averager.Add(Entry(kT, {100, 200}), {}, &out);
  averager.Add(Entry(kT + 1, {300, 400}), {}, &out);
  averager.Flush({}, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].value, 100);  // mean 200, halved once
  EXPECT_EQ(out[1].value, 150);
  EXPECT_EQ(out[0].metric_id, "power_in");
}

TEST(WattmetreAverager, PromotedPortsGiveEveryValueFromTheSecondPromotionStarts) {
  WattmetreAverager averager(TwoPortOptions());
  bool promoted_now = false;
  std::vector<std::string> asked;
  StreamSource::Promoted promoted = [&](std::string_view device, std::string_view alias,
                                        std::string_view name) {
    asked.push_back(std::string(device) + "/" + std::string(alias) + "/" + std::string(name));
    return promoted_now && alias == "nova-1";
  };
  std::vector<Reading> out;
  for (int s = 0; s < 4; ++s) {
    for (int k = 0; k < 50; ++k) {
      // A monitor job starts during the third second: asked when it completes.
      if (s == 2 && k == 1) promoted_now = true;
      UnixNanos t = kT + s * kNanosPerSecond + k * 20 * kNanosPerMilli;
      averager.Add(Entry(t, {double(100 + k), 7.0}), promoted, &out);
    }
  }
  averager.Flush(promoted, &out);
  // Seconds 0 and 1 were complete before the promotion: averaged; 2 and 3 every value.
  size_t port0_rows = 0;
  std::set<UnixNanos> port0_times;
  for (const Reading& r : out) {
    if (r.device_id != "wattmetre1-port0") {
      EXPECT_EQ(r.value, 7.0);
      continue;
    }
    ++port0_rows;
    port0_times.insert(r.time);
    if (r.time < kT + 2 * kNanosPerSecond) {
      EXPECT_EQ(r.time % kNanosPerSecond, 0);
      EXPECT_EQ(r.value, 124.5);  // mean of 100..149
    } else {
      EXPECT_EQ(r.value, 100 + double(NanosOfSecond(r.time) / (20 * kNanosPerMilli)));
    }
  }
  EXPECT_EQ(port0_rows, 2u + 100u);
  EXPECT_EQ(port0_times.size(), 102u);
  EXPECT_EQ(out.size(), 102u + 4u);
  // Asked once per port and second, with the node (or "") and the metric.
  ASSERT_EQ(asked.size(), 8u);
  EXPECT_EQ(asked[0], "wattmetre1-port0/nova-1/wattmetre_power_watt");
  EXPECT_EQ(asked[1], "wattmetre1-port1//wattmetre_power_watt");
}

TEST(WattmetreAverager, CountsGapsAndTimeGoingBackwards) {
  WattmetreAverager averager(TwoPortOptions());
  std::vector<Reading> out;
  averager.Add(Entry(kT, {1}), {}, &out);
  averager.Add(Entry(kT + 1 * kNanosPerSecond, {1}), {}, &out);
  averager.Add(Entry(kT + 4 * kNanosPerSecond, {1}), {}, &out);  // 2 and 3 missing
  averager.Add(Entry(kT + 5 * kNanosPerSecond, {1}), {}, &out);
  averager.Add(Entry(kT + 7 * kNanosPerSecond, {1}), {}, &out);  // 6 missing
  averager.Add(Entry(kT + 3 * kNanosPerSecond, {2}), {}, &out);  // the clock stepped back
  averager.Add(Entry(kT + 3 * kNanosPerSecond + 5, {4}), {}, &out);
  averager.Flush({}, &out);
  EXPECT_EQ(averager.counts().gaps, 2);
  EXPECT_EQ(averager.counts().missing_seconds, 3);
  EXPECT_EQ(averager.counts().backwards, 1);
  ASSERT_EQ(out.size(), 6u);
  EXPECT_EQ(out.back().time, kT + 3 * kNanosPerSecond);
  EXPECT_EQ(out.back().value, 3);
}

// --- The mapping file ---

std::string WriteFile(const kwatt::testing::TempDir& dir, const std::string& name,
                      const std::string& text) {
  std::string path = (dir.root() / name).string();
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(WattmetreMapping, ReadsEachNodesPorts) {
  kwatt::testing::TempDir dir;
  auto mapping = ReadWattmetreMapping(
      WriteFile(dir, "m.yaml",
                "nova-1: [wattmetre1-port0, wattmetre1-port1]\nnova-2:\n  - wattmetre1-port2\n"
                "nova-3: []\n"));
  ASSERT_TRUE(mapping.ok()) << mapping.status().ToString();
  std::map<std::string, std::string> expected = {{"wattmetre1-port0", "nova-1"},
                                                 {"wattmetre1-port1", "nova-1"},
                                                 {"wattmetre1-port2", "nova-2"}};
  EXPECT_EQ(*mapping, expected);
}

TEST(WattmetreMapping, ErrorsNameTheFileAndTheEntry) {
  kwatt::testing::TempDir dir;
  auto error = [&](const std::string& text) {
    std::string path = WriteFile(dir, "bad.yaml", text);
    auto mapping = ReadWattmetreMapping(path);
    EXPECT_FALSE(mapping.ok()) << text;
    EXPECT_EQ(mapping.status().code(), Status::Code::kInvalidArgument) << text;
    EXPECT_NE(mapping.status().message().find(path), std::string::npos)
        << mapping.status().message();
    return mapping.status().message();
  };
  EXPECT_NE(error("nova-1: wattmetre1-port0\n").find("node \"nova-1\": its ports are not a list"),
            std::string::npos);
  EXPECT_NE(error("nova-1: [wattmetre1-port0, 12]\n").find("node \"nova-1\": 12 is not a port"),
            std::string::npos);
  EXPECT_NE(error("nova-1: [p0]\nnova-2: [p1, p0]\n")
                .find("node \"nova-2\": port \"p0\" is already given to node \"nova-1\""),
            std::string::npos);
  EXPECT_NE(error("- a\n- b\n").find("not a mapping"), std::string::npos);
  EXPECT_NE(error("").find("not a mapping"), std::string::npos);
  EXPECT_NE(error("{}").find("holds no node"), std::string::npos);
  EXPECT_NE(error("nova-1: [a\n").find("bad.yaml:"), std::string::npos);  // and its line
  auto missing = ReadWattmetreMapping((dir.root() / "none.yaml").string());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);
  EXPECT_NE(missing.status().message().find("none.yaml"), std::string::npos);
}

// --- The source ---

struct Collected {
  std::mutex mutex;
  std::condition_variable emitted;
  std::vector<Reading> readings;
  int batches = 0;
  std::vector<std::string> said;
  StreamSource::Emit Emit() {
    return [this](std::vector<Reading>&& batch) {
      std::lock_guard lock(mutex);
      ++batches;
      for (Reading& r : batch) readings.push_back(std::move(r));
      emitted.notify_all();
    };
  }
  StreamSource::Say Say() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      said.push_back(line);
    };
  }
  // Waits until a reading was emitted (false after 10 s without one).
  bool WaitForAReading() {
    std::unique_lock lock(mutex);
    return emitted.wait_for(lock, std::chrono::seconds(10), [&] { return !readings.empty(); });
  }
};

WattmetreSourceOptions SourceOptions(std::string path) {
  WattmetreSourceOptions options;
  options.averager = TwoPortOptions();
  options.open = OpenWattmetrePath(path);
  options.name = "wattmetre://wattmetre1/" + path;
  return options;
}

std::string Line(UnixNanos t, double p0, double p1) {
  char text[128];
  std::snprintf(text, sizeof text, "#activepow0,0,%lld.%09lld,OK,%g,%g\n",
                static_cast<long long>(t / kNanosPerSecond),
                static_cast<long long>(t % kNanosPerSecond), p0, p1);
  return text;
}

TEST(WattmetreSource, ReadsAFileToItsEndAndFlushesTheLastSecond) {
  kwatt::testing::TempDir dir;
  std::string text;
  for (int k = 0; k < 100; ++k) text += Line(kT + k * 20 * kNanosPerMilli, k, 1);
  text += "d,d,1700000002.5,ERR,1,1\n";
  text += "garbage\n\n";
  text += "d,d,1700000002.5,OK,4,2";  // no final newline: read all the same
  WattmetreSource source(SourceOptions(WriteFile(dir, "stream.txt", text)));
  Collected got;
  std::stop_source stop;
  Status status = source.Run(stop.get_token(), {}, got.Emit(), got.Say());
  // A regular file is read once: its end is the end, not a failure to retry.
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_EQ(source.counts().lines, 104);
  ASSERT_EQ(got.readings.size(), 6u);
  EXPECT_EQ(got.readings[0].value, 24.5);  // mean of 0..49
  EXPECT_EQ(got.readings[2].value, 74.5);  // mean of 50..99
  EXPECT_EQ(got.readings[4].time, kT + 2 * kNanosPerSecond);
  EXPECT_EQ(got.readings[4].value, 4);
  WattmetreCounts counts = source.counts();
  EXPECT_EQ(counts.lines, 104);
  EXPECT_EQ(counts.skipped_lines, 1);
  EXPECT_EQ(counts.malformed_lines, 1);
  EXPECT_EQ(counts.seconds, 3);
  EXPECT_EQ(counts.rows, 6);
}

TEST(WattmetreSource, AMissingPathIsNotFound) {
  kwatt::testing::TempDir dir;
  WattmetreSource source(SourceOptions((dir.root() / "nothing").string()));
  Collected got;
  Status status = source.Run(std::stop_source().get_token(), {}, got.Emit(), got.Say());
  EXPECT_EQ(status.code(), Status::Code::kNotFound);
  EXPECT_NE(status.message().find("nothing"), std::string::npos);
}

// A FIFO whose writer stays: stop is honoured promptly, and what was read is flushed.
TEST(WattmetreSource, StopsAFifoPromptlyFlushingWhatWasRead) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  WattmetreSource source(SourceOptions(path));
  Collected got;
  std::stop_source stop;
  Status status;
  std::atomic<bool> returned{false};
  std::thread runner([&] {
    status = source.Run(stop.get_token(), {}, got.Emit(), got.Say());
    returned = true;
  });
  int writer = ::open(path.c_str(), O_WRONLY);  // waits for the reader's open
  ASSERT_GE(writer, 0);
  std::string text;
  for (int k = 0; k < 75; ++k) text += Line(kT + k * 20 * kNanosPerMilli, 2 * k, 3);
  text += "d,d,1700000001.5,OK,1";  // unterminated: the writer is mid-line
  ASSERT_EQ(::write(writer, text.data(), text.size()), ssize_t(text.size()));
  // Wait for the first second to be emitted (the source has read up to the second second).
  EXPECT_TRUE(got.WaitForAReading());
  EXPECT_FALSE(returned);
  auto asked = std::chrono::steady_clock::now();
  stop.request_stop();
  runner.join();
  double waited_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count();
  ::close(writer);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_LT(waited_ms, 1000);  // poll_timeout_ms is 100
  ASSERT_EQ(got.readings.size(), 4u);
  EXPECT_EQ(got.readings[0].value, 49);  // mean of 0, 2, ..., 98
  EXPECT_EQ(got.readings[2].time, kT + kNanosPerSecond);
  // Second 1: 2*50..2*74 and the unterminated line's 1: (2 * (50 + 74) / 2 * 25 + 1) / 26.
  EXPECT_DOUBLE_EQ(got.readings[2].value, (2.0 * 62 * 25 + 1) / 26);
  EXPECT_EQ(source.counts().lines, 76);
}

// A FIFO nobody writes to yet: Run waits for its writer, and stops when asked.
TEST(WattmetreSource, StopsAFifoThatHasNoWriter) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  // Stopped once the source has opened the FIFO, and waits for its writer.
  std::promise<void> opened;
  std::once_flag once;
  WattmetreSourceOptions options = SourceOptions(path);
  options.open = [&, open = options.open]() {
    Result<WattmetreStream> stream = open();
    std::call_once(once, [&] { opened.set_value(); });
    return stream;
  };
  WattmetreSource source(options);
  Collected got;
  std::stop_source stop;
  Status status = Status::Internal("not run");
  std::thread runner([&] { status = source.Run(stop.get_token(), {}, got.Emit(), got.Say()); });
  EXPECT_EQ(opened.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto asked = std::chrono::steady_clock::now();
  stop.request_stop();
  runner.join();
  double waited_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - asked).count();
  EXPECT_LT(waited_ms, 1000);
  EXPECT_TRUE(status.ok()) << status.ToString();
  EXPECT_TRUE(got.readings.empty());
}

// A source of the pipe whose read end is `fd` (each run reads a copy of it), stalled after
// `stall_ms` without a reading.
WattmetreSourceOptions PipeOptions(int fd, int stall_ms) {
  WattmetreSourceOptions options;
  options.averager = TwoPortOptions();
  options.name = "wattmetre://wattmetre1/";
  options.stall_ms = stall_ms;
  options.open = [fd]() -> Result<WattmetreStream> { return WattmetreStream{::dup(fd), nullptr}; };
  return options;
}

// A writer that stays but sends nothing more: the run ends, saying so, instead of waiting for
// good; the next run (the stream opened again) counts the silent seconds as a gap.
TEST(WattmetreSource, AStreamThatStallsEndsItsRunAndTheSilenceIsAGap) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  WattmetreSource source(PipeOptions(fds[0], 200));
  std::string text = Line(kT, 1, 2) + Line(kT + kNanosPerSecond, 3, 4);
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), ssize_t(text.size()));
  Collected got;
  Status status = source.Run(std::stop_source().get_token(), {}, got.Emit(), got.Say());
  EXPECT_EQ(status.code(), Status::Code::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("wattmetre://wattmetre1/: no reading for 0.2 s (nothing read)"),
            std::string::npos)
      << status.message();
  EXPECT_EQ(got.readings.size(), 4u);  // both seconds flushed
  EXPECT_EQ(source.counts().stalls, 1);
  // The wattmeter speaks again, 5 s later by its own clock: 3 seconds missing.
  text = Line(kT + 5 * kNanosPerSecond, 5, 6);
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), ssize_t(text.size()));
  ::close(fds[1]);
  status = source.Run(std::stop_source().get_token(), {}, got.Emit(), got.Say());
  EXPECT_EQ(status.code(), Status::Code::kUnavailable) << status.ToString();  // ended
  EXPECT_EQ(got.readings.size(), 6u);
  WattmetreCounts counts = source.counts();
  EXPECT_EQ(counts.gaps, 1);
  EXPECT_EQ(counts.missing_seconds, 3);
  EXPECT_EQ(counts.stalls, 1);
  ::close(fds[0]);
}

// A stream of lines that do not read is said (with an excerpt), not only counted, and one that
// gives no reading at all stalls, saying what it read.
TEST(WattmetreSource, GarbageIsSaidAndAStreamOfNothingElseStalls) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  WattmetreSource source(PipeOptions(fds[0], 300));
  std::string text;
  for (int k = 0; k < 40; ++k) text += "\x01\x02 not a wattmeter line " + std::to_string(k) + "\n";
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), ssize_t(text.size()));
  Collected got;
  Status status = source.Run(std::stop_source().get_token(), {}, got.Emit(), got.Say());
  ::close(fds[1]);
  EXPECT_EQ(status.code(), Status::Code::kUnavailable) << status.ToString();
  EXPECT_NE(status.message().find("no reading for 0.3 s (40 lines read, 40 of them not wattmeter "
                                  "lines, the last \"\\x01\\x02 not a wattmeter line 39\")"),
            std::string::npos)
      << status.message();
  // Said once at the first (then at most once a minute), naming the stream and the version.
  ASSERT_EQ(got.said.size(), 1u);
  EXPECT_NE(got.said[0].find("wattmetre://wattmetre1/: 1 line does not read as the wattmeter's "
                             "version 2 lines, dropped (the last: \"\\x01\\x02 not a"),
            std::string::npos)
      << got.said[0];
  EXPECT_EQ(source.counts().malformed_lines, 40);
  EXPECT_TRUE(got.readings.empty());
  ::close(fds[0]);
}

// The writer leaves: the end of the stream, everything flushed.
TEST(WattmetreSource, AFifoWhoseWriterLeavesHasEnded) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "fifo").string();
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  WattmetreSource source(SourceOptions(path));
  Collected got;
  Status status;
  std::thread runner(
      [&] { status = source.Run(std::stop_source().get_token(), {}, got.Emit(), got.Say()); });
  int writer = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(writer, 0);
  std::string text = Line(kT, 1, 2) + Line(kT + 1, 3, 4);
  ASSERT_EQ(::write(writer, text.data(), text.size()), ssize_t(text.size()));
  ::close(writer);
  runner.join();
  EXPECT_EQ(status.code(), Status::Code::kUnavailable) << status.ToString();
  ASSERT_EQ(got.readings.size(), 2u);
  EXPECT_EQ(got.readings[0].value, 2);
  EXPECT_EQ(got.readings[1].value, 3);
}

// On stop, what the stream already holds is read before it is closed: no line the wattmeter
// printed is left in the pipe.
TEST(WattmetreSource, OnStopReadsWhatThePipeHoldsBeforeClosing) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  WattmetreSourceOptions options;
  options.averager = TwoPortOptions();
  options.name = "wattmetre://wattmetre1/";
  options.open = [&]() -> Result<WattmetreStream> { return WattmetreStream{fds[0], nullptr}; };
  WattmetreSource source(options);
  std::string text;
  for (int k = 0; k < 120; ++k) text += Line(kT + k * 20 * kNanosPerMilli, k, 1);
  ASSERT_EQ(::write(fds[1], text.data(), text.size()), ssize_t(text.size()));
  Collected got;
  std::stop_source stop;
  stop.request_stop();  // before Run even opens the stream
  EXPECT_TRUE(source.Run(stop.get_token(), {}, got.Emit(), got.Say()).ok());
  ::close(fds[1]);
  EXPECT_EQ(source.counts().lines, 120);
  EXPECT_EQ(got.readings.size(), 6u);  // 3 seconds (50, 50, 20 lines) of 2 ports
  auto counters = source.Counters();
  ASSERT_FALSE(counters.empty());
  EXPECT_EQ(counters[0], (std::pair<std::string, int64_t>{"lines", 120}));
}

// A stream given by the caller (a child's standard output): its `finish` runs once it is closed,
// and its error is the status of a stream that ended.
TEST(WattmetreSource, ACallersStreamIsFinishedOnceClosed) {
  for (bool stop_first : {false, true}) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    int finished = 0;
    WattmetreSourceOptions options;
    options.averager = TwoPortOptions();
    options.name = "wattmetre://wattmetre1/";
    options.open = [&]() -> Result<WattmetreStream> {
      return WattmetreStream{fds[0], [&] {
                               ++finished;
                               return Status::IOError("wattmetre-read exited with status 3");
                             }};
    };
    WattmetreSource source(options);
    Collected got;
    std::stop_source stop;
    Status status;
    std::thread runner([&] { status = source.Run(stop.get_token(), {}, got.Emit(), got.Say()); });
    std::string text = Line(kT, 1, 2) + Line(kT + kNanosPerSecond, 3, 4);
    ASSERT_EQ(::write(fds[1], text.data(), text.size()), ssize_t(text.size()));
    if (stop_first) {
      // Until the first second is out: both lines were read.
      EXPECT_TRUE(got.WaitForAReading());
      stop.request_stop();
    } else {
      ::close(fds[1]);
    }
    runner.join();
    if (stop_first) ::close(fds[1]);
    EXPECT_EQ(finished, 1);
    EXPECT_EQ(got.readings.size(), 4u);
    if (stop_first) {
      EXPECT_TRUE(status.ok()) << status.ToString();
    } else {
      EXPECT_EQ(status.code(), Status::Code::kIOError);
      EXPECT_EQ(status.message(), "wattmetre://wattmetre1/: wattmetre-read exited with status 3");
    }
  }
}

// --- From descriptions ---

MetricDescription Description(const std::string& path, const std::string& query = "") {
  MetricDescription m;
  m.name = "wattmetre_power_watt";
  m.device_id = "wattmetre1";
  m.url.scheme = "wattmetre";
  m.url.host = "wattmetre1";
  m.url.path = path;
  m.url.query = query;
  m.origin = "metrics/wattmetre.yaml, entry 1";
  return m;
}

TEST(MakeWattmetreSource, ReadsTheDescription) {
  kwatt::testing::TempDir dir;
  MetricDescription m = Description("-", "version=3");
  m.mapping_file = WriteFile(dir, "map.yaml", "nova-1: [wattmetre1-port0]\n");
  m.scale_factor = 2;
  m.labels = {{"site", "\"lyon\""}};
  auto options = WattmetreSourceOptionsOf(m);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_EQ(options->version, 3);
  EXPECT_EQ(options->averager.wattmetre_id, "wattmetre1");
  EXPECT_EQ(options->averager.nodes.at("wattmetre1-port0"), "nova-1");
  EXPECT_EQ(options->averager.scale_factor, 2);
  EXPECT_EQ(options->averager.labels, m.labels);
  EXPECT_TRUE(bool(options->open));
  EXPECT_TRUE(MakeWattmetreSource({m}, {}).ok());

  MetricDescription command = Description("");
  command.command = {"wattmetre-read", "--tty=/dev/ttyUSB0"};
  options = WattmetreSourceOptionsOf(command);
  ASSERT_TRUE(options.ok()) << options.status().ToString();
  EXPECT_FALSE(bool(options->open));  // for the caller to set
  EXPECT_EQ(options->version, 2);
}

TEST(MakeWattmetreSource, RefusesWhatItCannotRead) {
  auto error = [](const MetricDescription& m) {
    auto options = WattmetreSourceOptionsOf(m);
    EXPECT_EQ(options.status().code(), Status::Code::kInvalidArgument);
    EXPECT_NE(options.status().message().find("metrics/wattmetre.yaml, entry 1"),
              std::string::npos);
    return options.status().message();
  };
  EXPECT_NE(error(Description("-", "version=4")).find("version 4"), std::string::npos);
  EXPECT_NE(error(Description("-", "rate=50")).find("rate=50"), std::string::npos);
  EXPECT_NE(error(Description("")).find("no stream"), std::string::npos);
  MetricDescription both = Description("dev/ttyUSB0");
  both.command = {"wattmetre-read"};
  EXPECT_NE(error(both).find("both"), std::string::npos);
  MetricDescription no_host = Description("-");
  no_host.url.host = "";
  error(no_host);
  MetricDescription mapping = Description("-");
  mapping.mapping_file = "/nonexistent/map.yaml";
  EXPECT_EQ(WattmetreSourceOptionsOf(mapping).status().code(), Status::Code::kNotFound);

  MetricDescription second = Description("-");
  second.origin = "metrics/wattmetre.yaml, entry 2";
  auto two = MakeWattmetreSource({Description("-"), second}, {});
  EXPECT_EQ(two.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(two.status().message().find("entry 1; metrics/wattmetre.yaml, entry 2"),
            std::string::npos)
      << two.status().message();
}

TEST(MakeWattmetreSource, ReadsACommandsOutputAndSaysHowItEnded) {
  MetricDescription command = Description("");
  command.command = {"/bin/sh", "-c",
                     "printf 'd,d,1700000000.0,OK,10\nd,d,1700000000.5,OK,20\n'; "
                     "echo 'wattmetre-read: no tty' >&2; exit 3"};
  auto source = MakeWattmetreSource({command}, {});
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  Collected got;
  std::stop_source stop;
  Status status = (*source)->Run(stop.get_token(), {}, got.Emit(), got.Say());
  EXPECT_EQ(status.code(), Status::Code::kUnavailable);
  EXPECT_NE(status.message().find("/bin/sh exited with status 3: wattmetre-read: no tty"),
            std::string::npos)
      << status.message();
  ASSERT_EQ(got.readings.size(), 1u);  // what it printed is read, and its second flushed
  EXPECT_EQ(got.readings[0].value, 15);
  // A command that writes much on standard error while it streams (more than a pipe holds) is
  // read to its end all the same.
  command.command = {
      "/bin/sh", "-c",
      "i=0; while [ $i -lt 3000 ]; do "
      "echo 'wattmetre-read: a debug line of some length, over and over' >&2; "
      "i=$((i+1)); done; printf 'd,d,1700000000.0,OK,10\\nd,d,1700000000.5,OK,30\\n'"};
  auto chatty = MakeWattmetreSource({command}, {});
  ASSERT_TRUE(chatty.ok());
  Collected loud;
  Status ended = (*chatty)->Run(stop.get_token(), {}, loud.Emit(), loud.Say());
  EXPECT_EQ(ended.code(), Status::Code::kUnavailable) << ended.ToString();  // the stream ended
  ASSERT_EQ(loud.readings.size(), 1u);
  EXPECT_EQ(loud.readings[0].value, 20);
  command.command = {"/nonexistent/wattmetre-read"};
  auto missing = MakeWattmetreSource({command}, {});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ((*missing)->Run(stop.get_token(), {}, got.Emit(), got.Say()).code(),
            Status::Code::kNotFound);
}

}  // namespace
}  // namespace kwatt::collect::wattmetre_test
