#include "src/meter/formulas/smartwatts_model.h"

#include <algorithm>
#include <cmath>

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

namespace internal {

namespace {

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

double Dot(const std::vector<double>& c, const std::vector<double>& x) {
  double sum = 0;
  for (size_t i = 0; i < c.size() && i < x.size(); ++i) sum += c[i] * x[i];
  return sum;
}

}  // namespace

SmartWattsModels::SmartWattsModels(const SmartWattsOptions& options,
                                   std::vector<std::string> features)
    : options_(options), features_(std::move(features)) {}

void SmartWattsModels::Learn(Layer& layer, SmartWattsScope scope, int socket, int layer_mhz) {
  if (layer.history.size() < size_t(options_.min_samples)) return;
  const size_t n = features_.size() + 1;
  Matrix a;
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
  Result<NnlsResult> solved = SolveNnls(a, b);
  if (!solved.ok()) return;
  if (!(solved->x[0] < options_.cpu_tdp_watts)) return;  // as SmartWatts: outside [0, TDP)
  layer.fitted = true;
  layer.intercept = solved->x[0];
  layer.coefficients.assign(solved->x.begin() + 1, solved->x.end());
  layer.samples = int64_t(layer.history.size());
  ++layer.learned;
  layer.id = std::string(scope == SmartWattsScope::kDram ? "dram-" : "") + "socket" +
             std::to_string(socket) + "-" + std::to_string(layer_mhz) + "MHz-#" +
             std::to_string(layer.learned);
  layer.errors.clear();
  ++models_learned_;
}

std::optional<ModelInfo> SmartWattsModels::Step(
    SmartWattsScope scope, int socket, int frequency_mhz, double seconds, double watts,
    const std::vector<std::vector<double>>& target_rates, const std::vector<double>& machine_rates,
    DomainEnergy* energy) {
  const int layer_mhz = frequency_mhz / options_.layer_step_mhz * options_.layer_step_mhz;
  Layer& layer = layers_[{int(scope), socket, layer_mhz}];
  auto remember = [&] {
    layer.history.emplace_back(machine_rates, watts);
    while (layer.history.size() > size_t(options_.history_window)) layer.history.pop_front();
  };
  if (!layer.fitted) {
    energy->unattributed_microjoules = energy->measured_microjoules;
    remember();
    Learn(layer, scope, socket, layer_mhz);
    return std::nullopt;
  }
  const double predicted = layer.intercept + Dot(layer.coefficients, machine_rates);
  layer.errors.push_back(std::fabs(watts - predicted));
  while (layer.errors.size() > size_t(options_.error_window)) layer.errors.pop_front();
  const double error = Aggregate(layer.errors, options_.error_aggregate);
  energy->idle_watts = layer.intercept;
  energy->idle_uncertainty_watts = error;

  // The shares: the intercept's energy as idle, each target's predicted dynamic power as its
  // weight, and what the machine's predicted power leaves over the targets' as unattributed.
  const int64_t idle = std::clamp<int64_t>(std::llround(layer.intercept * seconds * 1e6), 0,
                                           energy->measured_microjoules);
  energy->idle_microjoules = idle;
  std::vector<int64_t> weights;
  weights.reserve(target_rates.size() + 1);
  double targets_watts = 0;
  int64_t given = 0;
  for (const auto& r : target_rates) {
    const double w = Dot(layer.coefficients, r);
    targets_watts += w;
    weights.push_back(std::llround(w * 1e6));  // microwatts
    given += weights.back();
  }
  const double machine_watts = std::max(Dot(layer.coefficients, machine_rates), targets_watts);
  weights.push_back(std::max<int64_t>(std::llround(machine_watts * 1e6) - given, 0));
  std::vector<int64_t> parts = Apportion(energy->measured_microjoules - idle, weights);
  for (size_t t = 0; t < target_rates.size(); ++t) energy->target_microjoules[t] = parts[t];
  energy->unattributed_microjoules = parts.back();

  ModelInfo info;
  info.socket = socket;
  info.layer_frequency_mhz = layer_mhz;
  info.package_frequency_mhz = frequency_mhz;
  info.id = layer.id;
  info.samples = layer.samples;
  info.error_watts = error;
  info.intercept_watts = layer.intercept;
  for (size_t f = 0; f < features_.size(); ++f) {
    info.coefficients.emplace_back(features_[f], layer.coefficients[f]);
  }

  remember();
  const double threshold = scope == SmartWattsScope::kCpu ? options_.cpu_error_threshold_watts
                                                          : options_.dram_error_threshold_watts;
  // Relearned when the error passes the threshold, and at every interval while the model was
  // learned on fewer samples than the window holds (a provisional model: SmartWatts too relearns
  // then, as its first models, fitted without intercept, miss the threshold).
  if (error > threshold || layer.samples < int64_t(options_.history_window)) {
    Learn(layer, scope, socket, layer_mhz);
  }
  return info;
}

}  // namespace internal
}  // namespace kwatt::meter
