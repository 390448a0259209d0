#include "src/testing/energy_truth.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "kwatt/energy/energy.h"
#include "kwatt/energy/source_check.h"
#include "kwatt/jobs/jobs_file.h"
#include "kwatt/simulate/node_model.h"
#include "kwatt/simulate/series.h"
#include "kwatt/simulate/testbed.h"

namespace kwatt::testing {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;
// 2025-04-18T12:00:00Z: the cases' job runs for four hours from it.
constexpr UnixNanos kJobStart = 1744977600 * kS;
constexpr int64_t kJobSeconds = 4 * 3600;

using Draws = SeededDraws;

double SecondsOf(int64_t ns) { return double(ns) / 1e9; }

struct Candidate {
  const simulate::Site* site = nullptr;
  const simulate::Node* node = nullptr;
  std::string metric;
  std::vector<int> decimations;  // of its period inside the job
};

// The first node of each cluster that has `metric`, up to `most` of them.
std::vector<Candidate> NodesWith(const simulate::Testbed& testbed, const std::string& metric,
                                 std::vector<int> decimations, size_t most) {
  std::vector<Candidate> out;
  for (const auto& site : testbed.sites()) {
    for (const simulate::Cluster* cluster : site->clusters) {
      if (cluster->nodes.empty() || out.size() >= most) continue;
      const simulate::Node* node = cluster->nodes.front();
      simulate::DeviceRef device{simulate::DeviceRef::Kind::kNode, node, nullptr};
      if (simulate::SeriesOfDevice(testbed, *site, device, {metric}).empty()) continue;
      out.push_back({site.get(), node, metric, decimations});
    }
  }
  return out;
}

// A job on `nodes` of each site for the four hours, its load changing every 2 s to 10 min.
std::string JobsFile(const std::vector<Candidate>& candidates, uint64_t seed) {
  Draws draws(seed ^ 0x5eed);
  std::string jobs;
  int uid = 1;
  std::vector<std::string> done;
  for (const Candidate& c : candidates) {
    const std::string key = c.site->uid + "/" + c.node->uid;
    if (std::find(done.begin(), done.end(), key) != done.end()) continue;
    done.push_back(key);
    std::string phases;
    for (double total = 0; total < kJobSeconds;) {
      // Whole milliseconds: a load changes at any instant, not on the meters' ticks (a change
      // on a tick, ramping for one period, is one the line between samples follows exactly).
      const double seconds =
          std::round(std::exp(draws.Between(std::log(2), std::log(600))) * 1000) / 1000;
      const double cpu = draws.Unit() < 0.3 ? 0 : std::round(draws.Unit() * 100) / 100;
      phases += std::string(phases.empty() ? "" : ",") +
                "{\"duration\":" + std::to_string(seconds) + ",\"cpu\":" + std::to_string(cpu) +
                "}";
      total += seconds;
    }
    jobs += std::string(jobs.empty() ? "" : ",") + "{\"site\":\"" + c.site->uid +
            "\",\"uid\":" + std::to_string(uid++) + ",\"nodes\":[\"" + c.node->uid +
            "\"],\"started_at\":" + std::to_string(kJobStart / kS) +
            ",\"stopped_at\":" + std::to_string(kJobStart / kS + kJobSeconds) +
            ",\"types\":[\"monitor=wattmetre_power_watt\"],\"phases\":[" + phases + "]}";
  }
  return "{\"jobs\":[" + jobs + "]}";
}

Result<std::vector<IntervalCheck>> OneCase(const simulate::Testbed& testbed, const Candidate& c,
                                           Draws& draws, const IntervalTruthOptions& options) {
  const std::string fqdn = c.node->uid + "." + c.site->uid + ".grid5000.fr";
  const int decimation = c.decimations[draws.Index(c.decimations.size())];
  simulate::DeviceRef device{simulate::DeviceRef::Kind::kNode, c.node, nullptr};
  const std::vector<simulate::OutputSeries> all =
      simulate::SeriesOfDevice(testbed, *c.site, device, {c.metric});
  int64_t period = 0;  // the source's, read every `decimation`-th sample, within the job
  {
    energy::PowerCollector probe({fqdn});
    AddSimulatedRows(all, kJobStart + kS, kJobStart + 2 * kS, decimation, 0, 0, fqdn, &probe,
                     &period);
  }
  const double period_s = double(period) / 1e9;
  // A window of at least four periods (a shorter one may hold no sample).
  const double seconds =
      std::max(4 * period_s, std::exp(draws.Between(std::log(10), std::log(3600))));
  const double from = draws.Between(30, double(kJobSeconds) - seconds - 30);
  const UnixNanos a = kJobStart + UnixNanos(from * 1e9), b = a + UnixNanos(seconds * 1e9);
  const UnixNanos pa = a + UnixNanos(draws.Between(0, 0.5) * seconds * 1e9);
  const UnixNanos pb = pa + std::max<UnixNanos>(2 * kS, UnixNanos(draws.Unit() * double(b - pa)));
  const bool gap_wanted = draws.Unit() < 0.3;
  const double shift = draws.Between(-options.clock_offset_s, options.clock_offset_s);

  // A gap: rows missing over more than 5 periods, well inside the window.
  UnixNanos drop_from = 0, drop_to = 0;
  const bool gap = gap_wanted && seconds >= 60 && seconds >= 20 * period_s;
  if (gap) {
    drop_from = a + UnixNanos(0.3 * seconds * 1e9);
    drop_to = drop_from + UnixNanos(std::max(0.1 * seconds, 5 * period_s) * 1e9);
  }
  energy::PowerCollector rows({fqdn});
  const int64_t margin = energy::EnergyFetchMargin(false);
  const double share = AddSimulatedRows(all, a - margin, b + margin, decimation, drop_from, drop_to,
                                        fqdn, &rows, &period);
  energy::EnergyOptions energy_options;
  energy_options.metric = c.metric;
  energy_options.phases = {{"phase", pa, std::min(pb, b)}};
  energy_options.clock_offset_seconds = options.clock_offset_s;
  KWATT_ASSIGN_OR_RETURN(energy::EnergyReport report,
                         energy::ComputeEnergy(rows, a, b, energy_options));
  if (report.nodes.empty() || report.nodes[0].metric.empty()) {
    return Status::Internal("no energy for " + fqdn + " from " + c.metric);
  }
  const UnixNanos moved = UnixNanos(shift * 1e9);
  auto check = [&](const char* name, const energy::Figures& f, UnixNanos lo, UnixNanos hi) {
    IntervalCheck out;
    out.node = fqdn;
    out.metric = c.metric;
    out.period_s = double(period) / 1e9;
    out.interval = name;
    out.seconds = f.seconds;
    out.gap = f.gaps > 0;
    out.clock_shift_s = shift;
    out.joules = f.total_joules();
    out.truth_joules = share * c.node->model->EnergyJoules(lo + moved, hi + moved);
    if (c.metric.rfind("bmc_", 0) == 0) {
      // What a BMC of its class reads: the wall's energy times its gain (its class error, which
      // only the accuracy term covers).
      out.wall_truth_joules = out.truth_joules;
      out.truth_joules *= simulate::kBmcGain;
    }
    const energy::Uncertainty u = f.uncertainty(options.clock_offset_s);
    out.half_width = u.half_width_without_accuracy;
    out.with_accuracy = u.half_width;
    return out;
  };
  const energy::Interval& phase = report.phase_intervals.at(0);
  return std::vector<IntervalCheck>{
      check("window", report.nodes[0].window, report.start, report.end),
      check("phase", report.nodes[0].phases.at(0), phase.start, phase.end)};
}

// The window's and the phase's figures of `report` (one node's) against the truth: `share` of the
// node's exact energy over each, its marks `shift` seconds off the meters' clock.
Result<std::vector<IntervalCheck>> Checked(const energy::EnergyReport& report,
                                           const std::string& regime, const std::string& fqdn,
                                           double share, const simulate::Node& truth, double shift,
                                           const IntervalTruthOptions& options) {
  if (report.nodes.empty()) return Status::Internal("no energy for " + fqdn);
  const energy::NodeEnergy& node = report.nodes[0];
  const UnixNanos moved = UnixNanos(shift * 1e9);
  auto check = [&](const char* name, const energy::Figures& f, UnixNanos lo, UnixNanos hi) {
    IntervalCheck out;
    out.regime = regime;
    out.node = fqdn;
    out.metric = node.metric.empty() ? "none" : node.metric;
    out.period_s = node.period_s;
    out.interval = name;
    out.seconds = SecondsOf(hi - lo);
    out.gap = f.gaps > 0;
    out.clock_shift_s = shift;
    out.joules = f.total_joules();
    out.truth_joules = share * truth.model->EnergyJoules(lo + moved, hi + moved);
    const energy::Uncertainty u = f.uncertainty(options.clock_offset_s);
    out.half_width = f.has_power ? u.half_width_without_accuracy : 0;
    out.with_accuracy = f.has_power ? u.half_width : 0;
    return out;
  };
  std::vector<IntervalCheck> out{check("window", node.window, report.start, report.end)};
  if (!node.phases.empty() && !report.phase_intervals.empty()) {
    const energy::Interval& phase = report.phase_intervals.at(0);
    out.push_back(check("phase", node.phases.at(0), phase.start, phase.end));
  }
  return out;
}

// A case of `regime` on candidate `c`: its window and phase, rows as an energy fetches them (the
// margin around the window), the source's energy against the truth.
Result<std::vector<IntervalCheck>> RegimeCase(const simulate::Testbed& testbed, const Candidate& c,
                                              const std::string& regime, Draws& draws,
                                              const IntervalTruthOptions& options) {
  const std::string fqdn = c.node->uid + "." + c.site->uid + ".grid5000.fr";
  simulate::DeviceRef device{simulate::DeviceRef::Kind::kNode, c.node, nullptr};
  const std::vector<simulate::OutputSeries> all =
      simulate::SeriesOfDevice(testbed, *c.site, device, {c.metric});
  UnixNanos a = 0, b = 0, pa = 0, pb = 0;
  auto seconds = [](double s) { return UnixNanos(s * 1e9); };
  if (regime == "monitor start") {
    a = kJobStart - seconds(std::exp(draws.Between(std::log(5), std::log(600))));
    b = kJobStart + seconds(std::exp(draws.Between(std::log(5), std::log(600))));
    pa = a + seconds(draws.Unit() * SecondsOf(b - a) * 0.8);
    pb = pa + std::max(seconds(1), seconds(draws.Unit() * SecondsOf(b - pa)));
  } else if (regime == "before monitor") {
    a = kJobStart - seconds(60) - seconds(draws.Between(0, 5));
    b = a + seconds(60);
    pa = a + seconds(draws.Between(0, 40));
    pb = pa + seconds(draws.Between(2, 20));
  } else if (regime == "outage edge") {
    // The wattmeter out from before the rows read up to some seconds into the window.
    a = kJobStart + seconds(draws.Between(120, double(kJobSeconds) - 1200));
    b = a + seconds(std::exp(draws.Between(std::log(60), std::log(900))));
    pa = a;
    pb = a + seconds(draws.Between(30, 120));
  } else if (regime == "summary cut") {
    a = kJobStart + seconds(draws.Between(600, double(kJobSeconds) - 9000));
    b = a + seconds(std::exp(draws.Between(std::log(600), std::log(7200))));
    pa = a + seconds(draws.Between(0, 0.5) * SecondsOf(b - a));
    pb = pa + seconds(std::exp(draws.Between(std::log(60), std::log(1200))));
  } else if (regime == "2-PSU short") {
    int64_t period = 0;
    {
      energy::PowerCollector probe({fqdn});
      AddSimulatedRows(all, kJobStart + seconds(60), kJobStart + seconds(70), 1, 0, 0, fqdn, &probe,
                       &period);
    }
    a = kJobStart + seconds(draws.Between(60, double(kJobSeconds) - 60));
    b = a + UnixNanos(double(period) * draws.Between(0.5, 1.5));
    pa = a + (b - a) / 4;
    pb = pa + (b - a) / 2;
  } else if (regime == "1 s window") {
    // A window of one period on the wattmeter read at 1 s, most often across a change of load.
    for (int tries = 0; tries < 100; ++tries) {
      a = kJobStart + seconds(draws.Between(60, double(kJobSeconds) - 60));
      if (std::fabs(c.node->model->PowerWatts(a + seconds(1)) - c.node->model->PowerWatts(a)) > 5) {
        break;
      }
    }
    b = a + seconds(1);
    pa = a + seconds(0.25);
    pb = pa + seconds(0.5);
  } else if (regime == "three sources" || regime == "lying source") {
    a = kJobStart + seconds(draws.Between(60, double(kJobSeconds) - 3700));
    b = a + seconds(std::exp(draws.Between(std::log(2), std::log(3600))));
    pa = a + seconds(draws.Between(0, 0.5) * SecondsOf(b - a));
    pb = pa + std::max(seconds(1), seconds(draws.Unit() * SecondsOf(b - pa)));
  } else {
    return Status::InvalidArgument("no regime " + regime);
  }
  const double shift = draws.Between(-options.clock_offset_s, options.clock_offset_s);
  // Every power source of the node, as `kwatt energy` reads them: it chooses.
  energy::PowerCollector rows({fqdn});
  std::map<std::string, double> shares;
  const int64_t margin = energy::EnergyFetchMargin(false);
  energy::EnergyOptions energy_options;
  energy_options.phases = {{"phase", pa, std::min(pb, b)}};
  energy_options.clock_offset_seconds = options.clock_offset_s;
  if (regime == "summary cut") {
    // Kwollect's 5-minute summaries of the source: each bucket's exact mean, read with a bucket's
    // margin (the one holding the window's start).
    energy::PowerCollector buckets({fqdn}, "", energy::RowKind::kBucketMeans);
    int64_t period = 0;
    energy::PowerCollector probe({fqdn});
    const double share = AddSimulatedRows(all, a, a + seconds(1), 1, 0, 0, fqdn, &probe, &period);
    const int64_t bucket = energy::kSummaryBucketNanos;
    const UnixNanos first = (a - energy::EnergyFetchMargin(true)) / bucket * bucket;
    for (UnixNanos t = first; t <= b; t += bucket) {
      buckets.Add(fqdn, c.metric, "{}", t,
                  share * c.node->model->EnergyJoules(t, t + bucket) / SecondsOf(bucket));
    }
    KWATT_ASSIGN_OR_RETURN(energy::EnergyReport report,
                           energy::ComputeEnergy(buckets, a, b, energy_options));
    return Checked(report, regime, fqdn, share, *c.node, shift, options);
  }
  if (regime == "three sources" || regime == "lying source") {
    // The wattmeter (read at 1 s), a PDU outlet on the same feed reading what it reads, and the
    // node's BMC; in "lying source" the wattmeter reads 5, 10 or 20 % high or low.
    double lie = 0;
    if (regime == "lying source") {
      lie = std::array{0.05, 0.10, 0.20}[draws.Index(3)] * (draws.Unit() < 0.5 ? -1 : 1);
    }
    int64_t period = 0;
    const double share =
        AddSimulatedRows(all, a - margin, b + margin, 50, 0, 0, fqdn, &rows, &period, 1 + lie);
    std::vector<simulate::OutputSeries> outlet = all;
    for (simulate::OutputSeries& s : outlet) s.metric_id = "pdu_outlet_power_watt";
    AddSimulatedRows(outlet, a - margin, b + margin, 50, 0, 0, fqdn, &rows, &period);
    AddSimulatedRows(simulate::SeriesOfDevice(testbed, *c.site, device, {"bmc_node_power_watt"}),
                     a - margin, b + margin, 1, 0, 0, fqdn, &rows, &period);
    KWATT_ASSIGN_OR_RETURN(energy::EnergyReport report,
                           energy::ComputeEnergy(rows, a, b, energy_options));
    KWATT_ASSIGN_OR_RETURN(std::vector<IntervalCheck> out,
                           Checked(report, regime, fqdn, share, *c.node, shift, options));
    const std::vector<energy::SourceCheck> source_checks =
        energy::CheckSources(rows, report, energy_options);
    for (IntervalCheck& check : out) {
      check.lie = lie;
      for (const energy::SourceCheck& sc : source_checks) {
        if (sc.interval != check.interval) continue;
        for (const energy::SourceComparison& comparison : sc.comparisons) {
          check.flagged |= comparison.verdict == energy::SourceComparison::Verdict::kDisagrees;
        }
      }
    }
    return out;
  }
  UnixNanos out_from = 0, out_to = 0;  // the chosen source's outage, if any
  if (regime == "outage edge") {
    out_from = a - 2 * margin;
    out_to = a + seconds(std::min(draws.Between(5, 60), 0.4 * SecondsOf(b - a)));
  }
  for (const std::string& metric : energy::PowerMetrics()) {
    int64_t period = 0;
    const bool out = metric == c.metric;
    const std::vector<simulate::OutputSeries> series =
        simulate::SeriesOfDevice(testbed, *c.site, device, {metric});
    int decimation = 1;
    if (regime == "1 s window" && metric == c.metric) {  // the source meant, read at 1 s
      energy::PowerCollector probe({fqdn});
      AddSimulatedRows(series, a, a + seconds(1), 1, 0, 0, fqdn, &probe, &period);
      decimation = int(std::max<int64_t>(1, kS / std::max<int64_t>(period, 1)));
    }
    shares[metric] = AddSimulatedRows(series, a - margin, b + margin, decimation,
                                      out ? out_from : 0, out ? out_to : 0, fqdn, &rows, &period);
  }
  KWATT_ASSIGN_OR_RETURN(energy::EnergyReport report,
                         energy::ComputeEnergy(rows, a, b, energy_options));
  // Against the source the test meant (a BMC chosen instead is a miss).
  return Checked(report, regime, fqdn, shares[c.metric], *c.node, shift, options);
}

}  // namespace

