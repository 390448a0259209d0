// The power of kwatt energy's comparison of runs (doc/energy.md, "Runs compared"; BENCHMARKS.md):
// how often a true difference between two sets of simulated runs is found, and how often one is
// claimed where there is none, by the number of runs a set and the true difference, at a
// run-to-run spread; and how often the interval of the difference holds the true one.
//
//   kwatt_runs_power_bench [--comparisons N] [--spread S] [--seed S]
//
// Prints a Markdown table.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/testing/runs_truth.h"

int main(int argc, char** argv) {
  kwatt::testing::RunsTruthOptions options;
  options.comparisons = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--comparisons")) {
      options.comparisons = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--spread")) {
      options.spread = std::atof(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--seed")) {
      options.seed = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: %s [--comparisons N] [--spread S] [--seed S]\n", argv[0]);
      return 2;
    }
  }
  if (argc % 2 == 0) {
    std::fprintf(stderr, "usage: %s [--comparisons N] [--spread S] [--seed S]\n", argv[0]);
    return 2;
  }
  const std::vector<double> differences = {0, 0.005, 0.01, 0.02, 0.05};
  const std::vector<int> runs = {3, 5, 10};
  std::printf(
      "%d comparisons a cell; run-to-run spread %g %% of the work phase's energy; 95 %% "
      "confidence\n\n",
      options.comparisons, 100 * options.spread);
  std::printf("| true difference |");
  for (int n : runs) std::printf(" %d runs a set: difference claimed | interval holds it |", n);
  std::printf("\n|---|");
  for (size_t k = 0; k < runs.size(); ++k) std::printf("---|---|");
  std::printf("\n");
  for (double difference : differences) {
    std::printf("| %g %% |", 100 * difference);
    for (int n : runs) {
      options.difference = difference;
      options.runs = n;
      auto result = kwatt::testing::CompareRunsAgainstTruth(options);
      if (!result.ok()) {
        std::fprintf(stderr, "%s\n", result.status().ToString().c_str());
        return 1;
      }
      std::printf(" %.1f %% | %.1f %% |", 100.0 * result->significant / result->comparisons,
                  100.0 * result->covered / result->comparisons);
    }
    std::printf("\n");
  }
  return 0;
}
