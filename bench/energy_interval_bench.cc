// The energy intervals against the simulator's truth (doc/energy.md, "How far to trust it";
// BENCHMARKS.md): how often the truth lies within the 95 % interval, and how wide the intervals
// are against the actual errors, by source, sampling period, interval kind and gaps.
//
//   kwatt_energy_interval_bench [--cases N] [--seed S] [--bmc-cases N] [--regime-cases N]
//                               [--clock-offset S] [--misses]
//
// Prints a Markdown table; --misses lists the figures whose truth fell outside.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "kwatt/simulate/series.h"
#include "src/testing/energy_truth.h"

namespace {

using kwatt::testing::IntervalCheck;

struct Group {
  int figures = 0, covered = 0, covered_with_accuracy = 0;
  std::vector<double> ratios;                                // half-width / |error|
  std::vector<double> relative_errors, errors, half_widths;  // |error| / truth, |error|, half-width
  double squared_errors = 0, squared_half_widths = 0;

  void Add(const IntervalCheck& c) {
    relative_errors.push_back(std::fabs(c.error()) / std::max(std::fabs(c.truth_joules), 1e-12));
    errors.push_back(std::fabs(c.error()));
    half_widths.push_back(c.half_width);
    ++figures;
    covered += c.covered();
    covered_with_accuracy += c.covered_with_accuracy();
    ratios.push_back(c.half_width / std::max(std::fabs(c.error()), 1e-12));
    squared_errors += c.error() * c.error();
    squared_half_widths += c.half_width * c.half_width;
  }
  // The q-quantile of `values` (reordered).
  static double Quantile(std::vector<double>& values, double q) {
    if (values.empty()) return NAN;
    auto at = values.begin() + long(q * double(values.size() - 1));
    std::nth_element(values.begin(), at, values.end());
    return *at;
  }
  // The half-width in units of the 95th percentile of the error: 1 / the 95th percentile of
  // |error| / half-width over the figures (scale-free, so windows of 10 s and of an hour weigh
  // alike; 1 for a calibrated interval, the bar at most 3).
  double WidthOverError95() {
    std::vector<double> z;
    for (double r : ratios) z.push_back(1 / r);
    return 1 / Quantile(z, 0.95);
  }
  double Median() {
    if (ratios.empty()) return NAN;
    std::nth_element(ratios.begin(), ratios.begin() + long(ratios.size() / 2), ratios.end());
    return ratios[ratios.size() / 2];
  }
};

std::string PeriodText(double seconds) {
  char text[32];
  if (seconds < 1) {
    std::snprintf(text, sizeof text, "%.0f ms", seconds * 1000);
  } else {
    std::snprintf(text, sizeof text, "%.3g s", seconds);
  }
  return text;
}

std::string Short(const std::string& metric) {
  if (metric == "wattmetre_power_watt") return "wattmeter";
  if (metric == "pdu_outlet_power_watt") return "PDU outlet";
  if (metric == "bmc_node_power_watt") return "BMC";
  return metric;
}

}  // namespace

