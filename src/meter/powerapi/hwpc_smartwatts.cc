#include "kwatt/meter/powerapi/hwpc_smartwatts.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "src/meter/formulas/smartwatts_model.h"

namespace kwatt::meter {

namespace {

constexpr int kScopeCpu = 0, kScopeDram = 1;
const char* const kDomainKind[2] = {"package", "dram"};

// floor(counts * 10^6 / 2^32): microjoules of a running total of RAPL units.
int64_t MicrojoulesOfUnits(unsigned __int128 units) { return int64_t((units * 1000000u) >> 32); }

}  // namespace

class HwpcSmartWatts::Impl {
 public:
  Impl(const SmartWattsOptions& options, ReportSink* sink, SmartWattsStats* stats)
      : options_(options), sink_(sink), stats_(stats) {}

  Status Add(HwpcReport report) {
    ++stats_->reports;
    if (processed_any_ && report.timestamp_ms <= last_processed_) {
      ++stats_->late_reports;
      return Status::OK();
    }
    auto& tick = pending_[report.timestamp_ms];
    auto [it, inserted] = tick.try_emplace(report.target);
    if (!inserted) ++stats_->duplicate_reports;
    it->second = std::move(report);
    while (pending_.size() > size_t(options_.reorder_ticks)) {
      KWATT_RETURN_IF_ERROR(ProcessOldest());
    }
    return Status::OK();
  }

  Status Finish() {
    while (!pending_.empty()) KWATT_RETURN_IF_ERROR(ProcessOldest());
    if (!begun_) {
      MeterHeader header;
      header.formula = "smartwatts";
      header.idle_policy = "none";
      KWATT_RETURN_IF_ERROR(sink_->Begin(header));
      begun_ = true;
    }
    return sink_->Finish();
  }

 private:
  struct DomainState {
    int scope = 0;
    int socket = 0;
    unsigned __int128 units = 0;  // RAPL units counted so far
  };

  // The counters of `group` on `socket` in `report`, in CPU order.
  static std::vector<const HwpcCpuCounters*> Counters(const HwpcReport& report,
                                                      const std::string& group, int socket) {
    std::vector<const HwpcCpuCounters*> out;
    for (const HwpcCpuCounters& c : report.counters) {
      if (c.group == group && c.socket == socket) out.push_back(&c);
    }
    return out;
  }

  // Per-second rates of the features on `socket` in `report`'s core group; false when it has none.
  bool Rates(const HwpcReport& report, int socket, double seconds, std::vector<double>* rates) {
    rates->assign(features_.size(), 0);
    bool any = false;
    for (const HwpcCpuCounters* c : Counters(report, "core", socket)) {
      any = true;
      double scale = 1;
      if (options_.scale_multiplexing) {
        int64_t enabled = c->Get(kHwpcTimeEnabled), running = c->Get(kHwpcTimeRunning);
        if (enabled > 0 && running > 0) scale = double(enabled) / double(running);
      }
      // Both sorted by name: one merge walk.
      size_t e = 0;
      for (size_t f = 0; f < features_.size() && e < c->events.size();) {
        int order = c->events[e].first.compare(features_[f]);
        if (order < 0) {
          ++e;
        } else if (order > 0) {
          ++f;
        } else {
          if (c->events[e].second > 0) (*rates)[f] += double(c->events[e].second) * scale / seconds;
          ++e;
          ++f;
        }
      }
    }
    return any;
  }

