#include "kwatt/collect/collector.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>

#include "kwatt/http/hardened_server.h"
#include "kwatt/store/open_store.h"
#include "src/testing/manual_clock.h"
#include "src/testing/ports.h"
#include "src/testing/temp_dir.h"

namespace kwatt::collect::collector_test {
namespace {

using std::chrono::milliseconds;

// A Prometheus exporter on loopback (real HTTP): answers at once, or once slow, not before it is
// destroyed (every scrape outlives its timeout).
class Exporter {
 public:
  Exporter() {
    server_.Get("/metrics", [this](const http::Request&, http::Response& response) {
      if (slow_) {
        std::unique_lock lock(mutex_);
        released_cv_.wait(lock, [&] { return released_; });
      }
      ++scrapes_;
      response.set_content(
          "# TYPE power gauge\npower{psu=\"1\"} " + std::to_string(value_.load()) + "\nother 1\n",
          "text/plain");
    });
    port_ = *server_.Bind("127.0.0.1", 0);
    EXPECT_TRUE(server_.Serve().ok());
  }
  ~Exporter() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    released_cv_.notify_all();
    server_.Shutdown();
  }
  int port() const { return port_; }
  void set_slow(bool slow) { slow_ = slow; }
  void set_value(int value) { value_ = value; }
  int scrapes() const { return scrapes_; }

 private:
  std::mutex mutex_;  // before the server, which runs the handlers that wait on it
  std::condition_variable released_cv_;
  bool released_ = false;
  http::HardenedServer server_;
  int port_ = 0;
  std::atomic<bool> slow_{false};
  std::atomic<int> value_{100};
  std::atomic<int> scrapes_{0};
};

// A port nothing listens on: bound, read back, closed.
int FreePort() {
  int port = kwatt::testing::FreeTcpPort();
  EXPECT_GT(port, 0);
  return port;
}

MetricDescription Prometheus(const std::string& device, int port, int64_t period_ms,
                             const std::string& names = "power") {
  MetricDescription metric;
  metric.name = "prom";
  metric.device_id = device;
  metric.url = *ParseMetricUrl("prometheus://127.0.0.1:" + std::to_string(port) + "/" + names);
  metric.update_every_ms = period_ms;
  metric.origin = device;
  return metric;
}

struct Row {
  UnixNanos time;
  std::string device, metric, labels;
  double value;
};

std::vector<Row> RowsOf(const std::string& path) {
  std::vector<Row> rows;
  auto store = store::OpenStore(path, false);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) return rows;
  store::StoreQuery query;
  query.start = 0;
  query.end = INT64_MAX;
  EXPECT_TRUE((*store)
                  ->Query(query,
                          [&](const RowBatch& batch, const StringInterner& interner) {
                            for (size_t i = 0; i < batch.size(); ++i) {
                              rows.push_back(
                                  {batch.time[i], std::string(interner.Get(batch.device[i])),
                                   std::string(interner.Get(batch.metric[i])),
                                   std::string(interner.Get(batch.labels[i])), batch.value[i]});
                            }
                            return Status::OK();
                          })
                  .ok());
  return rows;
}

// The wall clock's origin in the tests: monotonic 0 is this instant.
constexpr UnixNanos kWallOrigin = 1'760'000'000 * kNanosPerSecond;
constexpr int64_t kMs = 1'000'000;  // nanoseconds

// The collector's time, run by the test: the devices' ticks and the writer's flushes happen one
// at a time in the order of their times, as far as the test lets them (nothing sleeps).
class TestTime {
 public:
  TestTime() { clock->SetOrdered(true); }
  // Runs every tick and flush up to `ms` milliseconds after the start: `sleepers` threads (each
  // device's and the writer) then wait beyond it.
  void RunTo(int64_t ms, size_t sleepers) {
    clock->WaitUntilIdle(sleepers);  // every thread asleep on the clock before it moves
    clock->AdvanceTo(ms * kMs);
    clock->WaitUntilIdle(sleepers);
  }
  UnixNanos Wall() { return clock->WallNanos(); }
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>(0, kWallOrigin);
};

