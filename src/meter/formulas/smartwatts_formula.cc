// The formula "smartwatts" in the meter (smartwatts_model.h, formula.h).

#include <algorithm>
#include <map>
#include <optional>
#include <string_view>

#include "src/meter/formulas/smartwatts_model.h"

namespace kwatt::meter::internal {

namespace {

// The features: the targets' hardware counters as the meter's activity reads them (activity.h).
const std::vector<std::string>& MeterFeatures() {
  static const std::vector<std::string> features = {"cycles", "instructions"};
  return features;
}

class SmartWattsMeterFormula : public Formula {
 public:
  SmartWattsMeterFormula(const SmartWattsOptions& options, std::vector<Domain> domains,
                         std::vector<std::optional<SmartWattsScope>> scopes,
                         std::unique_ptr<Formula> cputime)
      : options_(options),
        domains_(std::move(domains)),
        scopes_(std::move(scopes)),
        cputime_(std::move(cputime)),
        models_(options, MeterFeatures()) {}

  void Describe(MeterHeader* header) const override {
    cputime_->Describe(header);  // the idle policy of the domains not modelled
    header->formula = "smartwatts";
    std::string modelled, others;
    for (size_t d = 0; d < domains_.size(); ++d) {
      std::string& list = scopes_[d] ? modelled : others;
      list += (list.empty() ? "" : ", ") + domains_[d].name;
    }
    header->notes.push_back(
        "smartwatts models " + modelled +
        " on the targets' cycles and instructions per second (the machine's: theirs scaled up to "
        "its busy CPU time; one frequency layer, the base frequency's: the meter reads no "
        "APERF/MPERF); their idle power is the models' intercept, kept apart");
    if (!others.empty()) {
      header->notes.push_back("smartwatts shares " + others + " by CPU time (idle policy " +
                              header->idle_policy + ")");
    }
  }

  void BeginInterval(const ActivitySnapshot* before, const ActivitySnapshot* after,
                     IntervalReport* report, IntervalActivity* activity) override {
    cputime_->BeginInterval(before, after, report, activity);
    const size_t features = MeterFeatures().size();
    activity->target_rates.assign(report->targets.size(), std::vector<double>(features, 0.0));
    activity->machine_rates.assign(features, 0.0);
    activity->rates_known = false;
    if (!before || !after || after->monotonic_nanos <= before->monotonic_nanos) return;
    const double seconds = double(after->monotonic_nanos - before->monotonic_nanos) / 1e9;
    std::map<std::string_view, const TargetSample*> earlier, now;
    for (const auto& t : before->targets) earlier[t.target.key] = &t;
    for (const auto& t : after->targets) now[t.target.key] = &t;
    int64_t counted_cpu = 0;  // of the targets whose counters were read
    for (size_t i = 0; i < report->targets.size(); ++i) {
      auto a = now.find(report->targets[i].target.key);
      if (a == now.end()) continue;
      auto b = earlier.find(a->first);
      const TargetSample* from = b == earlier.end() ? nullptr : b->second;
      // A counter not read (-1) at either end: the target's rates are unknown, and its CPU time
      // counts as other software's below. A target new in the interval counted from 0
      // (activity.h: counters count from the target's origin).
      bool read = true;
      auto rate = [&](int64_t TargetSample::*counter) {
        const int64_t end = a->second->*counter, start = from ? from->*counter : 0;
        if (end < 0 || start < 0) {
          read = false;
          return 0.0;
        }
        return double(std::max<int64_t>(end - start, 0)) / seconds;
      };
      std::vector<double> rates = {rate(&TargetSample::cycles), rate(&TargetSample::instructions)};
      if (!read) continue;
      activity->target_rates[i] = std::move(rates);
      counted_cpu += report->targets[i].cpu_microseconds;
    }
    // The machine's rates: the targets' scaled up to the machine's busy CPU time (the meter
    // counts its targets, not the whole machine), so that other software's activity stays
    // unattributed as under cputime. A busy machine none of whose CPU time was counted has no
    // known rates; an idle one has rates of zero (an interval the intercept is learned from).
    if (counted_cpu == 0 && report->busy_microseconds > 0) return;
    double scale = 1;
    if (counted_cpu > 0 && report->busy_microseconds > counted_cpu) {
      scale = double(report->busy_microseconds) / double(counted_cpu);
    }
    for (const auto& r : activity->target_rates) {
      for (size_t f = 0; f < features; ++f) activity->machine_rates[f] += r[f] * scale;
    }
    activity->rates_known = true;
  }

  void FillDomain(const IntervalActivity& activity, size_t d, int64_t measured, uint32_t flags,
                  IntervalReport* report) override {
    if (!scopes_[d]) {
      cputime_->FillDomain(activity, d, measured, flags, report);
      return;
    }
    DomainEnergy& energy = report->domains[d];
    energy = DomainEnergy{};
    energy.measured_microjoules = measured;
    energy.flags = flags;
    energy.target_microjoules.assign(report->targets.size(), 0);
    const double seconds = double(report->end - report->start) / 1e9;
    const uint32_t gap = kReset | kUnreadable | kMaybeMissedWrap;
    if ((flags & gap) || !(seconds > 0) || !activity.rates_known ||
        activity.target_rates.size() != report->targets.size()) {
      energy.unattributed_microjoules = measured;  // neither shared nor learned from
      return;
    }
    std::optional<ModelInfo> model = models_.Step(
        *scopes_[d], domains_[d].socket, options_.cpu_base_frequency_mhz, seconds,
        double(measured) / 1e6 / seconds, activity.target_rates, activity.machine_rates, &energy);
    if (model) {
      model->domain = int(d);
      report->models.push_back(std::move(*model));
    }
  }

 private:
  SmartWattsOptions options_;
  std::vector<Domain> domains_;
  std::vector<std::optional<SmartWattsScope>> scopes_;  // per domain: the model's, or cputime's
  std::unique_ptr<Formula> cputime_;
  SmartWattsModels models_;
};

}  // namespace

Result<std::unique_ptr<Formula>> MakeSmartWattsFormula(
    const SmartWattsOptions& options, const std::vector<Domain>& domains,
    const std::vector<std::optional<double>>& given_idle_watts, std::unique_ptr<Formula> cputime) {
  KWATT_RETURN_IF_ERROR(ValidateSmartWattsOptions(options).WithContext("smartwatts"));
  std::vector<std::optional<SmartWattsScope>> scopes(domains.size());
  bool any = false;
  for (size_t d = 0; d < domains.size(); ++d) {
    if (domains[d].source != "rapl") continue;
    if (domains[d].kind == "package" && options.cpu_formula) scopes[d] = SmartWattsScope::kCpu;
    if (domains[d].kind == "dram" && options.dram_formula) scopes[d] = SmartWattsScope::kDram;
    any = any || scopes[d].has_value();
    if (scopes[d] && d < given_idle_watts.size() && given_idle_watts[d]) {
      return Status::InvalidArgument(
          "idle power given for " + domains[d].name +
          ", which the smartwatts formula models: its idle power is the model's intercept, "
          "learned (give idle power only for the domains it shares by CPU time)");
    }
  }
  if (!any) {
    return Status::InvalidArgument(
        "the smartwatts formula models RAPL's package and dram domains, and the sources have "
        "none: read RAPL (--source rapl), or use the formula cputime");
  }
  return std::unique_ptr<Formula>(std::make_unique<SmartWattsMeterFormula>(
      options, domains, std::move(scopes), std::move(cputime)));
}

}  // namespace kwatt::meter::internal
