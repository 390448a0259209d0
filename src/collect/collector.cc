#include "kwatt/collect/collector.h"

#include <pthread.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <set>
#include <thread>
#include <unordered_map>

#include "kwatt/core/backoff.h"
#include "kwatt/core/json_text.h"
#include "kwatt/core/prometheus_writer.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_parser.h"
#include "kwatt/core/text.h"

namespace kwatt::collect {
namespace {

// Poll deadlines are real time (a device answers in real time); every schedule is the injected
// clock's (CollectorOptions::clock), in its monotonic nanoseconds.
using Steady = std::chrono::steady_clock;

int64_t Nanos(std::chrono::nanoseconds duration) { return duration.count(); }

using std::chrono::milliseconds;

// A log line on stderr, stamped with `now` (the collector's clock).
void DefaultLog(UnixNanos now, const std::string& line) {
  std::string stamp = FormatUtcTimestamp(now);
  std::fprintf(stderr, "%s kwatt collect: %s\n", stamp.c_str(), line.c_str());
}

// Which optional metrics are promoted now: for each node (or device), the regexes of its
// running monitor jobs.
struct Promotions {
  std::unordered_map<std::string, std::vector<std::regex>> by_node;

  bool Matches(std::string_view node, std::string_view name) const {
    if (node.empty()) return false;
    auto it = by_node.find(std::string(node));
    if (it == by_node.end()) return false;
    for (const std::regex& regex : it->second) {
      // re.match: anchored at the start, not at the end.
      if (std::regex_search(name.begin(), name.end(), regex,
                            std::regex_constants::match_continuous))
        return true;
    }
    return false;
  }
};

// The monitor regex of an OAR job type, when it is one: "monitor" (everything) or "monitor=RE".
std::optional<std::string> MonitorRegex(const std::string& type) {
  if (type == "monitor") return std::string(".*");
  if (type.rfind("monitor=", 0) == 0) return type.substr(8);
  return std::nullopt;
}

// A monitor type's regex, compiled as the collector matches it; InvalidArgument naming the type.
Result<std::regex> CompileMonitorRegex(const std::string& type, const std::string& regex) {
  try {
    return std::regex(regex, std::regex::ECMAScript | std::regex::optimize);
  } catch (const std::regex_error& error) {
    return Status::InvalidArgument("the job type '" + type +
                                   "' is a monitor type whose regular expression does not "
                                   "compile (" +
                                   error.what() +
                                   "): give monitor=REGEX with a valid ECMAScript regex, e.g. "
                                   "monitor=wattmetre_power_watt");
  }
}

// Rows of one write: a batch and its own interner (labels texts vary from poll to poll, so an
// interner shared for the collector's life would grow without bound).
struct Chunk {
  RowBatch batch;
  StringInterner interner;
};

std::unique_ptr<Chunk> MakeChunk(std::vector<Reading>& readings) {
  auto chunk = std::make_unique<Chunk>();
  RowBatch& batch = chunk->batch;
  for (Reading& reading : readings) {
    // The store keeps microseconds.
    UnixNanos time = FloorDiv(reading.time, 1000) * 1000;
    batch.time.push_back(time);
    batch.utc_offset.push_back(ParisUtcOffsetSeconds(FloorDiv(time, kNanosPerSecond)));
    batch.device.push_back(chunk->interner.Intern(reading.device_id));
    batch.metric.push_back(chunk->interner.Intern(reading.metric_id));
    batch.value.push_back(reading.value);
    batch.labels.push_back(chunk->interner.Intern(LabelsText(std::move(reading.labels))));
  }
  return chunk;
}

// A thread with a stack of its own size: the collector runs one thread per device, and 1,000
// threads of glibc's default 8 MB stack reserve 8 GB of address space (refused where memory is not
// overcommitted). A device's poll needs little: curl, net-snmp, a subprocess, a text parser.
class DeviceThread {
 public:
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  static constexpr size_t kStackBytes = size_t(4) << 20;  // sanitizers' frames are larger
#else
  static constexpr size_t kStackBytes = size_t(512) << 10;
#endif

  DeviceThread() = default;
  DeviceThread(const DeviceThread&) = delete;
  DeviceThread& operator=(const DeviceThread&) = delete;
  ~DeviceThread() {
    request_stop();
    join();
  }

  // Runs body(stop_token) on a new thread; false (and nothing runs) when it cannot be made.
  bool Start(std::function<void(std::stop_token)> body) {
    body_ = std::move(body);
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, kStackBytes);
    started_ = pthread_create(&thread_, &attributes, &DeviceThread::Main, this) == 0;
    pthread_attr_destroy(&attributes);
    return started_;
  }
  void request_stop() { stop_.request_stop(); }
  bool joinable() const { return started_; }
  void join() {
    if (started_) {
      pthread_join(thread_, nullptr);
      started_ = false;
    }
  }

 private:
  static void* Main(void* self_pointer) {
    auto* self = static_cast<DeviceThread*>(self_pointer);
    self->body_(self->stop_.get_token());
    return nullptr;
  }

  std::function<void(std::stop_token)> body_;
  std::stop_source stop_;
  pthread_t thread_{};
  bool started_ = false;
};

}  // namespace