int main(int argc, char** argv) {
  kwatt::testing::IntervalTruthOptions options;
  options.cases = 1000;
  bool misses = false;
  for (int i = 1; i < argc; ++i) {
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", argv[i]);
        std::exit(2);
      }
      return argv[++i];
    };
    if (!std::strcmp(argv[i], "--cases")) {
      options.cases = std::atoi(value());
    } else if (!std::strcmp(argv[i], "--seed")) {
      options.seed = std::strtoull(value(), nullptr, 10);
    } else if (!std::strcmp(argv[i], "--regime-cases")) {
      options.regime_cases = std::atoi(value());
    } else if (!std::strcmp(argv[i], "--bmc-cases")) {
      options.bmc_cases = std::atoi(value());
    } else if (!std::strcmp(argv[i], "--clock-offset")) {
      options.clock_offset_s = std::atof(value());
    } else if (!std::strcmp(argv[i], "--misses")) {
      misses = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--cases N] [--seed S] [--bmc-cases N] [--regime-cases N] "
                   "[--clock-offset S] [--misses]\n",
                   argv[0]);
      return 2;
    }
  }
  auto checks = kwatt::testing::CheckIntervalsAgainstTruth(options);
  if (!checks.ok()) {
    std::fprintf(stderr, "%s\n", checks.status().ToString().c_str());
    return 1;
  }
  std::map<std::string, Group> groups, regimes;
  Group all, bmc;
  for (const IntervalCheck& c : *checks) {
    if (c.regime == "three sources" || c.regime == "lying source") continue;  // below
    if (c.regime != "steady") {
      regimes[c.regime + ", " + c.interval].Add(c);
      continue;
    }
    if (c.metric == "bmc_node_power_watt") {
      bmc.Add(c);
      continue;
    }
    all.Add(c);
    groups[Short(c.metric) + " at " + PeriodText(c.period_s)].Add(c);
    groups[std::string("interval: ") + c.interval].Add(c);
    groups[c.gap ? "with a gap" : "without a gap"].Add(c);
    const char* length = c.seconds < 60     ? "under a minute"
                         : c.seconds < 1800 ? "1 to 30 minutes"
                                            : "30 minutes or more";
    if (c.period_s == 1)
      groups[std::string("1 s series, ") + length + (c.gap ? ", gap" : "")].Add(c);
  }
  std::printf("%d cases (seed %llu, marks off by up to %g s): %d figures\n\n", options.cases,
              (unsigned long long)options.seed, options.clock_offset_s, all.figures);
  std::printf(
      "| figures | n | truth within the 95 %% interval | median half-width / \\|error\\| |"
      " RMS half-width / RMS error | 95th percentile \\|error\\| / truth | half-width / 95th "
      "percentile of \\|error\\| |\n|---|---|---|---|---|---|---|\n");
  auto row = [](const std::string& name, Group& g) {
    std::printf("| %s | %d | %.1f %% | %.1f | %.2f | %.3f %% | %.2f |\n", name.c_str(), g.figures,
                100.0 * g.covered / std::max(g.figures, 1), g.Median(),
                std::sqrt(g.squared_half_widths / std::max(g.squared_errors, 1e-300)),
                100 * Group::Quantile(g.relative_errors, 0.95), g.WidthOverError95());
  };
  row("all", all);
  for (auto& [name, g] : groups) row(name, g);
  if (!regimes.empty()) {
    std::printf("\nregimes (%d cases each: a window and a phase):\n\n", options.regime_cases);
    std::printf(
        "| regime, figure | n | truth within the 95 %% interval | median half-width / "
        "\\|error\\| | RMS half-width / RMS error | 95th percentile \\|error\\| / truth | "
        "half-width / 95th percentile of \\|error\\| |\n|---|---|---|---|---|---|---|\n");
    for (auto& [name, g] : regimes) {
      std::printf("| %s | %d | %.1f %% | %.1f | %.2f | %.3f %% | %.2f |\n", name.c_str(), g.figures,
                  100.0 * g.covered / std::max(g.figures, 1), g.Median(),
                  std::sqrt(g.squared_half_widths / std::max(g.squared_errors, 1e-300)),
                  100 * Group::Quantile(g.relative_errors, 0.95), g.WidthOverError95());
    }
  }
  // Three honest sources: how often a check calls one disagreeing, by the interval's length; a
  // lying wattmeter: how often it is flagged, set aside, and the truth within the interval.
  // figures, flagged, set aside, covered without the accuracy term, with it
  std::map<std::string, std::array<int, 5>> sources;
  for (const IntervalCheck& c : *checks) {
    if (c.regime != "three sources" && c.regime != "lying source") continue;
    char name[96];
    if (c.regime == "three sources") {
      std::snprintf(name, sizeof name, "honest, %s",
                    c.seconds < 10    ? "under 10 s"
                    : c.seconds < 60  ? "10 s to 1 minute"
                    : c.seconds < 600 ? "1 to 10 minutes"
                                      : "10 minutes or more");
    } else {
      std::snprintf(name, sizeof name, "wattmeter %+.0f %%, %s", 100 * c.lie,
                    c.seconds < 60 ? "under a minute" : "a minute or more");
    }
    std::array<int, 5>& n = sources[name];
    ++n[0];
    n[1] += c.flagged;
    n[2] += c.metric != "wattmetre_power_watt";
    n[3] += c.covered();
    n[4] += c.covered_with_accuracy();
  }
  if (!sources.empty()) {
    std::printf(
        "\nsources (a wattmeter read at 1 s, a PDU outlet reading the same feed, the BMC):\n\n"
        "| sources, interval | n | a source called disagreeing | wattmeter set aside | truth "
        "within the 95 %% interval without the accuracy term | with it |\n"
        "|---|---|---|---|---|---|\n");
    for (const auto& [name, n] : sources) {
      std::printf("| %s | %d | %.1f %% | %.1f %% | %.1f %% | %.1f %% |\n", name.c_str(), n[0],
                  100.0 * n[1] / n[0], 100.0 * n[2] / n[0], 100.0 * n[3] / n[0],
                  100.0 * n[4] / n[0]);
    }
  }
  if (bmc.figures > 0) {
    std::printf(
        "\nBMC alone (%d figures): within the interval without its stated accuracy, against the "
        "node's energy times the simulated BMC's gain of %.2f (its class error taken out), %.1f "
        "%% (half-width / 95th percentile of |error| %.2f); with it (10 %% + 5 W), against the "
        "node's energy, %.1f %%\n",
        bmc.figures, kwatt::simulate::kBmcGain, 100.0 * bmc.covered / bmc.figures,
        bmc.WidthOverError95(), 100.0 * bmc.covered_with_accuracy / bmc.figures);
  }
  if (misses) {
    std::printf("\nmisses:\n");
    for (const IntervalCheck& c : *checks) {
      if (c.covered() || (c.metric == "bmc_node_power_watt" && c.regime == "steady")) continue;
      std::printf(
          "  [%s] %s %s %s %s %.1f s gap=%d shift=%+.3f s: %.3f J vs truth %.3f J, error %+.3f J, "
          "half-width %.3f J\n",
          c.regime.c_str(), c.node.c_str(), Short(c.metric).c_str(), PeriodText(c.period_s).c_str(),
          c.interval.c_str(), c.seconds, int(c.gap), c.clock_shift_s, c.joules, c.truth_joules,
          c.error(), c.half_width);
    }
  }
  return 0;
}
