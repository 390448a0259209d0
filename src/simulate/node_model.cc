#include "kwatt/simulate/node_model.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace kwatt::simulate {
namespace {

constexpr double kRipple1Watts = 0.8, kRipple1Period = 37.0;
constexpr double kRipple2Watts = 0.4, kRipple2Period = 5.3;

Levels Mix(const Levels& a, const Levels& b, double w) {  // a + (b - a) * w
  return {a.cpu + (b.cpu - a.cpu) * w, a.network + (b.network - a.network) * w,
          a.gpu + (b.gpu - a.gpu) * w};
}
Levels Add(const Levels& a, const Levels& b) {
  return {a.cpu + b.cpu, a.network + b.network, a.gpu + b.gpu};
}
Levels Sub(const Levels& a, const Levels& b) {
  return {a.cpu - b.cpu, a.network - b.network, a.gpu - b.gpu};
}
Levels Scale(const Levels& a, double s) { return {a.cpu * s, a.network * s, a.gpu * s}; }

double Seconds(int64_t ns) { return double(ns) / 1e9; }

// sin/cos of 2*pi*t/period + phase, t in nanoseconds since kModelEpoch. The time is reduced modulo
// the period in integers first: the same value mathematically, but exact, and much faster than
// libm's reduction of the ~1e8 rad arguments that seconds since 2020 would give.
double Angle(int64_t t_ns, double period_s, double phase) {
  int64_t period_ns = int64_t(period_s * 1e9);
  int64_t r = t_ns % period_ns;
  if (r < 0) r += period_ns;
  return 2 * std::numbers::pi * (double(r) / double(period_ns)) + phase;
}

}  // namespace

uint64_t HashMix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t HashText(std::string_view text, uint64_t seed) {
  uint64_t h = 0xcbf29ce484222325ULL ^ HashMix(seed);  // FNV-1a, then mixed
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return HashMix(h);
}

LoadProfile LoadProfile::ForNode(std::string_view site, std::string_view uid,
                                 const jobs::JobSet& jobs) {
  struct Step {
    UnixNanos t;
    Levels levels;
  };
  std::vector<Step> steps;
  std::vector<const jobs::Job*> mine;
  for (const jobs::Job& job : jobs.jobs) {
    if (job.site == site && job.HasNode(uid)) mine.push_back(&job);
  }
  std::sort(mine.begin(), mine.end(),
            [](const jobs::Job* a, const jobs::Job* b) { return a->started_at < b->started_at; });
  for (const jobs::Job* job : mine) {
    UnixNanos end = job->EffectiveEnd();
    UnixNanos t = job->started_at;
    size_t index = 0;
    while (t < end) {
      const jobs::LoadPhase& phase = job->phases[index];
      steps.push_back({t, {phase.cpu, phase.network, phase.gpu}});
      t += phase.duration_ns;
      if (++index == job->phases.size()) {
        if (!job->repeat_phases) break;
        index = 0;
      }
    }
    if (t < end) steps.push_back({t, {}});
    steps.push_back({end, {}});
  }
  std::stable_sort(steps.begin(), steps.end(),
                   [](const Step& a, const Step& b) { return a.t < b.t; });
  // Of several steps at one instant, the last one holds.
  std::vector<Step> unique;
  for (const Step& step : steps) {
    if (!unique.empty() && unique.back().t == step.t) unique.pop_back();
    unique.push_back(step);
  }
  LoadProfile profile;
  Levels current;
  for (size_t i = 0; i < unique.size(); ++i) {
    const Step& step = unique[i];
    UnixNanos ramp_end = step.t + kRampNs;
    if (i + 1 < unique.size()) ramp_end = std::min(ramp_end, unique[i + 1].t);
    profile.points_.push_back({step.t, current, {}});
    profile.points_.push_back({ramp_end, step.levels, {}});
    current = step.levels;
  }
  for (size_t i = 1; i < profile.points_.size(); ++i) {
    Point& p = profile.points_[i];
    const Point& q = profile.points_[i - 1];
    p.cumulative = Add(q.cumulative, Scale(Add(p.levels, q.levels), 0.5 * Seconds(p.t - q.t)));
  }
  return profile;
}

Levels LoadProfile::At(UnixNanos t) const {
  if (points_.empty() || t <= points_.front().t)
    return points_.empty() ? Levels{} : points_.front().levels;
  if (t >= points_.back().t) return points_.back().levels;
  auto it = std::upper_bound(points_.begin(), points_.end(), t,
                             [](UnixNanos v, const Point& p) { return v < p.t; });
  const Point& b = *it;
  const Point& a = *(it - 1);
  return Mix(a.levels, b.levels, double(t - a.t) / double(b.t - a.t));
}

