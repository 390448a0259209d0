#include "kwatt/meter/formulas/smartwatts.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <set>
#include <tuple>

#include "kwatt/meter/formulas/attribution.h"
#include "src/meter/formulas/nnls.h"

namespace kwatt::meter {

Status ValidateSmartWattsOptions(const SmartWattsOptions& o) {
  auto bad = [](const std::string& what) { return Status::InvalidArgument(what); };
  if (!o.cpu_formula && !o.dram_formula) {
    return bad("both formulas are disabled (disable-cpu-formula and disable-dram-formula)");
  }
  if (o.cpu_formula && o.cpu_rapl_event.empty()) return bad("cpu-rapl-ref-event: empty");
  if (o.dram_formula && o.dram_rapl_event.empty()) return bad("dram-rapl-ref-event: empty");
  if (!(o.cpu_error_threshold_watts > 0) || !std::isfinite(o.cpu_error_threshold_watts)) {
    return bad("cpu-error-threshold: watts, more than 0");
  }
  if (!(o.dram_error_threshold_watts > 0) || !std::isfinite(o.dram_error_threshold_watts)) {
    return bad("dram-error-threshold: watts, more than 0");
  }
  if (!(o.cpu_tdp_watts > 0) || !std::isfinite(o.cpu_tdp_watts)) {
    return bad("cpu-tdp: watts, more than 0");
  }
  if (o.cpu_base_frequency_mhz <= 0 || o.cpu_base_frequency_mhz > 100000) {
    return bad("cpu-base-freq: MHz, 1 to 100000");
  }
  if (o.layer_step_mhz <= 0 || o.layer_step_mhz > 100000) {
    return bad("cpu-base-clock (the layer step): MHz, 1 to 100000");
  }
  if (o.sensor_period_ms <= 0 || o.sensor_period_ms > 86400000) {
    return bad("sensor-reports-frequency: milliseconds, 1 to 86400000");
  }
  if (o.history_window < 1 || o.history_window > 1000000) {
    return bad("learn-history-window-size: 1 to 1000000 samples");
  }
  if (o.min_samples < 1 || o.min_samples > o.history_window) {
    return bad("learn-min-samples-required: 1 to learn-history-window-size (" +
               std::to_string(o.history_window) + ")");
  }
  if (o.error_window < 1 || o.error_window > 1000000) {
    return bad("learn-error-window-size: 1 to 1000000 ticks");
  }
  if (o.reorder_ticks < 0 || o.reorder_ticks > 10000) return bad("reorder ticks: 0 to 10000");
  return Status::OK();
}

namespace {

constexpr int kScopeCpu = 0, kScopeDram = 1;
const char* const kDomainKind[2] = {"package", "dram"};

// A model of one (scope, socket, layer).
struct LayerModel {
  std::deque<std::pair<std::vector<double>, double>> history;  // (rates, watts)
  std::deque<double> errors;
  bool fitted = false;
  double intercept = 0;
  std::vector<double> coefficients;
  int64_t learned = 0;  // models learned on this layer so far
  int64_t samples = 0;  // samples the current model was learned on
  std::string id;
};

double Aggregate(const std::deque<double>& values, ErrorAggregate how) {
  if (values.empty()) return 0;
  if (how == ErrorAggregate::kMean) {
    double sum = 0;
    for (double v : values) sum += v;
    return sum / double(values.size());
  }
  std::vector<double> v(values.begin(), values.end());
  const size_t n = v.size(), mid = n / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (n % 2) return v[mid];
  return (*std::max_element(v.begin(), v.begin() + mid) + v[mid]) / 2;
}

// floor(counts * 10^6 / 2^32): microjoules of a running total of RAPL units.
int64_t MicrojoulesOfUnits(unsigned __int128 units) { return int64_t((units * 1000000u) >> 32); }

}  // namespace

class SmartWattsFormula::Impl {
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

  void Learn(LayerModel& layer, int scope, int socket, int layer_mhz) {
    if (layer.history.size() < size_t(options_.min_samples)) return;
    const size_t n = features_.size() + 1;
    internal::Matrix a;
    a.rows = layer.history.size();
    a.columns = n;
    a.values.reserve(a.rows * n);
    std::vector<double> b;
    b.reserve(a.rows);
    for (const auto& [rates, watts] : layer.history) {
      a.values.push_back(1.0);
      a.values.insert(a.values.end(), rates.begin(), rates.end());
      b.push_back(watts);
    }
    Result<internal::NnlsResult> solved = internal::SolveNnls(a, b);
    if (!solved.ok()) return;
    if (!(solved->x[0] < options_.cpu_tdp_watts)) return;  // as SmartWatts: outside [0, TDP)
    layer.fitted = true;
    layer.intercept = solved->x[0];
    layer.coefficients.assign(solved->x.begin() + 1, solved->x.end());
    layer.samples = int64_t(layer.history.size());
    ++layer.learned;
    layer.id = std::string(scope == kScopeDram ? "dram-" : "") + "socket" + std::to_string(socket) +
               "-" + std::to_string(layer_mhz) + "MHz-#" + std::to_string(layer.learned);
    layer.errors.clear();
    ++stats_->models_learned;
  }

