#include "kwatt/meter/formulas/formula.h"

#include "src/meter/formulas/cputime_formula.h"
#include "src/meter/formulas/smartwatts_model.h"

namespace kwatt::meter {

Status ValidateFormulaName(std::string_view name) {
  if (name == "cputime" || name == "smartwatts") return Status::OK();
  return Status::InvalidArgument("formula \"" + std::string(name) +
                                 "\": cputime (by CPU time) or smartwatts (models on hardware "
                                 "counters)");
}

bool FormulaNeedsHardwareCounters(std::string_view name) { return name == "smartwatts"; }

Result<std::unique_ptr<Formula>> Formula::Create(const FormulaOptions& options,
                                                 const std::vector<Domain>& domains,
                                                 bool learn_idle) {
  KWATT_RETURN_IF_ERROR(ValidateFormulaName(options.name));
  KWATT_ASSIGN_OR_RETURN(std::vector<std::optional<double>> idle_watts,
                         CpuTimeFormula::IdleWattsByDomain(domains, options.idle_watts));
  auto cputime = std::make_unique<CpuTimeFormula>(options.idle_policy, idle_watts, learn_idle);
  if (options.name == "cputime") return std::unique_ptr<Formula>(std::move(cputime));
  return internal::MakeSmartWattsFormula(options.smartwatts, domains, idle_watts,
                                         std::move(cputime));
}

}  // namespace kwatt::meter