  Status Begin(const std::map<std::string, HwpcReport>& tick, int64_t first_end_ms) {
    MeterHeader header;
    header.formula = "smartwatts";
    header.idle_policy = "none";
    header.start = (first_end_ms - options_.sensor_period_ms) * 1000000;
    auto all = tick.find("all");
    header.sensor = all != tick.end() ? all->second.sensor : tick.begin()->second.sensor;
    std::set<std::string> events;
    for (const auto& [target, report] : tick) {
      for (const HwpcCpuCounters& c : report.counters) {
        if (c.group != "core") continue;
        for (const auto& [name, value] : c.events) {
          if (name != kHwpcTimeEnabled && name != kHwpcTimeRunning) events.insert(name);
        }
      }
    }
    features_.assign(events.begin(), events.end());
    models_.emplace(options_, features_);
    if (all != tick.end()) {
      for (int scope : {kScopeCpu, kScopeDram}) {
        if (scope == kScopeCpu && !options_.cpu_formula) continue;
        if (scope == kScopeDram && !options_.dram_formula) continue;
        const std::string& event =
            scope == kScopeCpu ? options_.cpu_rapl_event : options_.dram_rapl_event;
        std::set<int> sockets;
        for (const HwpcCpuCounters& c : all->second.counters) {
          if (c.group == "rapl" && c.Get(event) >= 0) sockets.insert(c.socket);
        }
        if (sockets.empty() && scope == kScopeDram) {
          header.notes.push_back("no " + event + " in the first tick's rapl group: no dram domain");
        }
        for (int socket : sockets) {
          Domain d;
          d.source = "rapl";
          d.kind = kDomainKind[scope];
          d.name = d.kind + "-" + std::to_string(socket);
          d.socket = socket;
          d.origin = "hwpc-sensor " + event + " of " + header.sensor + ", socket " +
                     std::to_string(socket);
          header.domains.push_back(d);
          domains_.push_back(DomainState{scope, socket, 0});
        }
      }
    }
    if (domains_.empty()) {
      return Status::Corruption(
          "the first tick (timestamp " + std::to_string(first_end_ms) +
          ") has no target \"all\" with a rapl group holding " + options_.cpu_rapl_event +
          ": the formula needs the machine's RAPL energy (hwpc-sensor's -s rapl -e " +
          options_.cpu_rapl_event + ")");
    }
    std::string features = "features (per-second rates of the core group):";
    for (const auto& f : features_) features += " " + f;
    header.notes.push_back(features_.empty() ? "no core group events: models are intercepts only"
                                             : features);
    KWATT_RETURN_IF_ERROR(sink_->Begin(header));
    begun_ = true;
    return Status::OK();
  }

  // The package's frequency from its APERF/MPERF ratio; the base frequency, and *missing set,
  // when the tick has no MPERF for the socket.
  int PackageFrequencyMhz(const HwpcReport& all, int socket, bool* missing) const {
    double aperf = 0, mperf = 0;
    for (const HwpcCpuCounters* c : Counters(all, "msr", socket)) {
      aperf += double(std::max<int64_t>(c->Get("APERF"), 0));
      mperf += double(std::max<int64_t>(c->Get("MPERF"), 0));
    }
    if (mperf <= 0) {
      *missing = true;
      return options_.cpu_base_frequency_mhz;
    }
    return int(std::llround(double(options_.cpu_base_frequency_mhz) * aperf / mperf));
  }

