#include "src/meter/formulas/cputime_formula.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string_view>

namespace kwatt::meter {

CpuTimeFormula::CpuTimeFormula(IdlePolicy policy,
                               std::vector<std::optional<double>> given_idle_watts, bool learn_idle)
    : policy_(policy),
      given_(std::move(given_idle_watts)),
      learn_(learn_idle),
      // Learned in blocks of at least half a second (IdlePowerEstimator): at 100 ms periods on a
      // loaded machine, single intervals read a late counter update as power below the idle.
      estimators_(given_.size(), IdlePowerEstimator(600, 10, 0.5)) {}

Result<std::vector<std::optional<double>>> CpuTimeFormula::IdleWattsByDomain(
    const std::vector<Domain>& domains, const std::map<std::string, double>& idle_watts) {
  std::vector<std::optional<double>> out(domains.size());
  std::set<std::string> used;
  for (const auto& [key, watts] : idle_watts) {
    if (!(watts >= 0) || !std::isfinite(watts)) {
      return Status::InvalidArgument("idle power of " + key + " should be watts >= 0");
    }
  }
  for (size_t d = 0; d < domains.size(); ++d) {
    for (const std::string& key : {domains[d].name, domains[d].kind}) {
      auto it = idle_watts.find(key);
      if (it == idle_watts.end()) continue;
      out[d] = it->second;
      used.insert(key);
      break;
    }
  }
  for (const auto& [key, watts] : idle_watts) {
    if (used.count(key)) continue;
    bool known = false;
    for (const auto& d : domains) known = known || d.name == key || d.kind == key;
    if (known) continue;
    std::string names;
    for (const auto& d : domains) names += (names.empty() ? "" : ", ") + d.name;
    return Status::InvalidArgument("idle power given for " + key +
                                   ", which is no domain name or kind of the sources (" + names +
                                   ")");
  }
  return out;
}

void CpuTimeFormula::Describe(MeterHeader* header) const {
  header->formula = "cputime";
  header->idle_policy = IdlePolicyName(policy_);
}

void CpuTimeFormula::BeginInterval(const ActivitySnapshot* before, const ActivitySnapshot* after,
                                   IntervalReport* report, IntervalActivity* activity) {
  std::vector<int64_t>* target_cpu = &activity->target_cpu;
  report->targets.clear();
  report->ended_targets.clear();
  target_cpu->clear();
  report->busy_microseconds = 0;
  report->capacity_microseconds = 0;
  if (!after) return;
  std::map<std::string_view, int64_t> earlier;
  if (before) {
    for (const auto& t : before->targets) earlier[t.target.key] = t.cpu_microseconds;
    report->busy_microseconds =
        std::max<int64_t>(after->busy_microseconds - before->busy_microseconds, 0);
    report->capacity_microseconds =
        std::max<int64_t>(after->total_microseconds - before->total_microseconds, 0);
  }
  const bool everyone = policy_ == IdlePolicy::kEqual;
  for (const auto& t : after->targets) {
    auto it = earlier.find(t.target.key);
    int64_t cpu = std::max<int64_t>(t.cpu_microseconds - (it == earlier.end() ? 0 : it->second), 0);
    if (cpu == 0 && !everyone) continue;
    report->targets.push_back(ReportTarget{t.target, cpu});
    target_cpu->push_back(cpu);
  }
  if (before) {
    std::set<std::string_view> alive;
    for (const auto& t : after->targets) alive.insert(t.target.key);
    for (const auto& [key, cpu] : earlier) {
      if (!alive.count(key)) report->ended_targets.emplace_back(key);
    }
  }
}

void CpuTimeFormula::FillDomain(const IntervalActivity& activity, size_t d, int64_t measured,
                                uint32_t flags, IntervalReport* report) {
  const std::vector<int64_t>& target_cpu = activity.target_cpu;
  const double seconds = double(report->end - report->start) / 1e9;
  std::optional<double> idle_watts = given_[d];
  double uncertainty = 0;
  if (!idle_watts && learn_) {
    if (std::optional<IdleEstimate> estimate = estimators_[d].Estimate()) {
      idle_watts = estimate->watts;
      uncertainty = estimate->uncertainty_watts;
    }
  }
  const int64_t idle =
      idle_watts && seconds > 0 ? int64_t(std::llround(*idle_watts * seconds * 1e6)) : 0;
  DomainEnergy& energy = report->domains[d];
  energy = Attribute(measured, idle, target_cpu, report->busy_microseconds, policy_);
  energy.flags = flags;
  energy.idle_watts = idle_watts.value_or(-1);
  energy.idle_uncertainty_watts = uncertainty;
  const uint32_t gap = kReset | kUnreadable | kMaybeMissedWrap;
  if (learn_ && !(flags & gap) && seconds > 0 && report->capacity_microseconds > 0) {
    estimators_[d].Add(double(measured) / 1e6 / seconds,
                       double(report->busy_microseconds) / double(report->capacity_microseconds),
                       seconds);
  }
}

}  // namespace kwatt::meter
