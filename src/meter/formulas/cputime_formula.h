// The formula "cputime" (formula.h): from two activity snapshots, an interval's targets and their
// CPU times; for each domain, its measured energy shared among them (attribution.h) with the
// domain's idle power given or learned. The smartwatts formula shares the domains it does not
// model with one. Internal to the meter part: Formula::Create makes it.
//
// Thread safety: one thread at a time.
#ifndef KWATT_SRC_METER_FORMULAS_CPUTIME_FORMULA_H_
#define KWATT_SRC_METER_FORMULAS_CPUTIME_FORMULA_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/formulas/attribution.h"
#include "kwatt/meter/formulas/formula.h"
#include "kwatt/meter/formulas/report.h"

namespace kwatt::meter {

class CpuTimeFormula : public Formula {
 public:
  // `given_idle_watts` per domain (nullopt: learned from the intervals, when `learn_idle`).
  CpuTimeFormula(IdlePolicy policy, std::vector<std::optional<double>> given_idle_watts,
                 bool learn_idle);

  // Resolves idle power given by domain name or kind ("package-0", "package"; the name first)
  // into one entry per domain. InvalidArgument for a key that names no domain (listing them) or
  // watts below zero.
  static Result<std::vector<std::optional<double>>> IdleWattsByDomain(
      const std::vector<Domain>& domains, const std::map<std::string, double>& idle_watts);

  void Describe(MeterHeader* header) const override;

  // Targets without CPU time in the interval are left out, except under the policy "equal"
  // (every target alive shares the idle part). The targets of `before` absent from `after` ended
  // in the interval (report->ended_targets). Fills activity->target_cpu only.
  void BeginInterval(const ActivitySnapshot* before, const ActivitySnapshot* after,
                     IntervalReport* report, IntervalActivity* activity) override;

  // Learns the domain's idle power from intervals without a gap.
  void FillDomain(const IntervalActivity& activity, size_t d, int64_t measured, uint32_t flags,
                  IntervalReport* report) override;

 private:
  IdlePolicy policy_;
  std::vector<std::optional<double>> given_;
  bool learn_;
  std::vector<IdlePowerEstimator> estimators_;
};

}  // namespace kwatt::meter

#endif  // KWATT_SRC_METER_FORMULAS_CPUTIME_FORMULA_H_