CollectorOptions FastOptions(const TestTime& time) {
  CollectorOptions options;
  options.flush_interval = milliseconds(50);
  options.jobs_every = milliseconds(50);
  options.log = [](const std::string&) {};
  options.collector_id.clear();  // tests count rows: no self metrics but in the test of them
  options.clock = time.clock;
  return options;
}

// The threads that sleep on the clock: one per device, and the writer.
size_t Sleepers(Collector& collector) { return collector.Stats().devices.size() + 1; }

StoreOpener OpenerOf(const std::string& path) {
  return [path] { return store::OpenStore(path, true); };
}

TEST(Collector, PollsEachDeviceAtItsPeriodAndWritesRowsTimestampedAtTheRequest) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  Exporter exporter;
  CollectConfig config;
  config.metrics.push_back(Prometheus("nova-1", exporter.port(), 100));
  TestTime time;
  CollectorOptions options = FastOptions(time);
  options.collector_id = "collector-1";
  auto collector = Collector::Create(config, OpenerOf(path), options);
  ASSERT_TRUE(collector.ok()) << collector.status().ToString();
  (*collector)->Start();
  time.RunTo(1000, Sleepers(**collector));
  ASSERT_TRUE((*collector)->Stop().ok());
  std::vector<Row> rows = RowsOf(path);
  std::vector<UnixNanos> times;
  std::map<std::string, double> self;
  for (const Row& row : rows) {
    if (row.device == "collector-1") self[row.metric] = row.value;
    if (row.device != "nova-1") continue;
    EXPECT_EQ(row.metric, "prom_power");  // "other" is not selected
    EXPECT_EQ(row.labels, R"({"psu":"1"})");
    EXPECT_EQ(row.value, 100);
    times.push_back(row.time);
  }
  // The first tick within the first period (a random start), then one every 100 ms, each row
  // timestamped when its request was sent: every tick up to 1 s, and no other.
  ASSERT_FALSE(times.empty());
  std::sort(times.begin(), times.end());
  const int64_t first = times[0] - kWallOrigin;
  EXPECT_GE(first, 0);
  EXPECT_LT(first, 100 * kMs);
  EXPECT_EQ(int64_t(times.size()), (1000 * kMs - first) / (100 * kMs) + 1);
  for (size_t i = 1; i < times.size(); ++i) EXPECT_EQ(times[i] - times[i - 1], 100 * kMs) << i;
  CollectorStats stats = (*collector)->Stats();
  ASSERT_EQ(stats.devices.size(), 1u);
  EXPECT_EQ(stats.devices[0].polls, int64_t(times.size()));
  EXPECT_EQ(stats.devices[0].late, 0);
  EXPECT_EQ(stats.devices[0].errors, 0);
  EXPECT_EQ(exporter.scrapes(), int(times.size()));
  EXPECT_EQ(stats.rows_written, int64_t(rows.size()));
  // The collector's own metrics, written when it stopped.
  EXPECT_EQ(self["kwatt_collect_polls_total"], double(times.size()));
  EXPECT_EQ(self["kwatt_collect_errors_total"], 0);
  EXPECT_EQ(self.count("kwatt_collect_rows_written_total"), 1u);
  std::string text = (*collector)->PrometheusText();
  EXPECT_NE(
      text.find("kwatt_collect_polls_total{device=\"prometheus://127.0.0.1:" +
                std::to_string(exporter.port()) + "/power\"} " + std::to_string(times.size())),
      std::string::npos)
      << text;
}

