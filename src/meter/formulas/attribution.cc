#include "kwatt/meter/formulas/attribution.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kwatt::meter {

Result<IdlePolicy> ParseIdlePolicy(std::string_view text) {
  if (text == "none") return IdlePolicy::kNone;
  if (text == "proportional") return IdlePolicy::kProportional;
  if (text == "equal") return IdlePolicy::kEqual;
  return Status::InvalidArgument("idle policy \"" + std::string(text) +
                                 "\" is none of none, proportional, equal");
}

const char* IdlePolicyName(IdlePolicy policy) {
  switch (policy) {
    case IdlePolicy::kNone:
      return "none";
    case IdlePolicy::kProportional:
      return "proportional";
    case IdlePolicy::kEqual:
      return "equal";
  }
  return "none";
}

std::vector<int64_t> Apportion(int64_t total, const std::vector<int64_t>& weights) {
  std::vector<int64_t> parts(weights.size(), 0);
  if (weights.empty()) return parts;
  // Weights are CPU microseconds (an interval's worth, < 2^40 even for hours on thousands of
  // CPUs) and totals microjoules: 128-bit products are exact.
  __int128 sum = 0;
  for (int64_t w : weights) sum += std::max<int64_t>(w, 0);
  if (sum == 0) {
    parts.back() = total;
    return parts;
  }
  std::vector<std::pair<__int128, size_t>> remainders;
  remainders.reserve(weights.size());
  int64_t given = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    __int128 exact = __int128(total) * std::max<int64_t>(weights[i], 0);
    parts[i] = int64_t(exact / sum);
    given += parts[i];
    remainders.emplace_back(exact % sum, i);
  }
  // Fewer units are left than there are weights; the largest remainders get them, ties to the
  // earlier weight.
  std::stable_sort(remainders.begin(), remainders.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t k = 0; given < total; ++k, ++given) ++parts[remainders[k].second];
  return parts;
}

DomainEnergy Attribute(int64_t measured_microjoules, int64_t idle_microjoules,
                       const std::vector<int64_t>& target_cpu_microseconds,
                       int64_t busy_microseconds, IdlePolicy policy) {
  DomainEnergy out;
  const size_t n = target_cpu_microseconds.size();
  out.measured_microjoules = measured_microjoules;
  out.target_microjoules.assign(n, 0);
  const int64_t measured = std::max<int64_t>(measured_microjoules, 0);
  const int64_t idle = std::clamp<int64_t>(idle_microjoules, 0, measured);
  const int64_t dynamic = measured - idle;

  int64_t targets_cpu = 0;
  for (int64_t cpu : target_cpu_microseconds) targets_cpu += std::max<int64_t>(cpu, 0);
  const int64_t busy = std::max(busy_microseconds, targets_cpu);
  // Weights by CPU time: the targets, then the busy time nobody selected used (last: it takes
  // everything when there was no busy time at all).
  std::vector<int64_t> by_cpu(target_cpu_microseconds);
  by_cpu.push_back(busy - targets_cpu);
  auto share_by_cpu = [&](int64_t amount) {
    std::vector<int64_t> parts = Apportion(amount, by_cpu);
    for (size_t i = 0; i < n; ++i) out.target_microjoules[i] += parts[i];
    out.unattributed_microjoules += parts[n];
  };
  share_by_cpu(dynamic);
  switch (policy) {
    case IdlePolicy::kNone:
      out.idle_microjoules = idle;
      break;
    case IdlePolicy::kProportional:
      if (busy > 0) {
        share_by_cpu(idle);
      } else {
        out.idle_microjoules = idle;
      }
      break;
    case IdlePolicy::kEqual:
      if (n > 0) {
        std::vector<int64_t> parts = Apportion(idle, std::vector<int64_t>(n, 1));
        for (size_t i = 0; i < n; ++i) out.target_microjoules[i] += parts[i];
      } else {
        out.idle_microjoules = idle;
      }
      break;
  }
  // A measured energy below zero cannot come from a counter; it is kept as unattributed so that
  // the identity still holds.
  out.unattributed_microjoules += measured_microjoules - measured;
  return out;
}

void IdlePowerEstimator::Add(double watts, double busy_fraction, double seconds) {
  if (!(watts >= 0) || !(busy_fraction >= 0)) return;  // NaN or nonsense: not learned from
  busy_fraction = std::min(busy_fraction, 1.0);
  ++intervals_;
  if (!(block_seconds_ > 0) || !(seconds > 0)) return Learn(busy_fraction, watts);
  block_joules_ += watts * seconds;
  block_busy_seconds_ += busy_fraction * seconds;
  block_length_ += seconds;
  if (block_length_ < block_seconds_) return;
  Learn(block_busy_seconds_ / block_length_, block_joules_ / block_length_);
  block_joules_ = block_busy_seconds_ = block_length_ = 0;
}

void IdlePowerEstimator::Learn(double busy_fraction, double watts) {
  points_.emplace_back(busy_fraction, watts);
  while (points_.size() > window_) points_.pop_front();
}

std::optional<IdleEstimate> IdlePowerEstimator::Estimate() const {
  const size_t n = points_.size();
  if (intervals_ < std::max<size_t>(min_samples_, 2) || n < 2) return std::nullopt;
  double lowest = points_.front().second, min_u = 1, max_u = 0;
  double mean_u = 0, mean_p = 0;
  for (const auto& [u, p] : points_) {
    lowest = std::min(lowest, p);
    min_u = std::min(min_u, u);
    max_u = std::max(max_u, u);
    mean_u += u;
    mean_p += p;
  }
  IdleEstimate bound{lowest, lowest, n, false};
  mean_u /= double(n);
  mean_p /= double(n);
  double covariance = 0, variance = 0;
  for (const auto& [u, p] : points_) {
    covariance += (u - mean_u) * (p - mean_p);
    variance += (u - mean_u) * (u - mean_u);
  }
  if (!(variance > 1e-12)) return bound;  // one utilisation: no line
  const double slope = covariance / variance;
  const double intercept = mean_p - slope * mean_u;
  double residuals = 0;
  for (const auto& [u, p] : points_) {
    const double r = p - (intercept + slope * u);
    residuals += r * r;
  }
  // The intercept's standard error: s * sqrt(1/n + mean_u^2 / Sxx), s^2 the residuals' variance.
  // Two points leave no residual to know it by: the lowest power, as for a bound.
  const double error =
      n > 2 ? std::sqrt(residuals / double(n - 2) * (1.0 / double(n) + mean_u * mean_u / variance))
            : lowest;
  if (max_u - min_u < 0.05 && !(error <= 0.02 * lowest)) return bound;
  return IdleEstimate{std::clamp(intercept, 0.0, lowest), error, n, true};
}

}  // namespace kwatt::meter
