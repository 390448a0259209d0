#include "src/meter/pipeline/totals.h"

#include <algorithm>

namespace kwatt::meter {

void TotalsKeeper::Reset(const std::vector<Domain>& domains) {
  const size_t n = domains.size();
  totals_ = MeterTotals{};
  totals_.domains = domains;
  totals_.measured_microjoules.assign(n, 0);
  totals_.idle_microjoules.assign(n, 0);
  totals_.unattributed_microjoules.assign(n, 0);
  totals_.flags.assign(n, 0);
  totals_.idle_watts.assign(n, -1);
  totals_.idle_uncertainty_watts.assign(n, 0);
  index_.clear();
}

void TotalsKeeper::Restore(const MeterTotals& saved) {
  std::vector<Domain> domains = totals_.domains;
  totals_ = saved;
  totals_.idle_watts.assign(domains.size(), -1);
  totals_.idle_uncertainty_watts.assign(domains.size(), 0);
  totals_.domains = std::move(domains);
  index_.clear();
  for (size_t i = 0; i < totals_.targets.size(); ++i) index_[totals_.targets[i].target.key] = i;
}

void TotalsKeeper::Add(const IntervalReport& r) {
  if (totals_.reports == 0 && totals_.start == 0) totals_.start = r.start;
  totals_.end = std::max(totals_.end, r.end);
  ++totals_.reports;
  totals_.busy_microseconds += r.busy_microseconds;
  totals_.capacity_microseconds += r.capacity_microseconds;
  const size_t n = totals_.domains.size();
  for (size_t d = 0; d < n && d < r.domains.size(); ++d) {
    totals_.measured_microjoules[d] += r.domains[d].measured_microjoules;
    totals_.idle_microjoules[d] += r.domains[d].idle_microjoules;
    totals_.unattributed_microjoules[d] += r.domains[d].unattributed_microjoules;
    totals_.flags[d] |= r.domains[d].flags;
    totals_.idle_watts[d] = r.domains[d].idle_watts;
    totals_.idle_uncertainty_watts[d] = r.domains[d].idle_uncertainty_watts;
  }
  for (size_t i = 0; i < r.targets.size(); ++i) {
    const Target& target = r.targets[i].target;
    auto it = index_.find(target.key);
    if (it == index_.end()) {
      Target entry = target;
      if (totals_.targets.size() >= kMaxTargets) {
        entry = Target{TargetKind::kProcess, "(other targets)", "(other targets)", 0};
        it = index_.find(entry.key);
      }
      if (it == index_.end()) {
        it = index_.emplace(entry.key, totals_.targets.size()).first;
        totals_.targets.push_back({entry, 0, std::vector<int64_t>(n, 0)});
      }
    }
    MeterTotals::TargetTotal& total = totals_.targets[it->second];
    total.cpu_microseconds += r.targets[i].cpu_microseconds;
    for (size_t d = 0; d < n && d < r.domains.size(); ++d) {
      total.microjoules[d] += r.domains[d].target_microjoules[i];
    }
  }
}

}  // namespace kwatt::meter