TEST(Collector, DevicesThatRedactAlikeHaveSeriesOfTheirOwn) {
  // Two accounts on one exporter: two devices, whose redacted URLs are the same.
  kwatt::testing::TempDir dir;
  CollectConfig config;
  for (const std::string password : {"first-secret", "second-secret"}) {
    MetricDescription metric = Prometheus("nova-1", 9, 100);
    metric.url = *ParseMetricUrl("prometheus://kwatt:" + password + "@127.0.0.1:9/power");
    config.metrics.push_back(metric);
  }
  TestTime time;
  auto collector =
      Collector::Create(config, OpenerOf((dir.root() / "s.store").string()), FastOptions(time));
  ASSERT_TRUE(collector.ok()) << collector.status().ToString();
  CollectorStats stats = (*collector)->Stats();
  ASSERT_EQ(stats.devices.size(), 2u);
  EXPECT_EQ(stats.devices[0].name, "prometheus://kwatt:***@127.0.0.1:9/power");
  EXPECT_EQ(stats.devices[1].name, "prometheus://kwatt:***@127.0.0.1:9/power (2)");
  std::string text = (*collector)->PrometheusText();
  EXPECT_NE(text.find("kwatt_collect_polls_total{device=\"prometheus://kwatt:***@127.0.0.1:9/"
                      "power\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("kwatt_collect_polls_total{device=\"prometheus://kwatt:***@127.0.0.1:9/"
                      "power (2)\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("secret"), std::string::npos) << text;
}

TEST(Collector, ASlowOrDeadDeviceDelaysOnlyItselfAndIsCounted) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  Exporter fast, slow;
  slow.set_slow(true);
  // A port nothing listens on.
  int dead_port = FreePort();
  CollectConfig config;
  config.metrics.push_back(Prometheus("fast", fast.port(), 100));
  config.metrics.push_back(Prometheus("slow", slow.port(), 100));
  config.metrics.push_back(Prometheus("dead", dead_port, 100));
  TestTime time;
  auto collector = Collector::Create(config, OpenerOf(path), FastOptions(time));
  ASSERT_TRUE(collector.ok());
  (*collector)->Start();
  time.RunTo(1200, Sleepers(**collector));
  ASSERT_TRUE((*collector)->Stop().ok());
  CollectorStats stats = (*collector)->Stats();
  ASSERT_EQ(stats.devices.size(), 3u);
  const DeviceStats& f = stats.devices[0];
  const DeviceStats& s = stats.devices[1];
  const DeviceStats& d = stats.devices[2];
  // Every device polled at each of its 12 or 13 ticks (a random start within the first period).
  for (const DeviceStats* device : {&f, &s, &d}) {
    EXPECT_GE(device->polls, 12) << device->name;
    EXPECT_LE(device->polls, 13) << device->name;
  }
  EXPECT_EQ(f.errors, 0);
  EXPECT_EQ(f.overruns, 0);
  // The slow exporter does not answer within its 100 ms timeout: every poll.
  EXPECT_EQ(s.timeouts, s.polls);
  EXPECT_EQ(s.errors, s.polls);
  EXPECT_EQ(d.errors, d.polls);
  EXPECT_EQ(d.timeouts, 0);  // refused at once
  int fast_rows = 0;
  for (const Row& row : RowsOf(path)) fast_rows += row.device == "fast";
  EXPECT_EQ(fast_rows, f.polls);
}

TEST(Collector, OptionalMetricsAreReadWhileAMonitorJobOfTheirNodeRuns) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  Exporter exporter;
  CollectConfig config;
  MetricDescription always = Prometheus("pdu-1", exporter.port(), 100, "other");
  MetricDescription optional = Prometheus("pdu-1", exporter.port(), 100, "power");
  optional.optional = true;
  optional.name = "prom_power";
  optional.labels.emplace_back("_device_alias", "\"nova-7\"");
  optional.device_alias = "nova-7";
  config.metrics = {always, optional};
  TestTime time;
  CollectorOptions options = FastOptions(time);
  options.site = "lab";
  auto collector = Collector::Create(config, OpenerOf(path), options);
  ASSERT_TRUE(collector.ok());
  (*collector)->Start();
  time.RunTo(500, Sleepers(**collector));
  UnixNanos promoted_from = time.Wall();
  {
    auto store = store::OpenStore(path, false);
    ASSERT_TRUE(store.ok());
    jobs::Job job;
    job.site = "lab";
    job.uid = 1;
    job.nodes = {"nova-7"};
    job.started_at = promoted_from;
    job.types = {"monitor=prom_pow"};  // a prefix: re.match
    ASSERT_TRUE((*store)->PutJob(job).ok());
  }
  time.RunTo(1200, Sleepers(**collector));  // the writer reads the jobs every 50 ms
  ASSERT_TRUE((*collector)->Stop().ok());
  int power_before = 0, power_after = 0, other = 0;
  for (const Row& row : RowsOf(path)) {
    if (row.metric == "prom_other") ++other;
    if (row.metric == "prom_power") (row.time < promoted_from ? power_before : power_after)++;
  }
  EXPECT_GE(other, 12);
  EXPECT_EQ(power_before, 0);
  EXPECT_GE(power_after, 6);  // every tick from 600 ms
}

// The real embedded store, whose writes fail while `down` is set: a store that is down or full,
// injected as leveldb's fault-injection Env does (the integration test stops a real PostgreSQL).
class FaultyStore : public store::Store {
 public:
  FaultyStore(std::unique_ptr<store::Store> store, const std::atomic<bool>* down)
      : store_(std::move(store)), down_(down) {}
  Status Append(const RowBatch& batch, const StringInterner& interner) override {
    if (*down_) return Status::IOError("database or disk is full (test)");
    return store_->Append(batch, interner);
  }
  Status AppendImported(const RowBatch& batch, const StringInterner& interner,
                        const std::string& key, const std::optional<store::ImportMark>& from,
                        const store::ImportMark& to) override {
    return store_->AppendImported(batch, interner, key, from, to);
  }
  Result<std::optional<store::ImportMark>> GetImportMark(const std::string& key) override {
    return store_->GetImportMark(key);
  }
  Status Flush() override { return *down_ ? Status::IOError("full (test)") : store_->Flush(); }
  Status Seal() override { return store_->Seal(); }
  Status Query(const store::StoreQuery& q, const store::QueryCallback& c) override {
    return store_->Query(q, c);
  }
  Status PutJob(const jobs::Job& job) override { return store_->PutJob(job); }
  Result<int64_t> AddJob(const jobs::Job& job, bool next_id) override {
    return store_->AddJob(job, next_id);
  }
  Result<jobs::Job> GetJob(const std::string& site, int64_t id) override {
    return store_->GetJob(site, id);
  }
  Result<std::vector<jobs::Job>> Jobs(const std::string& site, UnixNanos a, UnixNanos b) override {
    return store_->Jobs(site, a, b);
  }
  Status PutCatalogue(const std::string& s, const std::string& c, const Catalogue& k) override {
    return store_->PutCatalogue(s, c, k);
  }
  Result<Catalogue> GetCatalogue(const std::string& s, const std::string& c) override {
    return store_->GetCatalogue(s, c);
  }
  Result<store::CheckReport> Check() override { return store_->Check(); }
  Result<store::StoreInfo> Info() override { return store_->Info(); }

 private:
  std::unique_ptr<store::Store> store_;
  const std::atomic<bool>* down_;
};

// Opens the store at `path` as a FaultyStore that fails while *down.
StoreOpener FaultyOpener(const std::string& path, const std::atomic<bool>* down) {
  return [path, down]() -> Result<std::unique_ptr<store::Store>> {
    KWATT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> real, store::OpenStore(path, true));
    return std::unique_ptr<store::Store>(new FaultyStore(std::move(real), down));
  };
}

