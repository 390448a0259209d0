// A formula: how each interval's measured energy is shared among the targets
// (doc/meter/attribution.md, "Formulas"). The meter (pipeline/meter.h) and the replay of an
// activity record (pipeline/replay.h) run one, interval after interval:
//   BeginInterval lists the interval's targets from the activity read at its two ends;
//   FillDomain shares one domain's measured energy among them, once it is known (a delayed
//   source's comes later, and the formula keeps nothing of the interval but `IntervalActivity`).
// Two formulas:
//   "cputime"     by CPU time, with the idle power given or learned (attribution.h);
//   "smartwatts"  RAPL's package and dram domains by self-calibrating linear models on the
//                 targets' hardware counters (cycles, instructions), every other domain by CPU
//                 time (smartwatts.h).
//
// Thread safety: a Formula is used by one thread at a time.
#ifndef KWATT_METER_FORMULAS_FORMULA_H_
#define KWATT_METER_FORMULAS_FORMULA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/meter/activity/activity.h"
#include "kwatt/meter/formulas/attribution.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/formulas/smartwatts.h"

namespace kwatt::meter {

struct FormulaOptions {
  std::string name = "cputime";  // "cputime" or "smartwatts"
  // How the idle part is shared (cputime, and the domains smartwatts does not model).
  IdlePolicy idle_policy = IdlePolicy::kProportional;
  // Idle power in watts by domain name ("package-0") or kind ("package"), the name first; a
  // domain in neither has its idle power learned (cputime).
  std::map<std::string, double> idle_watts;
  // The smartwatts formula's options (those of its models: thresholds, windows, TDP, base
  // frequency, layer step; cpu_formula and dram_formula pick the domains modelled).
  SmartWattsOptions smartwatts;
};

// "cputime" or "smartwatts"; InvalidArgument naming both otherwise.
Status ValidateFormulaName(std::string_view name);

// Whether the formula needs the targets' hardware counters (TargetSelection::hardware_counters).
bool FormulaNeedsHardwareCounters(std::string_view name);

// What a formula keeps of one interval between BeginInterval and its last FillDomain.
struct IntervalActivity {
  std::vector<int64_t> target_cpu;  // per report target: its CPU microseconds in the interval
  // smartwatts: per report target, its hardware events per second (the formula's features), and
  // the machine's.
  std::vector<std::vector<double>> target_rates;
  std::vector<double> machine_rates;
  // Whether the rates are known: not without activity at both ends (a first interval, a
  // restart's downtime), nor when the machine was busy and no target's counters were read.
  bool rates_known = false;
};

class Formula {
 public:
  // The formula of `options.name` for these domains (the header's, in its order). `learn_idle`:
  // idle power not given is learned from the intervals (it needs the machine's activity).
  // InvalidArgument naming what is wrong: the name, idle power for a key that names no domain or
  // below zero, smartwatts' options, smartwatts with no RAPL package or dram domain to model, or
  // idle power given for a domain smartwatts models (its model's intercept is that).
  static Result<std::unique_ptr<Formula>> Create(const FormulaOptions& options,
                                                 const std::vector<Domain>& domains,
                                                 bool learn_idle);
  virtual ~Formula() = default;

  // Fills the header's formula, idle_policy and the formula's notes.
  virtual void Describe(MeterHeader* header) const = 0;

  // Fills `report`'s targets, ended targets, busy and capacity times for the interval from
  // `before` to `after` (either may be null: no activity then; report->start and ->end are set),
  // and `activity`. A target absent from `before` started in the interval.
  virtual void BeginInterval(const ActivitySnapshot* before, const ActivitySnapshot* after,
                             IntervalReport* report, IntervalActivity* activity) = 0;

  // Domain `d` of `report` (whose domains are sized already): `measured` microjoules with
  // `flags` (DomainFlag: a gap is never learned from), shared among the targets.
  virtual void FillDomain(const IntervalActivity& activity, size_t d, int64_t measured,
                          uint32_t flags, IntervalReport* report) = 0;
};

}  // namespace kwatt::meter

#endif  // KWATT_METER_FORMULAS_FORMULA_H_