class Collector::Impl {
 public:
  struct Worker {
    std::string name;
    std::vector<MetricDescription> metrics;
    std::unique_ptr<Device> device;        // a polled device, or
    std::unique_ptr<StreamSource> stream;  // a stream
    mutable std::mutex mutex;              // guards stats and the log state
    DeviceStats stats;
    std::string last_error;
    int64_t last_error_logged = INT64_MIN / 2;      // the clock's monotonic nanoseconds
    std::map<std::string, int64_t> problem_logged;  // each problem said once a minute
    int64_t failing = 0;
    DeviceThread thread;
  };

  CollectorOptions options;
  StoreOpener open_store;
  std::unique_ptr<store::Store> store;  // the writer thread's (and Create's) only
  std::vector<std::unique_ptr<Worker>> workers;

  // Promotions, replaced whole by the writer thread.
  mutable std::mutex promotions_mutex;
  std::shared_ptr<const Promotions> promotions = std::make_shared<Promotions>();

  // Readings waiting for the writer.
  mutable std::mutex queue_mutex;
  std::vector<Reading> incoming;
  // When the writer last took the queue (monotonic nanoseconds): what a dropped poll's message
  // says.
  std::atomic<int64_t> last_take{0};

  // The writer's state (stats under stats_mutex).
  std::deque<std::unique_ptr<Chunk>> unsent;
  size_t unsent_rows = 0;
  std::atomic<int64_t> unsent_rows_shared{0};  // unsent_rows, for Stats()
  struct SpoolFile {
    std::string path;
    int64_t rows = 0;
    int64_t bytes = 0;
  };
  std::deque<SpoolFile> spool_files;
  int64_t spool_file_bytes = 0;
  int64_t spool_counter = 0;
  int64_t next_store_attempt = INT64_MIN / 2;
  Backoff store_backoff{BackoffPolicy{1.0, 10.0}};  // 1 s, 2 s, 4 s... up to 10 s
  mutable std::mutex stats_mutex;
  CollectorStats totals;  // devices unused
  int64_t dropped_unreported = 0;
  int64_t dropped_logged = INT64_MIN / 2;
  Status last_write_status;
  // The embedded store's file as opened (options.store_file): its device and inode.
  std::optional<std::pair<dev_t, ino_t>> store_file_identity;
  std::set<std::string> reported_job_types;  // job types said once to be ignored
  std::jthread writer;
  bool started = false;
  bool stopped = false;

  void Log(const std::string& line) const {
    if (options.log) {
      options.log(line);
    } else {
      DefaultLog(options.clock->WallNanos(), line);
    }
  }

  std::shared_ptr<const Promotions> CurrentPromotions() const {
    std::lock_guard lock(promotions_mutex);
    return promotions;
  }

  // Queues a poll's readings for the writer; drops them, counted against `worker` (null: the
  // collector's own metrics) and said, when the queue cannot take them.
  void Push(Worker* worker, std::vector<Reading>&& readings) {
    if (readings.empty()) return;
    const size_t capacity = std::max(options.memory_rows, options.queue_rows);
    std::unique_lock lock(queue_mutex);
    // The writer takes the queue every flush interval; it grows past the memory bound only
    // while the writer is stuck in a write (a store that hangs), or when one poll alone is
    // larger than the bound: then these readings are dropped.
    if (incoming.size() + readings.size() > capacity) {
      size_t waiting = incoming.size();
      lock.unlock();
      auto since_take =
          std::chrono::duration<double>(std::chrono::nanoseconds(Now() - last_take.load()));
      const std::string name = worker ? worker->name : "the collector's own metrics";
      std::string why;
      if (readings.size() > capacity) {
        why = name + ": one poll gave " + std::to_string(readings.size()) +
              " readings, more than the collector holds between two writes (" +
              std::to_string(capacity) + "): narrow the device's metrics, or raise --memory-rows";
      } else {
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f", since_take.count());
        why = name + ": the queue of readings waiting for the writer is full (" +
              std::to_string(waiting) + " waiting, " + std::to_string(capacity) +
              " at most); the writer last took readings " + seconds +
              " s ago (a store write that hangs, or devices giving more than it writes)";
      }
      if (worker) {
        std::lock_guard worker_lock(worker->mutex);
        worker->stats.dropped += int64_t(readings.size());
      }
      CountDropped(int64_t(readings.size()), why);
      return;
    }
    if (incoming.empty()) {
      incoming = std::move(readings);
    } else {
      incoming.insert(incoming.end(), std::make_move_iterator(readings.begin()),
                      std::make_move_iterator(readings.end()));
    }
  }