void RunThroughAnOutage(bool with_spool, CollectorStats* stats, int64_t* stored) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  std::string spool = (dir.root() / "spool").string();
  Exporter exporter;
  CollectConfig config;
  config.metrics.push_back(Prometheus("nova-1", exporter.port(), 50));
  std::atomic<bool> down{false};
  StoreOpener opener = FaultyOpener(path, &down);
  TestTime time;
  CollectorOptions options = FastOptions(time);
  options.memory_rows = 3;
  if (with_spool) options.spool_dir = spool;
  auto collector = Collector::Create(config, opener, options);
  ASSERT_TRUE(collector.ok());
  (*collector)->Start();
  const size_t sleepers = Sleepers(**collector);
  time.RunTo(300, sleepers);
  down = true;
  time.RunTo(900, sleepers);
  CollectorStats during = (*collector)->Stats();
  EXPECT_GT(during.store_errors, 0);
  if (with_spool) {
    EXPECT_GT(during.rows_spooled, 0);
  }
  down = false;
  time.RunTo(3400, sleepers);  // the retries back off: 1 s, then 2 s
  ASSERT_TRUE((*collector)->Stop().ok());
  *stats = (*collector)->Stats();
  *stored = int64_t(RowsOf(path).size());
  if (with_spool) {
    EXPECT_TRUE(std::filesystem::is_empty(spool));
  }
}