SeededDraws::SeededDraws(uint64_t seed) : state_(simulate::HashMix(seed)) {}

double SeededDraws::Unit() {
  state_ = simulate::HashMix(state_ + 0x9e3779b97f4a7c15ULL);
  return simulate::UnitFromHash(state_);
}

size_t SeededDraws::Index(size_t n) { return std::min(n - 1, size_t(Unit() * double(n))); }

double SeededDraws::Normal() {  // Box-Muller
  const double u = 1 - Unit(), v = Unit();
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * std::numbers::pi * v);
}

double AddSimulatedRows(const std::vector<simulate::OutputSeries>& all, UnixNanos a, UnixNanos b,
                        int decimation, UnixNanos drop_from, UnixNanos drop_to,
                        const std::string& node, energy::PowerCollector* rows, int64_t* period,
                        double scale) {
  double share = 0;
  for (const simulate::OutputSeries& s : all) {
    for (const simulate::Source& source : s.sources) share += source.share;
    for (const simulate::Segment& segment : s.segments) {
      const UnixNanos lo = std::max(a, segment.begin), hi = std::min(b + 1, segment.end);
      if (hi <= lo) continue;
      *period = segment.period * decimation;
      int64_t k = s.grid.FirstIndexAtOrAfter(lo, segment.period);
      k += (decimation - k % decimation) % decimation;
      for (;; k += decimation) {
        const UnixNanos t = s.grid.TimeOf(k, segment.period);
        if (t >= hi) break;
        if (t >= drop_from && t < drop_to) continue;
        rows->Add(node, s.metric_id, s.labels_json, t, scale * s.ValueAt(t));
      }
    }
  }
  return share;
}