  void NotePollResult(Worker& worker, const Status& status, size_t readings) {
    std::lock_guard lock(worker.mutex);
    worker.stats.readings += int64_t(readings);
    if (status.ok()) {
      if (worker.failing > 0) {
        Log(worker.name + ": answers again, after " + std::to_string(worker.failing) +
            " failed polls");
      }
      worker.failing = 0;
      worker.last_error.clear();
      return;
    }
    ++worker.stats.errors;
    if (status.message().find("timed out") != std::string::npos) ++worker.stats.timeouts;
    ++worker.failing;
    int64_t now = Now();
    if (status.message() != worker.last_error ||
        now - worker.last_error_logged > Nanos(milliseconds(60'000))) {
      Log(status.message() +
          (worker.failing > 1 ? " (" + std::to_string(worker.failing) + " failed polls in a row)"
                              : ""));
      worker.last_error = status.message();
      worker.last_error_logged = now;
    }
  }

  // Counts a poll's problems, and says each (at most once a minute for the same one).
  void NoteProblems(Worker& worker, std::vector<PollProblem> problems) {
    if (problems.empty()) return;
    std::lock_guard lock(worker.mutex);
    int64_t now = Now();
    if (worker.problem_logged.size() > 10'000) worker.problem_logged.clear();  // bounded
    for (PollProblem& problem : problems) {
      ++(problem.kind == PollProblem::Kind::kBadTimestamp ? worker.stats.bad_timestamps
                                                          : worker.stats.missing_values);
      auto [it, first] = worker.problem_logged.try_emplace(problem.message, now);
      if (first || now - it->second > Nanos(milliseconds(60'000))) {
        it->second = now;
        Log(problem.message);
      }
    }
  }

  bool Promoted(const Promotions& table, const MetricDescription& metric) const {
    return table.Matches(metric.device_id, metric.name) ||
           table.Matches(metric.device_alias, metric.name);
  }

  // The injected clock's monotonic time, and a sleep on it (false when stop was requested first).
  int64_t Now() const { return options.clock->MonotonicNanos(); }
  bool SleepUntil(std::stop_token stop, int64_t when) const {
    return options.clock->SleepUntil(when, stop);
  }

  void RunDevice(std::stop_token stop, Worker& worker, uint64_t seed) {
    const size_t count = worker.metrics.size();
    int64_t period_ms = worker.metrics[0].PeriodMs();
    for (const auto& metric : worker.metrics) period_ms = std::min(period_ms, metric.PeriodMs());
    const milliseconds period(period_ms);
    const milliseconds timeout =
        std::clamp(period, milliseconds(100), std::max(options.max_timeout, milliseconds(100)));
    const milliseconds late_after = std::min(period / 10, milliseconds(100));
    std::mt19937_64 random(seed);
    int64_t tick =
        Now() +
        Nanos(milliseconds(std::uniform_int_distribution<int64_t>(0, period_ms - 1)(random)));
    std::vector<int64_t> due(count, tick);
    int64_t next_refresh = tick + Nanos(options.refresh_every);
    PollRequest request;
    request.active.assign(count, false);
    std::vector<Reading> readings;
    while (SleepUntil(stop, tick)) {
      const int64_t lag = Now() - tick;
      const Steady::time_point started = Steady::now();
      auto table = CurrentPromotions();
      bool any = false;
      for (size_t i = 0; i < count; ++i) {
        const MetricDescription& metric = worker.metrics[i];
        bool is_due = due[i] <= tick + Nanos(period) / 2;
        if (is_due) {
          while (due[i] <= tick + Nanos(period) / 2)
            due[i] += Nanos(milliseconds(metric.PeriodMs()));
        }
        request.active[i] = is_due && (!metric.optional || Promoted(*table, metric));
        any = any || request.active[i];
      }
      if (any) {
        {
          std::lock_guard lock(worker.mutex);
          ++worker.stats.polls;
          if (lag > Nanos(late_after)) ++worker.stats.late;
          worker.stats.max_lag_seconds = std::max(worker.stats.max_lag_seconds, double(lag) / 1e9);
        }
        readings.clear();
        request.sent_at = options.clock->WallNanos();
        request.deadline = started + timeout;
        Status status = worker.device->Poll(request, &readings);
        if (!status.ok()) readings.clear();
        NotePollResult(worker, status, readings.size());
        NoteProblems(worker, worker.device->TakeProblems());
        AliasReadings(&readings);
        Push(&worker, std::move(readings));
        readings = {};
      }
      int64_t now = Now();
      if (now >= next_refresh) {
        Status refreshed = worker.device->Refresh();
        if (!refreshed.ok()) Log(refreshed.message());
        next_refresh = now + Nanos(options.refresh_every);
        now = Now();
      }
      tick += Nanos(period);
      if (now >= tick) {
        int64_t skipped = (now - tick) / Nanos(period) + 1;
        tick += Nanos(period) * skipped;
        std::lock_guard lock(worker.mutex);
        worker.stats.overruns += skipped;
      }
    }
  }

  void RunStream(std::stop_token stop, Worker& worker) {
    milliseconds pause(1000);
    StreamSource::Promoted promoted = [this](std::string_view device, std::string_view alias,
                                             std::string_view name) {
      auto table = CurrentPromotions();
      return table->Matches(device, name) || table->Matches(alias, name);
    };
    StreamSource::Emit emit = [this, &worker](std::vector<Reading>&& readings) {
      NotePollResult(worker, Status::OK(), readings.size());  // "answers again" after failures
      AliasReadings(&readings);
      Push(&worker, std::move(readings));
    };
    StreamSource::Say say = [this](const std::string& line) { Log(line); };
    while (!stop.stop_requested()) {
      {
        std::lock_guard lock(worker.mutex);
        ++worker.stats.polls;
      }
      Status status = worker.stream->Run(stop, promoted, emit, say);
      if (stop.stop_requested()) break;
      if (status.ok()) {
        Log(worker.name + ": read to its end");  // a regular file: read once
        break;
      }
      NotePollResult(worker,
                     status.ok() ? Status::Unavailable(worker.name + ": the stream ended") : status,
                     0);
      if (!SleepUntil(stop, Now() + Nanos(pause))) break;
      pause = std::min(pause * 2, milliseconds(10'000));
    }
  }

  // --- The writer -----------------------------------------------------------------------------

  // Counts dropped rows; says so at most every 10 s (with how many since it last said).
  void CountDropped(int64_t rows, const std::string& why) {
    int64_t unreported = 0;
    {
      std::lock_guard lock(stats_mutex);
      totals.rows_dropped += rows;
      dropped_unreported += rows;
      int64_t now = Now();
      if (now - dropped_logged < Nanos(milliseconds(10'000))) return;
      dropped_logged = now;
      unreported = dropped_unreported;
      dropped_unreported = 0;
    }
    Log("dropped " + std::to_string(unreported) + " rows: " + why);
  }

  // Writes one chunk into a spool file (written whole, then renamed); false with the reason when
  // it cannot (the spool full, a write refused).
  bool SpoolChunk(const Chunk& chunk, std::string* why) {
    int64_t rows = int64_t(chunk.batch.size());
    std::string text;
    RowTextWriter writer;
    for (size_t i = 0; i < chunk.batch.size(); ++i) {
      writer.Append(&text, chunk.batch, i, chunk.interner);
      text += '\n';
    }
    if (spool_file_bytes + int64_t(text.size()) > options.spool_bytes) {
      *why = "the spool is full (" + std::to_string(options.spool_bytes) + " bytes)";
      return false;
    }
    std::error_code error;
    std::filesystem::create_directories(options.spool_dir, error);
    std::string path = options.spool_dir + "/kwatt-collect-" +
                       std::to_string(options.clock->WallNanos() / 1000) + "-" +
                       std::to_string(spool_counter++) + ".jsonl";
    std::string partial = path + ".partial";
    {
      std::ofstream out(partial, std::ios::binary | std::ios::trunc);
      out << text;
      out.flush();
      if (!out) {
        *why = "cannot write the spool file " + partial;
        return false;
      }
    }
    std::filesystem::rename(partial, path, error);
    if (error) {
      *why = "cannot rename the spool file " + partial + ": " + error.message();
      return false;
    }
    spool_files.push_back({path, rows, int64_t(text.size())});
    spool_file_bytes += int64_t(text.size());
    std::lock_guard lock(stats_mutex);
    totals.rows_spooled += rows;
    return true;
  }

  enum class SpillMode {
    kOverMemoryBound,  // the oldest chunks beyond memory_rows: spooled, else dropped
    kEverything,       // every chunk (the store failed at the end): spooled, else dropped
    kToDisk,           // every chunk the spool takes (the store failing): the others stay
  };

  // Moves chunks from memory to the spool (see SpillMode).
  void Spill(SpillMode mode) {
    while (!unsent.empty() &&
           (mode != SpillMode::kOverMemoryBound || unsent_rows > options.memory_rows)) {
      if (mode == SpillMode::kToDisk && options.spool_dir.empty()) return;
      std::unique_ptr<Chunk> chunk = std::move(unsent.front());
      unsent.pop_front();
      int64_t rows = int64_t(chunk->batch.size());
      unsent_rows -= size_t(rows);
      if (options.spool_dir.empty()) {
        CountDropped(rows, mode == SpillMode::kEverything
                               ? "the store failed at the end and there is no spool (give --spool)"
                               : "the store is failing and the memory bound is reached "
                                 "(give --spool)");
        continue;
      }
      std::string why;
      if (SpoolChunk(*chunk, &why)) continue;
      if (mode == SpillMode::kToDisk) {
        // Kept in memory (within its bound) for the next write or spill.
        unsent_rows += size_t(rows);
        unsent.push_front(std::move(chunk));
        return;
      }
      CountDropped(rows, why);
    }
  }

  // Whether the embedded store's file is still the one opened (not deleted, renamed away or
  // replaced); records it when none is recorded.
  Status CheckStoreFile() {
    if (options.store_file.empty()) return Status::OK();
    struct stat now {};
    bool there = ::stat(options.store_file.c_str(), &now) == 0;
    if (!store_file_identity) {
      if (there) store_file_identity = std::make_pair(now.st_dev, now.st_ino);
      return Status::OK();
    }
    if (there && std::make_pair(now.st_dev, now.st_ino) == *store_file_identity) {
      return Status::OK();
    }
    return Status::IOError("the store file " + options.store_file +
                           (there ? " was replaced by another file" : " was deleted") +
                           " while the collector wrote into it: the rows of this write went "
                           "into the old file, which nothing reads; they are written again "
                           "into " +
                           options.store_file + ", opened anew");
  }

  // Appends and flushes one chunk; on failure the store is closed (what it had not made durable
  // is rolled back) and the chunk kept.
  Status WriteChunk(const Chunk& chunk) {
    Status status = store->Append(chunk.batch, chunk.interner);
    if (status.ok()) status = store->Flush();
    if (status.ok()) status = CheckStoreFile();
    if (!status.ok()) {
      store.reset();
      store_file_identity.reset();  // the file the opener makes or finds next
      std::lock_guard lock(stats_mutex);
      ++totals.store_errors;
    }
    return status;
  }

  bool EnsureStore(bool force) {
    if (store) return true;
    int64_t now = Now();
    if (!force && now < next_store_attempt) return false;
    Result<std::unique_ptr<store::Store>> opened = open_store();
    if (opened.ok() && !*opened) opened = Status::Internal("the store opener gave no store");
    if (!opened.ok()) {
      BackOff();
      {
        std::lock_guard lock(stats_mutex);
        ++totals.store_errors;
      }
      Log("the store cannot be opened: " + opened.status().message() + " (retrying)");
      return false;
    }
    store = std::move(opened).value();
    (void)CheckStoreFile();  // records the file opened
    return true;
  }

  // The next attempt at the store after a failure: 1 s, 2 s, 4 s... up to 10 s (doc/collect.md),
  // back to 1 s once a write succeeds (not once the store opens: a store that opens and refuses
  // every write, read-only or full, was retried every second).
  void BackOff() { next_store_attempt = Now() + int64_t(store_backoff.Failed() * 1e9); }

  // Writes what is unsent: memory first, then the spool. Returns the first error.
  Status Drain(bool force) {
    while (!unsent.empty()) {
      if (!EnsureStore(force)) return Status::Unavailable("the store cannot be opened");
      Status status = WriteChunk(*unsent.front());
      if (!status.ok()) {
        BackOff();
        Log("writing into the store failed: " + status.message() + " (rows kept, retrying)");
        return status;
      }
      store_backoff.Succeeded();
      int64_t rows = int64_t(unsent.front()->batch.size());
      unsent_rows -= size_t(rows);
      unsent_rows_shared = int64_t(unsent_rows);
      unsent.pop_front();
      std::lock_guard lock(stats_mutex);
      totals.rows_written += rows;
      totals.last_write = options.clock->WallNanos();
    }
    while (!spool_files.empty()) {
      if (!EnsureStore(force)) return Status::Unavailable("the store cannot be opened");
      auto [path, rows, bytes] = spool_files.front();
      std::ifstream in(path, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      Chunk chunk;
      internal::RowStreamParser parser(&chunk.interner, internal::Framing::kJsonLines);
      Status parsed = parser.Feed(text, &chunk.batch);
      if (parsed.ok()) parsed = parser.Finish();
      if (!parsed.ok()) {
        // Kept for a person to look at; not retried.
        Log("the spool file " + path + " does not read (" + parsed.message() + "): left there");
        CountDropped(rows, "its spool file does not read");
      } else {
        Status status = WriteChunk(chunk);
        if (!status.ok()) {
          BackOff();
          Log("writing into the store failed: " + status.message() + " (rows kept, retrying)");
          return status;
        }
        store_backoff.Succeeded();
        std::error_code error;
        std::filesystem::remove(path, error);
        std::lock_guard lock(stats_mutex);
        totals.rows_written += rows;
        totals.last_write = options.clock->WallNanos();
      }
      spool_file_bytes -= bytes;
      spool_files.pop_front();
      std::lock_guard lock(stats_mutex);
      totals.rows_spooled -= rows;
    }
    return Status::OK();
  }

  void TakeIncoming() {
    std::vector<Reading> readings;
    {
      std::lock_guard lock(queue_mutex);
      readings.swap(incoming);
    }
    last_take = Now();
    if (readings.empty()) return;
    unsent_rows += readings.size();
    unsent.push_back(MakeChunk(readings));
    Spill(SpillMode::kOverMemoryBound);
    unsent_rows_shared = int64_t(unsent_rows);
  }

  void ReadJobs() {
    if (options.site.empty() || !store) return;
    UnixNanos now = options.clock->WallNanos();
    Result<std::vector<jobs::Job>> jobs = store->Jobs(options.site, now, now + 1);
    if (!jobs.ok()) {
      Log("the jobs of " + options.site + " cannot be read: " + jobs.status().message());
      return;
    }
    auto table = std::make_shared<Promotions>();
    for (const jobs::Job& job : jobs.value()) {
      if (job.started_at > now || (job.stopped_at && *job.stopped_at <= now)) continue;
      for (const std::string& type : job.types) {
        std::optional<std::string> regex = MonitorRegex(type);
        if (!regex) continue;
        Result<std::regex> compiled = CompileMonitorRegex(type, *regex);
        if (!compiled.ok()) {
          // Said once per job and type, not at every reading of the jobs.
          if (reported_job_types.insert(std::to_string(job.uid) + '\n' + type).second) {
            Log("job " + std::to_string(job.uid) + ": " + compiled.status().message() +
                ": the type is ignored");
          }
          continue;
        }
        for (const std::string& node : job.nodes) table->by_node[node].push_back(*compiled);
      }
    }
    std::lock_guard lock(promotions_mutex);
    promotions = std::move(table);
  }

  std::vector<Reading> SelfReadings(const CollectorStats& stats) const {
    std::vector<Reading> readings;
    if (options.collector_id.empty()) return readings;
    UnixNanos now = options.clock->WallNanos();
    auto add = [&](const char* name, double value, Labels labels) {
      Reading reading;
      reading.time = now;
      reading.device_id = options.collector_id;
      reading.metric_id = name;
      reading.value = value;
      reading.labels = std::move(labels);
      readings.push_back(std::move(reading));
    };
    // Totals over every device; per device only where something went wrong (a device's counters
    // are on --listen's /metrics either way): 1,000 healthy devices write 12 rows, not 8,000.
    DeviceStats all;
    for (const DeviceStats& device : stats.devices) {
      all.polls += device.polls;
      all.late += device.late;
      all.overruns += device.overruns;
      all.timeouts += device.timeouts;
      all.errors += device.errors;
      all.missing_values += device.missing_values;
      all.bad_timestamps += device.bad_timestamps;
      all.dropped += device.dropped;
      if (device.late + device.overruns + device.timeouts + device.errors + device.missing_values +
              device.bad_timestamps + device.dropped ==
          0) {
        continue;
      }
      std::string quoted;
      AppendJsonString(&quoted, device.name);
      Labels labels = {{"device", quoted}};
      add("kwatt_collect_polls_total", double(device.polls), labels);
      add("kwatt_collect_polls_late_total", double(device.late), labels);
      add("kwatt_collect_overruns_total", double(device.overruns), labels);
      add("kwatt_collect_timeouts_total", double(device.timeouts), labels);
      add("kwatt_collect_errors_total", double(device.errors), labels);
      add("kwatt_collect_missing_values_total", double(device.missing_values), labels);
      add("kwatt_collect_bad_timestamps_total", double(device.bad_timestamps), labels);
      add("kwatt_collect_readings_dropped_total", double(device.dropped), labels);
    }
    // A stream's counters always (there are few streams; a gap is what one looks for).
    for (const DeviceStats& device : stats.devices) {
      if (device.stream_counters.empty()) continue;
      std::string quoted;
      AppendJsonString(&quoted, device.name);
      for (const auto& [name, value] : device.stream_counters) {
        Reading reading;
        reading.time = now;
        reading.device_id = options.collector_id;
        reading.metric_id = "kwatt_collect_stream_" + name + "_total";
        reading.value = double(value);
        reading.labels = {{"device", quoted}};
        readings.push_back(std::move(reading));
      }
    }
    add("kwatt_collect_polls_total", double(all.polls), {});
    add("kwatt_collect_polls_late_total", double(all.late), {});
    add("kwatt_collect_overruns_total", double(all.overruns), {});
    add("kwatt_collect_timeouts_total", double(all.timeouts), {});
    add("kwatt_collect_errors_total", double(all.errors), {});
    add("kwatt_collect_missing_values_total", double(all.missing_values), {});
    add("kwatt_collect_bad_timestamps_total", double(all.bad_timestamps), {});
    add("kwatt_collect_readings_dropped_total", double(all.dropped), {});
    add("kwatt_collect_rows_written_total", double(stats.rows_written), {});
    add("kwatt_collect_rows_dropped_total", double(stats.rows_dropped), {});
    add("kwatt_collect_rows_spooled", double(stats.rows_spooled), {});
    add("kwatt_collect_store_errors_total", double(stats.store_errors), {});
    return readings;
  }

  void RunWriter(std::stop_token stop) {
    // Every flush interval on the clock: the queue taken and written, the jobs and the
    // collector's own metrics when their time has come.
    int64_t next_flush = Now();
    int64_t next_jobs = Now();
    int64_t next_self = Now() + Nanos(options.self_metrics_every);
    while (true) {
      next_flush += Nanos(options.flush_interval);
      if (!SleepUntil(stop, next_flush)) break;
      int64_t now = Now();
      if (now >= next_self) {
        Push(nullptr, SelfReadings(Stats()));
        next_self = now + Nanos(options.self_metrics_every);
      }
      TakeIncoming();
      // Rows the store did not take are on disk before the next flush: a kill -9 then loses at
      // most a flush interval of rows, not every row waiting in memory.
      if (!Drain(/*force=*/false).ok()) Spill(SpillMode::kToDisk);
      if (now >= next_jobs) {
        if (EnsureStore(false)) ReadJobs();
        next_jobs = now + Nanos(options.jobs_every);
      }
      if (next_flush < now) next_flush = now;  // a long write: no burst of flushes after it
    }
  }

  Status FinalWrite() {
    Push(nullptr, SelfReadings(Stats()));
    TakeIncoming();
    Status status = Drain(/*force=*/true);
    if (!status.ok()) {
      // One more try with a fresh store, then the spool.
      status = Drain(/*force=*/true);
    }
    if (!status.ok()) Spill(SpillMode::kEverything);
    unsent_rows_shared = int64_t(unsent_rows);
    if (store) {
      Status flushed = store->Flush();
      if (status.ok()) status = flushed;
    }
    return status;
  }

  CollectorStats Stats() const {
    CollectorStats stats;
    {
      std::lock_guard lock(stats_mutex);
      stats = totals;
    }
    {
      std::lock_guard lock(queue_mutex);
      stats.rows_pending = int64_t(incoming.size()) + unsent_rows_shared.load();
    }
    for (const auto& worker : workers) {
      std::lock_guard lock(worker->mutex);
      stats.devices.push_back(worker->stats);
      if (worker->stream) stats.devices.back().stream_counters = worker->stream->Counters();
    }
    return stats;
  }
};

Collector::Collector(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Collector::~Collector() { (void)Stop(); }

Result<std::unique_ptr<Collector>> Collector::Create(const CollectConfig& config, StoreOpener store,
                                                     CollectorOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->open_store = std::move(store);
  // Devices in configuration order of their first description.
  std::vector<std::string> keys;
  std::map<std::string, std::vector<MetricDescription>> by_device;
  for (const MetricDescription& metric : config.metrics) {
    std::string key = metric.url.DeviceKey();
    auto [it, inserted] = by_device.try_emplace(key);
    if (inserted) keys.push_back(key);
    it->second.push_back(metric);
  }
  std::map<std::string, int> named;  // how many devices each redacted URL names so far
  for (const std::string& key : keys) {
    auto worker = std::make_unique<Impl::Worker>();
    worker->metrics = by_device[key];
    worker->name = worker->metrics[0].url.Redacted();
    // Devices that differ only in what redaction hides (a password, a community) are told apart
    // by their order, so that each has log lines and /metrics series of its own.
    if (int same = ++named[worker->name]; same > 1) {
      worker->name += " (" + std::to_string(same) + ")";
    }
    worker->stats.name = worker->name;
    if (IsStreamScheme(worker->metrics[0].url.scheme)) {
      KWATT_ASSIGN_OR_RETURN(worker->stream,
                             MakeStreamSource(worker->metrics, impl->options.environment));
    } else {
      KWATT_ASSIGN_OR_RETURN(worker->device,
                             MakeDevice(worker->metrics, impl->options.environment));
    }
    impl->workers.push_back(std::move(worker));
  }
  Result<std::unique_ptr<store::Store>> opened = impl->open_store();
  if (opened.ok()) {
    impl->store = std::move(opened).value();
    (void)impl->CheckStoreFile();  // records the file opened
  } else if (impl->options.start_without_store) {
    impl->Log("the store cannot be opened: " + opened.status().message() +
              " (rows wait for it, retrying)");
  } else {
    return opened.status();
  }
  if (!impl->options.spool_dir.empty()) {
    // Rows spooled by an earlier run are written first.
    std::error_code error;
    std::vector<std::string> paths;
    for (const auto& entry : std::filesystem::directory_iterator(impl->options.spool_dir, error)) {
      std::string name = entry.path().filename().string();
      if (name.rfind("kwatt-collect-", 0) == 0 && entry.path().extension() == ".jsonl") {
        paths.push_back(entry.path().string());
      }
    }
    std::sort(paths.begin(), paths.end());
    for (const std::string& path : paths) {
      int64_t rows = 0;
      std::ifstream in(path, std::ios::binary);
      for (std::string line; std::getline(in, line);) ++rows;
      int64_t bytes = int64_t(std::filesystem::file_size(path, error));
      impl->spool_files.push_back({path, rows, bytes});
      impl->spool_file_bytes += bytes;
      impl->totals.rows_spooled += rows;
    }
  }
  return std::unique_ptr<Collector>(new Collector(std::move(impl)));
}

void Collector::Start() {
  Impl& impl = *impl_;
  if (impl.started) return;
  impl.started = true;
  impl.last_take = impl.Now();
  impl.ReadJobs();
  uint64_t seed = impl.options.seed;
  for (auto& worker : impl.workers) {
    Impl::Worker* w = worker.get();
    uint64_t worker_seed = seed++ * 0x9E3779B97F4A7C15ull + 1;
    bool started =
        w->stream ? w->thread.Start([&impl, w](std::stop_token stop) { impl.RunStream(stop, *w); })
                  : w->thread.Start([&impl, w, worker_seed](std::stop_token stop) {
                      impl.RunDevice(stop, *w, worker_seed);
                    });
    if (!started) {
      impl.Log(w->name +
               ": no thread could be made for it (too many threads? see ulimit -u): "
               "not polled");
    }
  }
  impl.writer = std::jthread([&impl](std::stop_token stop) { impl.RunWriter(stop); });
}

Status Collector::Stop() {
  Impl& impl = *impl_;
  if (impl.stopped) return impl.last_write_status;
  impl.stopped = true;
  if (!impl.started) return Status::OK();  // nothing was read
  for (auto& worker : impl.workers) worker->thread.request_stop();
  for (auto& worker : impl.workers) {
    if (worker->thread.joinable()) worker->thread.join();
  }
  if (impl.writer.joinable()) {
    impl.writer.request_stop();
    impl.writer.join();
  }
  impl.last_write_status = impl.FinalWrite();
  return impl.last_write_status;
}

Collector::ProbeReport Collector::Probe() {
  Impl& impl = *impl_;
  struct Outcome {
    Status status;
    std::vector<PollProblem> problems;
  };
  std::vector<Outcome> outcomes(impl.workers.size());
  {
    std::vector<DeviceThread> threads(impl.workers.size());
    for (size_t i = 0; i < impl.workers.size(); ++i) {
      Impl::Worker* worker = impl.workers[i].get();
      if (!worker->device) continue;
      Outcome* outcome = &outcomes[i];
      bool started = threads[i].Start([&impl, worker, outcome](std::stop_token) {
        int64_t period_ms = worker->metrics[0].PeriodMs();
        for (const auto& metric : worker->metrics) {
          period_ms = std::min(period_ms, metric.PeriodMs());
        }
        PollRequest request;
        request.active.assign(worker->metrics.size(), true);
        request.sent_at = impl.options.clock->WallNanos();
        request.deadline =
            Steady::now() + std::clamp(milliseconds(period_ms), milliseconds(100),
                                       std::min(impl.options.max_timeout, milliseconds(5000)));
        std::vector<Reading> readings;
        outcome->status = worker->device->Poll(request, &readings);
        outcome->problems = worker->device->TakeProblems();
      });
      if (!started) outcomes[i].status = Status::Unavailable(worker->name + ": no thread for it");
    }
  }  // the threads joined
  ProbeReport report;
  for (Outcome& outcome : outcomes) {
    if (!outcome.status.ok()) report.failed.push_back(outcome.status.message());
    for (PollProblem& problem : outcome.problems) {
      (problem.kind == PollProblem::Kind::kMissingValue ? report.missing : report.failed)
          .push_back(std::move(problem.message));
    }
  }
  return report;
}

Status CheckJobType(const std::string& type) {
  std::optional<std::string> regex = MonitorRegex(type);
  if (!regex) return Status::OK();
  return CompileMonitorRegex(type, *regex).status();
}

CollectorStats Collector::Stats() const { return impl_->Stats(); }

std::string Collector::PrometheusText() const {
  CollectorStats stats = Stats();
  std::string out;
  auto family = [&](std::string_view name, const char* type, const char* help) {
    AppendPrometheusFamily(&out, name, type, help);
  };
  auto per_device = [&](const char* name, const char* help, auto field) {
    family(name, "counter", help);
    for (const DeviceStats& device : stats.devices) {
      AppendPrometheusSample(&out, name, {{"device", device.name}}, double(field(device)));
    }
  };
  per_device("kwatt_collect_polls_total", "Polls (or stream starts) of each device.",
             [](const DeviceStats& d) { return d.polls; });
  per_device("kwatt_collect_polls_late_total",
             "Polls started late (a tenth of the period, 100 ms at most).",
             [](const DeviceStats& d) { return d.late; });
  per_device("kwatt_collect_overruns_total", "Ticks skipped because a poll outlived them.",
             [](const DeviceStats& d) { return d.overruns; });
  per_device("kwatt_collect_timeouts_total", "Polls that timed out.",
             [](const DeviceStats& d) { return d.timeouts; });
  per_device("kwatt_collect_errors_total", "Failed polls (timeouts included) or stream failures.",
             [](const DeviceStats& d) { return d.errors; });
  per_device("kwatt_collect_readings_total", "Values read.",
             [](const DeviceStats& d) { return d.readings; });
  per_device("kwatt_collect_readings_dropped_total",
             "Values read and dropped before the writer took them (its queue full).",
             [](const DeviceStats& d) { return d.dropped; });
  per_device("kwatt_collect_missing_values_total",
             "Values a device answered without (a sensor or OID it does not have).",
             [](const DeviceStats& d) { return d.missing_values; });
  per_device("kwatt_collect_bad_timestamps_total",
             "Samples skipped because their own timestamp does not read.",
             [](const DeviceStats& d) { return d.bad_timestamps; });
  // Streams' own counters, one family each.
  std::map<std::string, std::vector<std::pair<const DeviceStats*, int64_t>>> stream_families;
  for (const DeviceStats& device : stats.devices) {
    for (const auto& [name, value] : device.stream_counters) {
      stream_families["kwatt_collect_stream_" + name + "_total"].emplace_back(&device, value);
    }
  }
  for (const auto& [name, values] : stream_families) {
    family(name, "counter", "A stream's own count (lines read, gaps...).");
    for (const auto& [device, value] : values) {
      AppendPrometheusSample(&out, name, {{"device", device->name}}, double(value));
    }
  }
  auto single = [&](const char* name, const char* type, const char* help, double value) {
    family(name, type, help);
    AppendPrometheusSample(&out, name, {}, value);
  };
  single("kwatt_collect_rows_written_total", "counter", "Rows written into the store.",
         double(stats.rows_written));
  single("kwatt_collect_rows_pending", "gauge", "Rows read and not written yet.",
         double(stats.rows_pending));
  single("kwatt_collect_rows_spooled", "gauge", "Rows in spool files, waiting for the store.",
         double(stats.rows_spooled));
  single("kwatt_collect_rows_dropped_total", "counter", "Rows dropped (memory and spool full).",
         double(stats.rows_dropped));
  single("kwatt_collect_store_errors_total", "counter", "Failed writes into the store.",
         double(stats.store_errors));
  single("kwatt_collect_last_write_timestamp_seconds", "gauge", "When rows were last written.",
         double(stats.last_write) / 1e9);
  return out;
}

}  // namespace kwatt::collect