TEST(Collector, RowsWaitInMemoryThenInTheSpoolWhileTheStoreFailsAndNoneIsLost) {
  CollectorStats stats;
  int64_t stored = 0;
  RunThroughAnOutage(/*with_spool=*/true, &stats, &stored);
  EXPECT_EQ(stats.rows_dropped, 0);
  EXPECT_EQ(stats.rows_spooled, 0);
  EXPECT_EQ(stats.rows_written, stats.devices[0].readings);
  EXPECT_EQ(stored, stats.rows_written);
}

TEST(Collector, WithoutASpoolRowsBeyondTheMemoryBoundAreDroppedAndCounted) {
  CollectorStats stats;
  int64_t stored = 0;
  RunThroughAnOutage(/*with_spool=*/false, &stats, &stored);
  EXPECT_GT(stats.rows_dropped, 0);
  EXPECT_EQ(stats.rows_written + stats.rows_dropped, stats.devices[0].readings);
  EXPECT_EQ(stored, stats.rows_written);
}

TEST(Collector, RowsTheStoreDidNotTakeAreInTheSpoolBeforeTheNextFlushWhateverTheMemoryBound) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  std::string spool = (dir.root() / "spool").string();
  Exporter exporter;
  CollectConfig config;
  config.metrics.push_back(Prometheus("nova-1", exporter.port(), 50));
  std::atomic<bool> down{true};
  StoreOpener opener = FaultyOpener(path, &down);
  TestTime time;
  CollectorOptions options = FastOptions(time);
  options.memory_rows = 1'000'000;  // never reached: memory alone would hold every row
  options.spool_dir = spool;
  auto collector = Collector::Create(config, opener, options);
  ASSERT_TRUE(collector.ok());
  (*collector)->Start();
  time.RunTo(800, Sleepers(**collector));
  CollectorStats during = (*collector)->Stats();
  // What was read (but the last flush interval's) is on disk: a kill -9 now loses little.
  EXPECT_GT(during.rows_spooled, 0);
  EXPECT_LT(during.rows_pending, 10) << "rows held in memory while the store is down";
  down = false;
  ASSERT_TRUE((*collector)->Stop().ok());
  CollectorStats stats = (*collector)->Stats();
  EXPECT_EQ(stats.rows_dropped, 0);
  EXPECT_EQ(int64_t(RowsOf(path).size()), stats.devices[0].readings);
}