Levels LoadProfile::CumulativeAt(UnixNanos t) const {
  if (points_.empty()) return {};
  if (t <= points_.front().t) return Scale(points_.front().levels, Seconds(t - points_.front().t));
  if (t >= points_.back().t) {
    return Add(points_.back().cumulative,
               Scale(points_.back().levels, Seconds(t - points_.back().t)));
  }
  auto it = std::upper_bound(points_.begin(), points_.end(), t,
                             [](UnixNanos v, const Point& p) { return v < p.t; });
  const Point& a = *(it - 1);
  Levels at = At(t);
  return Add(a.cumulative, Scale(Add(a.levels, at), 0.5 * Seconds(t - a.t)));
}

Levels LoadProfile::Integral(UnixNanos a, UnixNanos b) const {
  if (points_.empty()) return {};
  return Sub(CumulativeAt(b), CumulativeAt(a));
}

Levels LoadProfile::IntegralSinceEpoch(UnixNanos t) const { return Integral(kModelEpoch, t); }

NodeHardware HardwareOfCluster(std::string_view cluster) {
  // Figures from the clusters' hardware (Grid'5000 reference) and published measurements of
  // similar servers; they aim at plausibility, not at any node's exact draw.
  NodeHardware h;
  if (cluster == "nova") {  // Dell R430, 2x Xeon E5-2620 v4 (16 cores), 64 GB
    h = {68, 118, 0, 0, 32, 64e9, 10e9, 2.1e9, 1};
  } else if (cluster == "taurus") {  // Dell R720, 2x Xeon E5-2630 (12 cores), 32 GB
    h = {96, 126, 0, 0, 24, 32e9, 10e9, 2.3e9, 1};
  } else if (cluster == "gros") {  // Dell R640, 1x Xeon Gold 5220 (18 cores), 96 GB
    h = {58, 112, 0, 0, 36, 96e9, 25e9, 2.2e9, 1};
  } else if (cluster == "ecotype") {  // Dell R630, 2x Xeon E5-2630L v4 (20 cores), 128 GB
    h = {52, 96, 0, 0, 40, 128e9, 10e9, 1.8e9, 2};
  } else if (cluster == "paradoxe") {  // HPE DL360 Gen10+, 2x Xeon Gold 5318Y (48 cores), 384 GB
    h = {148, 290, 0, 0, 96, 384e9, 25e9, 2.1e9, 2};
  } else if (cluster == "yeti") {  // Dell R940, 4x Xeon Gold 6130 (64 cores), 768 GB
    h = {262, 540, 0, 0, 128, 768e9, 10e9, 2.1e9, 2};
  } else if (cluster == "chifflot") {  // Dell R740, 2x Xeon Gold 6126 (24 cores), 2 GPUs, 192 GB
    h = {176, 190, 2, 215, 48, 192e9, 25e9, 2.6e9, 2};
  }
  return h;
}

NodeModel::NodeModel(std::string uid, NodeHardware hardware, LoadProfile profile, uint64_t seed)
    : uid_(std::move(uid)), hardware_(hardware), profile_(std::move(profile)) {
  uint64_t h = HashText(uid_, seed);
  phase1_ = 2 * std::numbers::pi * UnitFromHash(HashMix(h + 1));
  phase2_ = 2 * std::numbers::pi * UnitFromHash(HashMix(h + 2));
  // Nodes boot at some hour of 2024-01-01 (kept fixed so that counters are pure functions).
  boot_time_s_ = 1704067200 + int64_t(UnitFromHash(HashMix(h + 3)) * 86400);
  // Each node differs from its siblings by a few percent, as real ones do.
  double spread = 0.97 + 0.06 * UnitFromHash(HashMix(h + 4));
  hardware_.idle_watts *= spread;
  hardware_.cpu_watts *= spread;
}

double NodeModel::PowerWatts(UnixNanos t) const {
  Levels l = profile_.At(t);
  int64_t since = t - kModelEpoch;
  return hardware_.idle_watts + hardware_.cpu_watts * l.cpu +
         hardware_.gpu_watts * hardware_.gpu_count * l.gpu +
         kRipple1Watts * std::sin(Angle(since, kRipple1Period, phase1_)) +
         kRipple2Watts * std::sin(Angle(since, kRipple2Period, phase2_));
}

double NodeModel::RippleIntegral(UnixNanos a, UnixNanos b) const {
  auto term = [&](double amplitude, double period, double phase) {
    double w = 2 * std::numbers::pi / period;
    return amplitude / w *
           (std::cos(Angle(a - kModelEpoch, period, phase)) -
            std::cos(Angle(b - kModelEpoch, period, phase)));
  };
  return term(kRipple1Watts, kRipple1Period, phase1_) +
         term(kRipple2Watts, kRipple2Period, phase2_);
}

double NodeModel::EnergyJoules(UnixNanos a, UnixNanos b) const {
  Levels integral = profile_.Integral(a, b);
  return hardware_.idle_watts * Seconds(b - a) + hardware_.cpu_watts * integral.cpu +
         hardware_.gpu_watts * hardware_.gpu_count * integral.gpu + RippleIntegral(a, b);
}

double NodeModel::EnergySinceEpochJoules(UnixNanos t) const { return EnergyJoules(kModelEpoch, t); }

}  // namespace kwatt::simulate