  static double Dot(const std::vector<double>& c, const std::vector<double>& x) {
    double sum = 0;
    for (size_t i = 0; i < c.size() && i < x.size(); ++i) sum += c[i] * x[i];
    return sum;
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

  // The interval's shares of energy->measured_microjoules, by the layer's model as it stands:
  // the intercept's energy as idle, each target's predicted power as its weight, and what the
  // machine's predicted power leaves over the targets' as unattributed.
  static void Share(const LayerModel& layer, double seconds,
                    const std::vector<std::vector<double>>& target_rates,
                    const std::vector<double>& machine_rates, DomainEnergy* energy) {
    const int64_t idle = std::clamp<int64_t>(std::llround(layer.intercept * seconds * 1e6), 0,
                                             energy->measured_microjoules);
    energy->idle_microjoules = idle;
    std::vector<int64_t> weights;
    weights.reserve(target_rates.size() + 1);
    double targets_watts = 0;
    int64_t given = 0;
    for (const auto& r : target_rates) {
      double w = Dot(layer.coefficients, r);
      targets_watts += w;
      weights.push_back(std::llround(w * 1e6));  // microwatts
      given += weights.back();
    }
    const double machine_watts = std::max(Dot(layer.coefficients, machine_rates), targets_watts);
    weights.push_back(std::max<int64_t>(std::llround(machine_watts * 1e6) - given, 0));
    std::vector<int64_t> parts = Apportion(energy->measured_microjoules - idle, weights);
    for (size_t t = 0; t < target_rates.size(); ++t) energy->target_microjoules[t] = parts[t];
    energy->unattributed_microjoules = parts.back();
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

      // The package's frequency, and its layer.
      const int frequency = PackageFrequencyMhz(*all, state.socket, &frequency_missing);
      const int layer_mhz = frequency / options_.layer_step_mhz * options_.layer_step_mhz;

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

      LayerModel& layer = layers_[{state.scope, state.socket, layer_mhz}];
      if (layer.fitted) {
        const double predicted = layer.intercept + Dot(layer.coefficients, machine_rates);
        layer.errors.push_back(std::fabs(watts - predicted));
        while (layer.errors.size() > size_t(options_.error_window)) layer.errors.pop_front();
        const double error = Aggregate(layer.errors, options_.error_aggregate);

        Share(layer, seconds, target_rates, machine_rates, &energy);

        ModelInfo info;
        info.domain = int(d);
        info.socket = state.socket;
        info.layer_frequency_mhz = layer_mhz;
        info.package_frequency_mhz = frequency;
        info.id = layer.id;
        info.samples = layer.samples;
        info.error_watts = error;
        info.intercept_watts = layer.intercept;
        for (size_t f = 0; f < features_.size(); ++f) {
          info.coefficients.emplace_back(features_[f], layer.coefficients[f]);
        }
        out.models.push_back(std::move(info));

        layer.history.emplace_back(machine_rates, watts);
        while (layer.history.size() > size_t(options_.history_window)) layer.history.pop_front();
        const double threshold = state.scope == kScopeCpu ? options_.cpu_error_threshold_watts
                                                          : options_.dram_error_threshold_watts;
        // Relearned when the error passes the threshold, and at every tick while the model was
        // learned on fewer samples than the window holds (a provisional model: SmartWatts too
        // relearns then, as its first models, fitted without intercept, miss the threshold).
        if (error > threshold || layer.samples < int64_t(options_.history_window)) {
          Learn(layer, state.scope, state.socket, layer_mhz);
        }
      } else {
        energy.unattributed_microjoules = energy.measured_microjoules;
        layer.history.emplace_back(machine_rates, watts);
        while (layer.history.size() > size_t(options_.history_window)) layer.history.pop_front();
        Learn(layer, state.scope, state.socket, layer_mhz);
      }
      out.domains.push_back(std::move(energy));
    }
    if (frequency_missing) ++stats_->ticks_without_frequency;
    ++stats_->ticks;
    out.health.ticks = stats_->ticks;
    out.health.reports = stats_->ticks;
    out.health.late_ticks = stats_->late_reports;
    Status written = sink_->Write(out);
    if (!written.ok()) {
      ++stats_->sink_errors;
      stats_->last_sink_error = written.message();
    }
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
  std::map<std::tuple<int, int, int>, LayerModel> layers_;
  std::map<int64_t, std::map<std::string, HwpcReport>> pending_;
};

Result<std::unique_ptr<SmartWattsFormula>> SmartWattsFormula::Create(
    const SmartWattsOptions& options, ReportSink* sink) {
  KWATT_RETURN_IF_ERROR(ValidateSmartWattsOptions(options));
  if (!sink) return Status::InvalidArgument("no sink");
  auto formula = std::unique_ptr<SmartWattsFormula>(new SmartWattsFormula());
  formula->impl_ = std::make_unique<Impl>(options, sink, &formula->stats_);
  return formula;
}

SmartWattsFormula::~SmartWattsFormula() = default;

Status SmartWattsFormula::Add(HwpcReport report) { return impl_->Add(std::move(report)); }

Status SmartWattsFormula::Finish() { return impl_->Finish(); }

}  // namespace kwatt::meter
