#include "kwatt/meter/pipeline/meter.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "kwatt/core/output_file.h"
#include "kwatt/core/own_cpu.h"
#include "kwatt/core/text.h"
#include "src/meter/pipeline/bounded_queue.h"
#include "src/meter/pipeline/totals.h"

namespace kwatt::meter {

Status ReportBuffer::Begin(const MeterHeader& header) {
  std::lock_guard lock(mutex_);
  header_ = header;
  return Status::OK();
}

Status ReportBuffer::Write(const IntervalReport& report) {
  std::lock_guard lock(mutex_);
  reports_.push_back(report);
  return Status::OK();
}

MeterHeader ReportBuffer::header() const {
  std::lock_guard lock(mutex_);
  return header_;
}

std::vector<IntervalReport> ReportBuffer::Take() {
  std::lock_guard lock(mutex_);
  std::vector<IntervalReport> out;
  out.swap(reports_);
  return out;
}

namespace {

using json = nlohmann::json;
using std::chrono::nanoseconds;

constexpr int64_t kMinPeriod = kNanosPerMilli;
constexpr int64_t kMaxPeriod = int64_t(86'400) * kNanosPerSecond;
constexpr int64_t kMinReadPeriod = 100 * kNanosPerMicro;
constexpr int kStateVersion = 1;
constexpr const char* kStateFormat = "kwatt-meter-state";
// A state file is read whole: larger than this it is not one (a device, a wrong path).
constexpr int64_t kMaxStateBytes = int64_t(64) << 20;
// The sequence numbers a state file may hold: far beyond any run (2^62 intervals of 1 ms are 146
// million years), and room left to count on without overflowing.
constexpr int64_t kMaxSequence = int64_t(1) << 62;

// One read of the sources at an output tick, with the activity then.
struct Sample {
  int64_t monotonic = 0;
  UnixNanos wall = 0;
  std::vector<int64_t> microjoules;  // cumulative, per energy-source domain
  std::vector<uint32_t> flags;       // since the previous sample, per energy-source domain
  std::shared_ptr<const ActivitySnapshot> activity;  // null: none read
  std::vector<std::string> counters;                 // per source, SaveCounters() after the read
};

// An interval whose report waits for its delayed sources.
struct PendingInterval {
  IntervalReport report;
  IntervalActivity activity;  // what the formula keeps of it
  int64_t end_monotonic = 0;
  std::vector<bool> delayed_done;  // per delayed source
  std::vector<std::string> counters;
};

std::string ReadBootId(const std::string& procfs_root) {
  std::ifstream in(procfs_root + "/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

// A state file as read.
struct SavedState {
  std::string boot_id;
  UnixNanos saved_at = 0;
  UnixNanos start = 0;
  int64_t next_sequence = 0;
  std::vector<std::pair<std::string, std::string>> domains;  // (source, name)
  std::vector<std::string> counters;                         // per source
  MeterTotals totals;
  std::map<std::string, std::string> outputs;
};

// The state file's text: a regular file of at most kMaxStateBytes, opened without blocking (a
// FIFO would wait for a writer forever, /dev/zero never ends).
Result<std::string> ReadStateFile(const std::string& path) {
  auto refuse = [&](const std::string& why) {
    return Status::InvalidArgument("the meter's state file " + path + " " + why +
                                   ": give the path of a regular file (or of none yet)");
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    return Status::IOError("cannot read the meter's state file " + path + ": " +
                           std::strerror(errno));
  }
  std::string text;
  Status status;
  struct stat info;
  if (::fstat(fd, &info) != 0) {
    status =
        Status::IOError("cannot read the meter's state file " + path + ": " + std::strerror(errno));
  } else if (!S_ISREG(info.st_mode)) {
    status = refuse("is not a regular file (a device, a FIFO or a socket)");
  } else if (info.st_size > kMaxStateBytes) {
    status = refuse("is " + std::to_string(info.st_size) + " bytes, more than a state file's " +
                    std::to_string(kMaxStateBytes));
  } else {
    char buffer[65536];
    while (true) {
      ssize_t got = ::read(fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        status = Status::IOError("cannot read the meter's state file " + path + ": " +
                                 std::strerror(errno));
        break;
      }
      if (got == 0) break;
      text.append(buffer, size_t(got));
      if (int64_t(text.size()) > kMaxStateBytes) {
        status = refuse("grows beyond a state file's " + std::to_string(kMaxStateBytes) + " bytes");
        break;
      }
    }
  }
  ::close(fd);
  if (!status.ok()) return status;
  return text;
}

// `now`: the wall clock, which a saved_at cannot be after.
Result<SavedState> ParseState(const std::string& path, const std::string& text, UnixNanos now) {
  auto bad = [&](const std::string& what) {
    return Status::Corruption("the meter's state file " + path + " is damaged (" + what +
                              "): move it away to start counting from zero");
  };
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return bad("not a JSON object");
  if (doc.value("format", "") != kStateFormat)
    return bad("no \"format\": \"" + std::string(kStateFormat) + "\"");
  if (!doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() != kStateVersion) {
    return bad("version is not " + std::to_string(kStateVersion));
  }
  SavedState state;
  try {
    state.boot_id = doc.at("boot_id").get<std::string>();
    state.saved_at = doc.at("saved_at").get<int64_t>();
    state.start = doc.at("start").get<int64_t>();
    state.next_sequence = doc.at("next_sequence").get<int64_t>();
    for (const auto& d : doc.at("domains")) {
      state.domains.emplace_back(d.at("source").get<std::string>(),
                                 d.at("name").get<std::string>());
    }
    for (const auto& c : doc.at("counters")) state.counters.push_back(c.get<std::string>());
    const json& totals = doc.at("totals");
    state.totals.measured_microjoules = totals.at("measured").get<std::vector<int64_t>>();
    state.totals.idle_microjoules = totals.at("idle").get<std::vector<int64_t>>();
    state.totals.unattributed_microjoules = totals.at("unattributed").get<std::vector<int64_t>>();
    state.totals.flags = totals.at("flags").get<std::vector<uint32_t>>();
    state.totals.reports = totals.at("reports").get<int64_t>();
    state.totals.busy_microseconds = totals.at("busy").get<int64_t>();
    state.totals.capacity_microseconds = totals.at("capacity").get<int64_t>();
    for (const auto& t : totals.at("targets")) {
      MeterTotals::TargetTotal total;
      std::string kind = t.at("kind").get<std::string>();
      total.target.kind = kind == "cgroup" ? TargetKind::kCgroup
                          : kind == "tree" ? TargetKind::kProcessTree
                                           : TargetKind::kProcess;
      total.target.key = t.at("key").get<std::string>();
      total.target.name = t.at("name").get<std::string>();
      total.target.pid = t.at("pid").get<int64_t>();
      total.cpu_microseconds = t.at("cpu_us").get<int64_t>();
      total.microjoules = t.at("uj").get<std::vector<int64_t>>();
      state.totals.targets.push_back(std::move(total));
    }
    for (const auto& [name, value] : doc.at("outputs").items()) {
      state.outputs[name] = value.get<std::string>();
    }
  } catch (const json::exception& error) {
    return bad(error.what());
  }
  // Values that no meter writes: refused, naming the field, rather than counted on.
  if (state.saved_at > now) {
    return bad("\"saved_at\" " + std::to_string(state.saved_at) + " is after now (" +
               std::to_string(now) + ")");
  }
  if (state.start > state.saved_at) return bad("\"start\" is after \"saved_at\"");
  if (state.next_sequence < 0 || state.next_sequence > kMaxSequence) {
    return bad("\"next_sequence\" " + std::to_string(state.next_sequence) +
               " is not from 0 to 2^62");
  }
  auto negative = [](const std::vector<int64_t>& values) {
    return std::any_of(values.begin(), values.end(), [](int64_t v) { return v < 0; });
  };
  for (const auto& [field, values] : {std::pair<const char*, const std::vector<int64_t>*>{
                                          "measured", &state.totals.measured_microjoules},
                                      {"idle", &state.totals.idle_microjoules},
                                      {"unattributed", &state.totals.unattributed_microjoules}}) {
    if (negative(*values))
      return bad(std::string("\"totals.") + field + "\" holds a negative value");
  }
  if (state.totals.reports < 0 || state.totals.busy_microseconds < 0 ||
      state.totals.capacity_microseconds < 0) {
    return bad("\"totals\" holds a negative count of reports or microseconds");
  }
  for (const auto& t : state.totals.targets) {
    if (t.cpu_microseconds < 0 || negative(t.microjoules)) {
      return bad("\"totals.targets\" " + t.target.key + " holds a negative value");
    }
  }
  size_t n = state.domains.size();
  if (state.totals.measured_microjoules.size() != n || state.totals.idle_microjoules.size() != n ||
      state.totals.unattributed_microjoules.size() != n || state.totals.flags.size() != n) {
    return bad("totals do not match its domains");
  }
  for (const auto& t : state.totals.targets) {
    if (t.microjoules.size() != n) return bad("a target's totals do not match its domains");
  }
  return state;
}

}  // namespace

class Meter::Impl {
 public:
  MeterEnvironment environment;
  MeterOptions options;
  std::vector<std::unique_ptr<EnergySource>> sources;
  std::vector<size_t> source_base;  // first domain of each source in header.domains
  size_t source_domains = 0;        // domains of the energy sources (then the delayed ones')
  std::vector<std::unique_ptr<DelayedEnergySource>> delayed;
  std::vector<size_t> delayed_base;
  std::unique_ptr<ActivityReader> activity;
  MeterHeader header;
  std::unique_ptr<Formula> formula_;

  int64_t period = 0;            // ns
  int64_t ticks_per_output = 1;  // the read period is period / ticks_per_output
  int64_t late_threshold = 0;

  // Sampler thread.
  std::vector<DomainReading> scratch;
  std::vector<int64_t> cumulative;
  std::vector<uint32_t> unreported_flags;
  int64_t origin_monotonic = 0;
  std::unique_ptr<BoundedQueue<Sample>> samples;
  std::jthread sampler;
  std::stop_source wait_stop;  // ends Wait()'s sleep

  // Formula thread.
  std::thread formula;
  Sample first_sample;
  std::deque<PendingInterval> initial_pending;
  std::shared_ptr<const ActivitySnapshot> last_activity;
  int64_t next_sequence = 0;

  // Health.
  std::atomic<int64_t> ticks{0}, late_ticks{0}, missed_ticks{0}, merged_samples{0};
  std::atomic<int64_t> max_lag_nanos{0}, reports{0}, wraps{0}, resets{0};

  // Totals, and the state file's.
  mutable std::mutex totals_mutex;
  TotalsKeeper totals;
  std::optional<SavedState> saved;
  std::string boot_id;

  std::mutex lifecycle;
  bool started = false, stopped = false;
  Status stop_status;

  std::mutex log_mutex;
  std::map<std::string, int64_t> last_log;

  // Last: its threads log through the members above, so it goes first.
  std::unique_ptr<ReportFanOut> outputs;

  void Log(const std::string& cause, const std::string& line) {
    int64_t now = environment.clock->MonotonicNanos();
    {
      std::lock_guard lock(log_mutex);
      auto [it, fresh] = last_log.try_emplace(cause, now);
      if (!fresh) {
        if (now - it->second < 60 * kNanosPerSecond) return;
        it->second = now;
      }
    }
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "kwatt meter: %s\n", ForTerminal(line).c_str());
    }
  }

  int64_t TickDeadline(int64_t k) const {
    return origin_monotonic + int64_t(__int128(k) * period / ticks_per_output);
  }

  // Reads every energy source into `cumulative`, flags into `unreported_flags`.
  void ReadSources() {
    for (size_t s = 0; s < sources.size(); ++s) {
      const size_t base = source_base[s], n = sources[s]->domains().size();
      Status status = sources[s]->Read(&scratch);
      if (!status.ok() || scratch.size() != n) {
        for (size_t i = 0; i < n; ++i) unreported_flags[base + i] |= kUnreadable;
        Log("source " + std::to_string(s),
            "reading " + sources[s]->domains().front().source + " failed: " +
                (status.ok() ? std::string("wrong number of readings") : status.message()));
        continue;
      }
      for (size_t i = 0; i < n; ++i) {
        cumulative[base + i] = scratch[i].microjoules;
        unreported_flags[base + i] |= scratch[i].flags;
        if (scratch[i].flags & kWrapped) wraps.fetch_add(1, std::memory_order_relaxed);
        if (scratch[i].flags & kReset) resets.fetch_add(1, std::memory_order_relaxed);
      }
    }
  }

  Sample TakeSample() {
    Sample sample;
    sample.monotonic = environment.clock->MonotonicNanos();
    sample.wall = environment.clock->WallNanos();
    ReadSources();
    sample.microjoules = cumulative;
    sample.flags = unreported_flags;
    std::fill(unreported_flags.begin(), unreported_flags.end(), 0);
    if (!options.state_file.empty()) {  // only the state file needs them
      sample.counters.reserve(sources.size());
      for (const auto& source : sources) sample.counters.push_back(source->SaveCounters());
    }
    if (activity) {
      Result<ActivitySnapshot> read = activity->ReadAt(sample.monotonic, sample.wall);
      if (read.ok()) {
        sample.activity = std::make_shared<const ActivitySnapshot>(std::move(*read));
      } else {
        Log("activity", "reading the activity failed: " + read.status().message());
      }
    }
    return sample;
  }

  void SamplerLoop(std::stop_token stop) {
    // Wake at the deadline itself: the default timer slack (50 us) would make most ticks of a
    // 1 kHz meter late by the meter's own measure (a tenth of the period).
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    int64_t k = 0;
    int64_t next_output = ticks_per_output;
    while (true) {
      const int64_t deadline = TickDeadline(k + 1);
      if (!environment.clock->SleepUntil(deadline, stop)) break;
      const int64_t now = environment.clock->MonotonicNanos();
      const int64_t lag = now - deadline;
      if (lag > late_threshold) late_ticks.fetch_add(1, std::memory_order_relaxed);
      int64_t seen = max_lag_nanos.load(std::memory_order_relaxed);
      while (lag > seen && !max_lag_nanos.compare_exchange_weak(seen, lag)) {
      }
      // The last tick whose deadline has passed: those in between are skipped.
      int64_t reached = std::max<int64_t>(
          k + 1, int64_t(__int128(now - origin_monotonic) * ticks_per_output / period));
      while (TickDeadline(reached + 1) <= now) ++reached;
      missed_ticks.fetch_add(reached - (k + 1), std::memory_order_relaxed);
      k = reached;
      ticks.fetch_add(1, std::memory_order_relaxed);
      if (k >= next_output) {
        next_output = (k / ticks_per_output + 1) * ticks_per_output;
        Sample sample = TakeSample();
        if (!samples->TryPush(std::move(sample))) {
          // The formula thread is behind: the next sample's interval spans this one (counters are
          // cumulative); the flags are kept for it.
          for (size_t d = 0; d < sample.flags.size(); ++d) unreported_flags[d] |= sample.flags[d];
          merged_samples.fetch_add(1, std::memory_order_relaxed);
        }
      } else {
        ReadSources();
      }
    }
    // Stopped: the last interval ends now, and is never dropped.
    samples->Push(TakeSample());
    samples->Close();
  }

  // The interval from `prev` to `cur` with its energy-source domains attributed.
  PendingInterval MakeInterval(const Sample& prev, const Sample& cur) {
    PendingInterval p;
    IntervalReport& r = p.report;
    r.sequence = next_sequence++;
    r.start = prev.wall;
    r.end = cur.wall;
    p.end_monotonic = cur.monotonic;
    p.counters = cur.counters;
    p.delayed_done.assign(delayed.size(), false);
    formula_->BeginInterval(last_activity.get(), cur.activity.get(), &r, &p.activity);
    if (cur.activity) last_activity = cur.activity;
    r.domains.resize(header.domains.size());
    for (size_t d = 0; d < source_domains; ++d) {
      formula_->FillDomain(p.activity, d, cur.microjoules[d] - prev.microjoules[d], cur.flags[d],
                           &r);
    }
    return p;
  }

  // Fills the delayed sources' domains once their data came; true when the report is complete.
  bool TryComplete(PendingInterval* p) {
    const int64_t now = environment.clock->MonotonicNanos();
    bool complete = true;
    for (size_t s = 0; s < delayed.size(); ++s) {
      if (p->delayed_done[s]) continue;
      const size_t base = delayed_base[s], n = delayed[s]->domains().size();
      auto energy = delayed[s]->EnergyBetween(p->report.start, p->report.end);
      if (energy.ok() && energy->has_value() && (*energy)->size() == n) {
        for (size_t i = 0; i < n; ++i) {
          formula_->FillDomain(p->activity, base + i, (**energy)[i].microjoules,
                               (**energy)[i].flags, &p->report);
        }
        p->delayed_done[s] = true;
        continue;
      }
      if (!energy.ok()) {
        Log("delayed " + std::to_string(s), "reading " + delayed[s]->domains().front().source +
                                                " failed: " + energy.status().message());
      }
      if (!energy.ok() || now - p->end_monotonic > delayed[s]->MaxDelay().count()) {
        for (size_t i = 0; i < n; ++i) {
          formula_->FillDomain(p->activity, base + i, 0, kUnreadable, &p->report);
        }
        p->delayed_done[s] = true;
        continue;
      }
      complete = false;
    }
    return complete;
  }

  MeterHealth HealthNow() const {
    MeterHealth h;
    h.ticks = ticks.load();
    h.late_ticks = late_ticks.load();
    h.missed_ticks = missed_ticks.load();
    h.merged_samples = merged_samples.load();
    h.max_lag_seconds = double(max_lag_nanos.load()) / 1e9;
    h.reports = reports.load();
    h.dropped_reports = outputs->Dropped();
    h.wraps = wraps.load();
    h.resets = resets.load();
    return h;
  }

  void AddToTotals(const IntervalReport& r) {
    std::lock_guard lock(totals_mutex);
    totals.Add(r);
  }

  void Emit(PendingInterval& p) {
    p.report.health = HealthNow();
    p.report.health.reports = reports.fetch_add(1) + 1;
    AddToTotals(p.report);
    auto shared = std::make_shared<const IntervalReport>(std::move(p.report));
    last_counters = std::move(p.counters);
    last_end = shared->end;
    held.push_back(std::move(shared));
    // The state records every report before any output has it: a meter killed (kill -9) and
    // started again goes on after the last report its outputs may have written, never before
    // it (which would report that energy twice). A report whose state could not be written is
    // held back (a restart would report it again) until a later one's can.
    if (!options.state_file.empty()) {
      Status saved_state = SaveState(last_counters, last_end);
      if (!saved_state.ok()) {
        Log("state", saved_state.message() +
                         ": reports are held back from the outputs until it can be written "
                         "(a restart would report them again)");
        if (held.size() > options.report_queue) DropHeld(1);
        return;
      }
    }
    ReleaseHeld();
  }
  std::vector<std::string> last_counters;
  UnixNanos last_end = 0;
  std::deque<std::shared_ptr<const IntervalReport>> held;  // the formula thread's

  // The held reports to every output's queue.
  void ReleaseHeld() {
    for (auto& report : held) outputs->Push(std::move(report));
    held.clear();
  }

  // The oldest `n` held reports dropped, counted against every output.
  void DropHeld(size_t n) {
    n = std::min(n, held.size());
    outputs->Drop(int64_t(n));
    held.erase(held.begin(), held.begin() + ptrdiff_t(n));
  }

  void FormulaLoop() {
    Sample prev = std::move(first_sample);
    std::deque<PendingInterval> pending = std::move(initial_pending);
    while (true) {
      std::optional<Sample> next =
          samples->Pop(pending.empty() ? nanoseconds(std::chrono::milliseconds(200))
                                       : nanoseconds(std::chrono::milliseconds(20)));
      if (next) {
        if (next->monotonic == prev.monotonic && next->microjoules == prev.microjoules &&
            std::all_of(next->flags.begin(), next->flags.end(),
                        [](uint32_t f) { return f == 0; })) {
          continue;  // a stop right at an output tick: nothing more to report
        }
        pending.push_back(MakeInterval(prev, *next));
        prev = std::move(*next);
      }
      while (!pending.empty() && TryComplete(&pending.front())) {
        Emit(pending.front());
        pending.pop_front();
      }
      if (!next && samples->Drained() && pending.empty()) break;
    }
    if (!held.empty()) {
      // The state's last chance: written, the held reports go out; else they are dropped, so
      // that a restart from the last state written reports them once.
      Status saved_state = SaveState(last_counters, last_end);
      if (saved_state.ok()) {
        ReleaseHeld();
      } else {
        const size_t n = held.size();
        DropHeld(n);
        Log("state end", std::to_string(n) + (n == 1 ? " report was" : " reports were") +
                             " not written to any output: " + saved_state.message() +
                             " (a restart from the last state written reports them once)");
      }
    }
  }

  std::string SerializeState(const std::vector<std::string>& counters, UnixNanos at) {
    json doc;
    doc["format"] = kStateFormat;
    doc["version"] = kStateVersion;
    doc["boot_id"] = boot_id;
    doc["saved_at"] = at;
    doc["start"] = header.start;
    doc["next_sequence"] = next_sequence;
    json domains = json::array();
    for (const auto& d : header.domains)
      domains.push_back({{"source", d.source}, {"name", d.name}});
    doc["domains"] = domains;
    doc["counters"] = counters;
    json t;
    {
      std::lock_guard lock(totals_mutex);
      const MeterTotals& totals = this->totals.totals();
      t["measured"] = totals.measured_microjoules;
      t["idle"] = totals.idle_microjoules;
      t["unattributed"] = totals.unattributed_microjoules;
      t["flags"] = totals.flags;
      t["reports"] = totals.reports;
      t["busy"] = totals.busy_microseconds;
      t["capacity"] = totals.capacity_microseconds;
      json targets = json::array();
      for (const auto& target : totals.targets) {
        targets.push_back({{"key", target.target.key},
                           {"kind", TargetKindName(target.target.kind)},
                           {"name", target.target.name},
                           {"pid", target.target.pid},
                           {"cpu_us", target.cpu_microseconds},
                           {"uj", target.microjoules}});
      }
      t["targets"] = targets;
    }
    doc["totals"] = t;
    json outs = json::object();
    for (const auto& [name, stateful] : outputs->StatefulOutputs()) {
      outs[name] = stateful->SaveState();
    }
    doc["outputs"] = outs;
    return doc.dump() + "\n";
  }

  Status SaveState(const std::vector<std::string>& counters, UnixNanos at) {
    std::string text = SerializeState(counters, at);
    return WriteWholeFile(options.state_file, text).WithContext("the meter's state file");
  }
};

Meter::Meter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Meter::~Meter() { (void)Stop(); }

const MeterHeader& Meter::header() const { return impl_->header; }

Result<std::unique_ptr<Meter>> Meter::Create(
    MeterEnvironment environment, std::vector<std::unique_ptr<EnergySource>> sources,
    std::vector<std::unique_ptr<DelayedEnergySource>> delayed_sources,
    std::unique_ptr<ActivityReader> activity, std::vector<MeterOutput> outputs,
    MeterOptions options) {
  if (sources.empty() && delayed_sources.empty()) {
    return Status::InvalidArgument("the meter has no energy source to read");
  }
  const int64_t period = options.period.count();
  if (period < kMinPeriod || period > kMaxPeriod) {
    return Status::InvalidArgument("the period should be from 1 ms to 1 day, not " +
                                   std::to_string(double(period) / 1e9) + " s");
  }
  int64_t read_period = options.read_period.count() == 0 ? period : options.read_period.count();
  if (read_period < kMinReadPeriod || read_period > period) {
    return Status::InvalidArgument("the read period should be from 100 us to the period (" +
                                   std::to_string(double(period) / 1e9) + " s), not " +
                                   std::to_string(double(read_period) / 1e9) + " s");
  }
  auto impl = std::make_unique<Impl>();
  impl->environment = std::move(environment);
  impl->options = std::move(options);
  impl->activity = std::move(activity);
  MeterHeader& header = impl->header;
  header.sensor = HostName(impl->environment);
  for (auto& source : sources) {
    impl->source_base.push_back(header.domains.size());
    for (const auto& d : source->domains()) header.domains.push_back(d);
    for (auto& note : source->Notes()) header.notes.push_back(std::move(note));
    // The source's wrap period bounds the read period.
    int64_t limit = source->MaxReadPeriod().count();
    if (limit > 0) read_period = std::min(read_period, std::max(limit, kMinReadPeriod));
  }
  impl->source_domains = header.domains.size();
  impl->sources = std::move(sources);
  for (auto& source : delayed_sources) {
    impl->delayed_base.push_back(header.domains.size());
    for (const auto& d : source->domains()) header.domains.push_back(d);
    for (auto& note : source->Notes()) header.notes.push_back(std::move(note));
  }
  impl->delayed = std::move(delayed_sources);
  if (impl->source_domains == 0 && impl->delayed.empty()) {
    return Status::InvalidArgument("the meter's sources have no domain to read");
  }
  impl->period = period;
  impl->ticks_per_output = (period + read_period - 1) / read_period;
  const int64_t tick = period / impl->ticks_per_output;
  impl->late_threshold = std::min<int64_t>(tick / 10, 100 * kNanosPerMilli);

  const size_t n = header.domains.size();
  if (FormulaNeedsHardwareCounters(impl->options.formula.name) && !impl->activity) {
    return Status::InvalidArgument(
        "the " + impl->options.formula.name +
        " formula shares by the targets' hardware counters: it needs "
        "targets, and the machine is measured alone (no activity is read)");
  }
  KWATT_ASSIGN_OR_RETURN(impl->formula_, Formula::Create(impl->options.formula, header.domains,
                                                         /*learn_idle=*/impl->activity != nullptr));
  impl->formula_->Describe(&header);

  FanOutOptions fan_out;
  fan_out.queue = impl->options.report_queue;
  fan_out.log = [m = impl.get()](const std::string& cause, const std::string& line) {
    m->Log(cause, line);
  };
  impl->outputs = std::make_unique<ReportFanOut>(std::move(outputs), std::move(fan_out));

  impl->totals.Reset(header.domains);

  // The state file: read now, so that a damaged one stops everything before it starts.
  impl->boot_id = ReadBootId(impl->environment.procfs_root);
  const std::string& state_file = impl->options.state_file;
  if (!state_file.empty()) {
    std::error_code error;
    if (std::filesystem::exists(state_file, error)) {
      KWATT_ASSIGN_OR_RETURN(std::string text, ReadStateFile(state_file));
      KWATT_ASSIGN_OR_RETURN(SavedState saved,
                             ParseState(state_file, text, impl->environment.clock->WallNanos()));
      bool same_domains = saved.domains.size() == n;
      for (size_t d = 0; same_domains && d < n; ++d) {
        same_domains = saved.domains[d].first == header.domains[d].source &&
                       saved.domains[d].second == header.domains[d].name;
      }
      if (!same_domains) {
        return Status::InvalidArgument(
            "the meter's state file " + state_file +
            " was written for other sources or domains: give another --state file, or move this "
            "one away to start counting from zero");
      }
      impl->saved = std::move(saved);
    } else {
      std::filesystem::path parent = std::filesystem::path(state_file).parent_path();
      if (parent.empty()) parent = ".";
      if (!std::filesystem::is_directory(parent, error) || access(parent.c_str(), W_OK) != 0) {
        return Status::IOError("the meter's state file " + state_file +
                               " cannot be written: its directory does not exist or is not "
                               "writable");
      }
    }
  }
  if (impl->saved) {
    for (const auto& [name, stateful] : impl->outputs->StatefulOutputs()) {
      auto it = impl->saved->outputs.find(name);
      if (it == impl->saved->outputs.end()) continue;
      KWATT_RETURN_IF_ERROR(
          stateful->RestoreState(it->second)
              .WithContext("output " + name + " in the meter's state file " + state_file));
    }
  }
  return std::unique_ptr<Meter>(new Meter(std::move(impl)));
}

Status Meter::Start() {
  Impl& m = *impl_;
  std::lock_guard lock(m.lifecycle);
  if (m.started) return Status::InvalidArgument("the meter was already started");
  m.cumulative.assign(m.source_domains, 0);
  m.unreported_flags.assign(m.source_domains, 0);

  // Resuming: each source counts from its saved counters, so that its first read holds the
  // energy of the downtime.
  std::vector<bool> resumed(m.sources.size(), false);
  if (m.saved) {
    const int64_t elapsed =
        std::max<int64_t>(m.environment.clock->WallNanos() - m.saved->saved_at, 0);
    if (!m.boot_id.empty() && m.boot_id == m.saved->boot_id &&
        m.saved->counters.size() == m.sources.size()) {
      for (size_t s = 0; s < m.sources.size(); ++s) {
        Status status = m.sources[s]->ResumeCounters(m.saved->counters[s], nanoseconds(elapsed));
        resumed[s] = status.ok();
        if (!status.ok()) {
          m.header.notes.push_back("the energy of " + m.sources[s]->domains().front().source +
                                   " while the meter was down is unknown: " + status.message());
        }
      }
    } else {
      m.header.notes.push_back(
          "the machine restarted since the state file was written: the energy while the meter "
          "was down is unknown (a gap)");
    }
    MeterTotals restored = m.saved->totals;
    restored.start = m.saved->start;
    m.totals.Restore(restored);
    m.next_sequence = m.saved->next_sequence;
  }

  m.first_sample = m.TakeSample();
  m.origin_monotonic = m.first_sample.monotonic;
  m.last_activity = m.first_sample.activity;
  m.header.start = m.saved ? m.saved->start : m.first_sample.wall;
  m.header.first_sequence = m.next_sequence;
  if (m.saved) {
    // The downtime: what the resumed counters counted, unattributed; a gap for the others.
    Sample down;
    down.wall = m.saved->saved_at;
    down.monotonic = m.first_sample.monotonic;
    down.microjoules.assign(m.source_domains, 0);
    down.flags.assign(m.source_domains, 0);
    Sample up = m.first_sample;
    up.activity = nullptr;
    for (size_t s = 0; s < m.sources.size(); ++s) {
      for (size_t i = 0; i < m.sources[s]->domains().size(); ++i) {
        if (!resumed[s]) {
          up.microjoules[m.source_base[s] + i] = 0;
          up.flags[m.source_base[s] + i] |= kReset;
        }
      }
    }
    std::shared_ptr<const ActivitySnapshot> keep = m.last_activity;
    m.last_activity = nullptr;
    m.initial_pending.push_back(m.MakeInterval(down, up));
    m.last_activity = keep;
    // The first interval after the downtime counts from the first read.
    m.first_sample.microjoules = m.cumulative;
    std::fill(m.first_sample.flags.begin(), m.first_sample.flags.end(), 0);
  }

  KWATT_RETURN_IF_ERROR(m.outputs->Begin(m.header));  // and each output's thread
  m.samples = std::make_unique<BoundedQueue<Sample>>(m.options.sample_queue);
  m.started = true;
  m.formula = std::thread([&m] {
    OwnCpuScope own;
    m.FormulaLoop();
  });
  m.sampler = std::jthread([&m](std::stop_token stop) {
    OwnCpuScope own;
    m.SamplerLoop(stop);
  });
  return Status::OK();
}

Status Meter::Wait() {
  Impl& m = *impl_;
  {
    std::lock_guard lock(m.lifecycle);
    if (!m.started) return Status::InvalidArgument("the meter was not started");
  }
  if (m.options.duration.count() > 0) {
    (void)m.environment.clock->SleepUntil(m.origin_monotonic + m.options.duration.count(),
                                          m.wait_stop.get_token());
  } else {
    // Until Stop() from another thread.
    while (m.environment.clock->SleepUntil(m.environment.clock->MonotonicNanos() + kNanosPerSecond,
                                           m.wait_stop.get_token())) {
    }
  }
  return Stop();
}

Status Meter::Stop() {
  Impl& m = *impl_;
  std::lock_guard lock(m.lifecycle);
  if (!m.started || m.stopped) return m.stop_status;
  m.stopped = true;
  m.wait_stop.request_stop();
  m.sampler.request_stop();
  m.sampler.join();
  m.formula.join();
  // Every output that failed is named (ReportFanOut::Finish), and the state file.
  Status status = m.outputs->Finish();
  if (!m.options.state_file.empty() && m.last_end != 0) {
    Status saved = m.SaveState(m.last_counters, m.last_end);
    if (!saved.ok()) {
      status = status.ok() ? saved : Status::IOError(status.message() + "; " + saved.message());
    }
  }
  m.stop_status = status;
  return status;
}

void Meter::Abandon() { impl_->outputs->Abandon(); }

std::vector<std::pair<std::string, int64_t>> Meter::PendingRows() const {
  return impl_->outputs->PendingRowsByOutput();
}

MeterTotals Meter::Totals() const {
  std::lock_guard lock(impl_->totals_mutex);
  return impl_->totals.totals();
}

MeterHealth Meter::Health() const { return impl_->HealthNow(); }

}  // namespace kwatt::meter