Result<std::vector<IntervalCheck>> CheckIntervalsAgainstTruth(const IntervalTruthOptions& options) {
  // The nodes: a first testbed, idle, says which have which source.
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> idle,
                         simulate::Testbed::Build({}, jobs::JobSet{}));
  // Wattmeters at 20 ms (a monitoring job's) read as they are, and at 100 ms, 1, 5 and 15 s;
  // PDU outlets at their period (1 s to a few s), and 5 and 15 times it.
  std::vector<Candidate> candidates =
      NodesWith(*idle, "wattmetre_power_watt", {1, 5, 50, 250, 750}, 4);
  const size_t wattmeters = candidates.size();
  for (Candidate& c : NodesWith(*idle, "pdu_outlet_power_watt", {1, 5, 15}, 4)) {
    candidates.push_back(c);
  }
  std::vector<Candidate> bmcs = NodesWith(*idle, "bmc_node_power_watt", {1}, 3);
  if (wattmeters == 0 || candidates.size() == wattmeters || bmcs.empty()) {
    return Status::Internal("the simulated testbed has no wattmeter, PDU or BMC node");
  }
  // Nodes with two PDU outlets (a 2-PSU node).
  std::vector<Candidate> two_outlets;
  for (const auto& site : idle->sites()) {
    for (const simulate::Cluster* cluster : site->clusters) {
      for (const simulate::Node* node : cluster->nodes) {
        simulate::DeviceRef device{simulate::DeviceRef::Kind::kNode, node, nullptr};
        if (simulate::SeriesOfDevice(*idle, *site, device, {"pdu_outlet_power_watt"}).size() < 2) {
          continue;
        }
        two_outlets.push_back({site.get(), node, "pdu_outlet_power_watt", {1}});
        break;
      }
      if (two_outlets.size() >= 3) break;
    }
  }
  std::vector<Candidate> everyone = candidates;
  everyone.insert(everyone.end(), bmcs.begin(), bmcs.end());
  everyone.insert(everyone.end(), two_outlets.begin(), two_outlets.end());
  KWATT_ASSIGN_OR_RETURN(jobs::JobSet jobs,
                         jobs::JobSet::Parse(JobsFile(everyone, options.seed), "interval cases"));
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<simulate::Testbed> testbed,
                         simulate::Testbed::Build({}, std::move(jobs)));
  // The candidates again, on this testbed.
  auto rebind = [&](Candidate& c) {
    c.site = testbed->FindSite(c.site->uid);
    c.node = testbed->FindNode(*c.site, c.node->uid);
  };
  for (Candidate& c : candidates) rebind(c);
  for (Candidate& c : bmcs) rebind(c);
  for (Candidate& c : two_outlets) rebind(c);

  Draws draws(options.seed);
  std::vector<IntervalCheck> checks;
  for (int i = 0; i < options.cases + options.bmc_cases; ++i) {
    const bool bmc = i >= options.cases;
    const Candidate& c = bmc ? bmcs[draws.Index(bmcs.size())]
                         : draws.Unit() < 0.5
                             ? candidates[draws.Index(wattmeters)]
                             : candidates[wattmeters + draws.Index(candidates.size() - wattmeters)];
    KWATT_ASSIGN_OR_RETURN(std::vector<IntervalCheck> two, OneCase(*testbed, c, draws, options));
    checks.insert(checks.end(), two.begin(), two.end());
  }
  if (options.regime_cases > 0 && two_outlets.empty()) {
    return Status::Internal("the simulated testbed has no node with two PDU outlets");
  }
  // Wattmeter nodes with a BMC, for an outage of the wattmeter across the window's start.
  std::vector<Candidate> with_bmc;
  for (size_t i = 0; i < wattmeters; ++i) {
    simulate::DeviceRef device{simulate::DeviceRef::Kind::kNode, candidates[i].node, nullptr};
    if (!simulate::SeriesOfDevice(*testbed, *candidates[i].site, device, {"bmc_node_power_watt"})
             .empty()) {
      with_bmc.push_back(candidates[i]);
    }
  }
  if (options.regime_cases > 0 && with_bmc.empty()) {
    return Status::Internal("the simulated testbed has no node with a wattmeter and a BMC");
  }
  for (const char* regime : {"monitor start", "before monitor", "1 s window", "2-PSU short",
                             "outage edge", "summary cut", "three sources", "lying source"}) {
    const bool psu = std::string(regime) == "2-PSU short";
    const bool outage = std::string(regime) == "outage edge" ||
                        std::string(regime) == "three sources" ||
                        std::string(regime) == "lying source";
    const std::vector<Candidate>& pool = psu ? two_outlets : outage ? with_bmc : candidates;
    const size_t from_pool = psu || outage ? pool.size() : wattmeters;
    for (int i = 0; i < options.regime_cases; ++i) {
      Candidate c = pool[draws.Index(from_pool)];
      KWATT_ASSIGN_OR_RETURN(std::vector<IntervalCheck> two,
                             RegimeCase(*testbed, c, regime, draws, options));
      checks.insert(checks.end(), two.begin(), two.end());
    }
  }
  return checks;
}

}  // namespace kwatt::testing