  Status ProcessOldest() {
    auto node = pending_.extract(pending_.begin());
    const int64_t end_ms = node.key();
    std::map<std::string, HwpcReport>& tick = node.mapped();
    if (!begun_) KWATT_RETURN_IF_ERROR(Begin(tick, end_ms));
    const int64_t length_ms = processed_any_ ? end_ms - last_processed_ : options_.sensor_period_ms;
    processed_any_ = true;
    last_processed_ = end_ms;
    const double seconds = double(length_ms) / 1000.0;

    IntervalReport out;
    out.sequence = sequence_++;
    out.end = end_ms * 1000000;
    out.start = out.end - length_ms * 1000000;
    std::vector<const HwpcReport*> targets;
    for (const auto& [name, report] : tick) {
      if (name == "all") continue;
      ReportTarget t;
      t.target.kind = TargetKind::kCgroup;
      t.target.key = "cgroup:" + name;
      t.target.name = name;
      out.targets.push_back(std::move(t));
      targets.push_back(&report);
    }
    // Sorted by key: "cgroup:" + name sorts as name does, the map's order.
    auto all_it = tick.find("all");
    const HwpcReport* all = all_it == tick.end() ? nullptr : &all_it->second;
    if (!all) ++stats_->ticks_without_all;

    std::vector<std::vector<double>> target_rates(targets.size());
    std::vector<double> machine_rates;
    bool frequency_missing = false;
    for (size_t d = 0; d < domains_.size(); ++d) {
      DomainState& state = domains_[d];
      DomainEnergy energy;
      energy.target_microjoules.assign(targets.size(), 0);
      const std::string& event =
          state.scope == kScopeCpu ? options_.cpu_rapl_event : options_.dram_rapl_event;
      std::vector<const HwpcCpuCounters*> rapl;
      if (all) rapl = Counters(*all, "rapl", state.socket);
      int64_t units = rapl.empty() ? -1 : rapl.front()->Get(event);
      if (units < 0) {
        energy.flags = kUnreadable;
        out.domains.push_back(std::move(energy));
        continue;
      }
      // Exact microjoules: the difference of the floors of the running totals.
      const int64_t before = MicrojoulesOfUnits(state.units);
      state.units += uint64_t(units);
      energy.measured_microjoules = MicrojoulesOfUnits(state.units) - before;
      const double watts = std::ldexp(double(units), -32) / seconds;

      // The package's frequency (its layer is the models').
      const int frequency = PackageFrequencyMhz(*all, state.socket, &frequency_missing);

      // Rates: the targets', and the machine's ("all", else the targets' sum).
      for (size_t t = 0; t < targets.size(); ++t) {
        Rates(*targets[t], state.socket, seconds, &target_rates[t]);
      }
      if (!Rates(*all, state.socket, seconds, &machine_rates)) {
        machine_rates.assign(features_.size(), 0);
        for (const auto& r : target_rates) {
          for (size_t f = 0; f < r.size(); ++f) machine_rates[f] += r[f];
        }
      }
      std::optional<ModelInfo> model =
          models_->Step(internal::SmartWattsScope(state.scope), state.socket, frequency, seconds,
                        watts, target_rates, machine_rates, &energy);
      if (model) {
        model->domain = int(d);
        out.models.push_back(std::move(*model));
      }
      out.domains.push_back(std::move(energy));
    }
    if (frequency_missing) ++stats_->ticks_without_frequency;
    stats_->models_learned = models_->models_learned();
    ++stats_->ticks;
    out.health.ticks = stats_->ticks;
    out.health.reports = stats_->ticks;
    out.health.late_ticks = stats_->late_reports;
    (void)sink_->Write(out);  // the sink counts and says its own failures
    return Status::OK();
  }

  SmartWattsOptions options_;
  ReportSink* sink_;
  SmartWattsStats* stats_;
  bool begun_ = false, processed_any_ = false;
  int64_t last_processed_ = 0;
  int64_t sequence_ = 0;
  std::vector<std::string> features_;
  std::vector<DomainState> domains_;
  std::optional<internal::SmartWattsModels>
      models_;  // from the first tick, which names the features
  std::map<int64_t, std::map<std::string, HwpcReport>> pending_;
};

Result<std::unique_ptr<HwpcSmartWatts>> HwpcSmartWatts::Create(const SmartWattsOptions& options,
                                                               ReportSink* sink) {
  KWATT_RETURN_IF_ERROR(ValidateSmartWattsOptions(options));
  if (!sink) return Status::InvalidArgument("no sink");
  auto formula = std::unique_ptr<HwpcSmartWatts>(new HwpcSmartWatts());
  formula->impl_ = std::make_unique<Impl>(options, sink, &formula->stats_);
  return formula;
}

HwpcSmartWatts::~HwpcSmartWatts() = default;

Status HwpcSmartWatts::Add(HwpcReport report) { return impl_->Add(std::move(report)); }

Status HwpcSmartWatts::Finish() { return impl_->Finish(); }

}  // namespace kwatt::meter
