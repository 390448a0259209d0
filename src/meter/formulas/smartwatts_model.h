// SmartWatts' models of one machine (smartwatts.h says them for users): per scope (cpu, dram),
// socket and frequency layer, a linear model of power on per-second rates of hardware events,
// learned by non-negative least squares and relearned when its error passes the threshold; and
// an interval's energy shared by the model as it stands. One implementation for the formula in
// the meter (smartwatts_formula.cc, on the meter's own sources and activity) and for hwpc-sensor's
// reports (powerapi/hwpc_smartwatts.cc). Internal to the meter part.
//
// Thread safety: one thread at a time.
#ifndef KWATT_SRC_METER_FORMULAS_SMARTWATTS_MODEL_H_
#define KWATT_SRC_METER_FORMULAS_SMARTWATTS_MODEL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kwatt/meter/formulas/formula.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/formulas/smartwatts.h"

namespace kwatt::meter::internal {

enum class SmartWattsScope { kCpu = 0, kDram = 1 };

class SmartWattsModels {
 public:
  // `features`: the events' names, in the order of every rates vector given to Step.
  SmartWattsModels(const SmartWattsOptions& options, std::vector<std::string> features);

  const std::vector<std::string>& features() const { return features_; }
  int64_t models_learned() const { return models_learned_; }

  // One interval of one domain of `scope` on `socket`, `seconds` long, at the package frequency
  // `frequency_mhz` (its layer: rounded down to a multiple of the layer step): `energy`'s measured
  // microjoules (`energy->target_microjoules` sized to the targets) shared by the layer's model as
  // it stands (all unattributed until the layer has one; its idle_watts the intercept, its
  // idle_uncertainty_watts the model's error), then the interval (the machine's rates, `watts`)
  // learned from. Returns the model that shared it (ModelInfo::domain is left to
  // the caller), or nullopt when the layer had none yet.
  std::optional<ModelInfo> Step(SmartWattsScope scope, int socket, int frequency_mhz,
                                double seconds, double watts,
                                const std::vector<std::vector<double>>& target_rates,
                                const std::vector<double>& machine_rates, DomainEnergy* energy);

 private:
  struct Layer {
    std::deque<std::pair<std::vector<double>, double>> history;  // (rates, watts)
    std::deque<double> errors;
    bool fitted = false;
    double intercept = 0;
    std::vector<double> coefficients;
    int64_t learned = 0;  // models learned on this layer so far
    int64_t samples = 0;  // samples the current model was learned on
    std::string id;
  };

  void Learn(Layer& layer, SmartWattsScope scope, int socket, int layer_mhz);

  SmartWattsOptions options_;
  std::vector<std::string> features_;
  std::map<std::tuple<int, int, int>, Layer> layers_;
  int64_t models_learned_ = 0;
};

// The formula "smartwatts" in the meter (formula.h): RAPL's package and dram domains shared by
// models on the targets' cycles and instructions; every other domain by CPU time (`cputime`,
// which also lists each interval's targets). InvalidArgument when no domain is modelled, or when
// `given_idle_watts` (per domain) gives one that is.
Result<std::unique_ptr<Formula>> MakeSmartWattsFormula(
    const SmartWattsOptions& options, const std::vector<Domain>& domains,
    const std::vector<std::optional<double>>& given_idle_watts, std::unique_ptr<Formula> cputime);

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_FORMULAS_SMARTWATTS_MODEL_H_