// A poll larger than the queue between two writes (a 50 MB exposition) is dropped, counted
// against its device and said as what it is, not as a writer that is stuck.
TEST(Collector, APollLargerThanTheQueueIsDroppedAgainstItsDeviceSayingWhy) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  http::HardenedServer server;
  server.Get("/metrics", [](const http::Request&, http::Response& response) {
    std::string text = "# TYPE power gauge\n";
    for (int i = 0; i < 500; ++i) text += "power{psu=\"" + std::to_string(i) + "\"} 1\n";
    response.set_content(text, "text/plain");
  });
  int port = *server.Bind("127.0.0.1", 0);
  ASSERT_TRUE(server.Serve().ok());
  http::HardenedServer small;  // another device, whose polls fit
  small.Get("/metrics", [](const http::Request&, http::Response& response) {
    response.set_content("# TYPE power gauge\npower 1\n", "text/plain");
  });
  int small_port = *small.Bind("127.0.0.1", 0);
  ASSERT_TRUE(small.Serve().ok());
  CollectConfig config;
  config.metrics.push_back(Prometheus("nova-1", port, 100));
  config.metrics.push_back(Prometheus("nova-2", small_port, 100));
  TestTime time;
  CollectorOptions options = FastOptions(time);
  options.memory_rows = 100;
  options.queue_rows = 100;
  std::mutex mutex;
  std::vector<std::string> lines;
  options.log = [&](const std::string& line) {
    std::lock_guard lock(mutex);
    lines.push_back(line);
  };
  auto collector = Collector::Create(config, OpenerOf(path), options);
  ASSERT_TRUE(collector.ok());
  (*collector)->Start();
  time.RunTo(400, Sleepers(**collector));
  ASSERT_TRUE((*collector)->Stop().ok());
  server.Shutdown();
  small.Shutdown();
  CollectorStats stats = (*collector)->Stats();
  ASSERT_EQ(stats.devices.size(), 2u);
  EXPECT_GT(stats.devices[0].readings, 0);
  EXPECT_GT(stats.devices[1].readings, 0);
  EXPECT_EQ(stats.devices[0].dropped, stats.devices[0].readings);
  EXPECT_EQ(stats.devices[1].dropped, 0);
  EXPECT_EQ(stats.rows_dropped, stats.devices[0].dropped);
  std::lock_guard lock(mutex);
  std::string said;
  for (const std::string& line : lines) said += line + "\n";
  EXPECT_NE(said.find(stats.devices[0].name + ": one poll gave 500 readings, more than the "
                                              "collector holds between two writes (100)"),
            std::string::npos)
      << said;
  EXPECT_EQ(said.find("stuck"), std::string::npos) << said;
  EXPECT_NE(
      (*collector)
          ->PrometheusText()
          .find("kwatt_collect_readings_dropped_total{device=\"" + stats.devices[0].name + "\"} "),
      std::string::npos);
}

TEST(Collector, AStoreFileDeletedUnderTheCollectorIsMadeAgainAndTheRowsWrittenThere) {
  kwatt::testing::TempDir dir;
  std::string path = (dir.root() / "s.store").string();
  Exporter exporter;
  CollectConfig config;
  config.metrics.push_back(Prometheus("nova-1", exporter.port(), 50));
  TestTime time;
  CollectorOptions options = FastOptions(time);
  options.store_file = path;
  std::vector<std::string> said;
  std::mutex said_mutex;
  options.log = [&](const std::string& line) {
    std::lock_guard lock(said_mutex);
    said.push_back(line);
  };
  auto collector = Collector::Create(config, OpenerOf(path), options);
  ASSERT_TRUE(collector.ok());
  (*collector)->Start();
  const size_t sleepers = Sleepers(**collector);
  time.RunTo(300, sleepers);
  std::filesystem::remove(path);
  UnixNanos deleted_at = time.Wall();
  time.RunTo(2100, sleepers);  // the reopening waits 1 s
  ASSERT_TRUE((*collector)->Stop().ok());
  ASSERT_TRUE(std::filesystem::exists(path));
  int64_t after = 0;
  for (const Row& row : RowsOf(path)) after += row.time > deleted_at ? 1 : 0;
  EXPECT_GT(after, 5);
  std::lock_guard lock(said_mutex);
  bool told = false;
  for (const std::string& line : said) told = told || line.find("was deleted") != line.npos;
  EXPECT_TRUE(told);
}

TEST(Collector, ADriverErrorStopsNothingFromStartingAndNamesTheDescription) {
  CollectConfig config;
  MetricDescription json;
  json.name = "power";
  json.device_id = "lab-1";
  json.url = *ParseMetricUrl("json://127.0.0.1:1/status#power");
  json.origin = "conf/lab.yaml, entry 4";
  config.metrics.push_back(json);
  TestTime time;
  auto collector = Collector::Create(config, OpenerOf("/nonexistent/s.store"), FastOptions(time));
  ASSERT_FALSE(collector.ok());
  EXPECT_NE(collector.status().message().find("conf/lab.yaml, entry 4: url's fragment"),
            std::string::npos)
      << collector.status().message();
}

}  // namespace
}  // namespace kwatt::collect::collector_test
