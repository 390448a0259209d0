// Benchmark helper of bench/meter_rapl_bench.py: reads a simulated RAPL tree (kept up to date by
// `kwatt simulate rapl ROOT` in another process) through OpenRapl's powercap source at RATE Hz for
// SECONDS, on absolute deadlines, as the meter's sampler does.
//
// Usage: kwatt_meter_rapl_bench ROOT RATE_HZ SECONDS
//   1. opens the source between two reads of ROOT/kwatt_truth that show the same update, so that
//      the truth at the source's first values is known exactly;
//   2. reads every 1/RATE s (the meter's SystemClock()->SleepUntil to absolute deadlines, with
//      the sampler's timer slack of 1 ns); a tick is on time when it starts within a tenth of
//      the period of its deadline (as kwatt collect counts polls);
//   3. prints "loop-done", waits for a line on stdin (the harness stops the simulator meanwhile:
//      the tree then holds its last update), reads once more, and prints one JSON line: ticks,
//      on-time ticks, the CPU time of the loop, each domain's total and its truth, the flags seen.
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stop_token>
#include <string>
#include <vector>

#include "kwatt/meter/environment/environment.h"
#include "kwatt/meter/sources/rapl.h"

namespace {

struct Truth {
  int64_t update = -1;
  std::map<std::string, int64_t> microjoules;
};

Truth ReadTruth(const std::string& root) {
  Truth truth;
  std::ifstream in(root + "/kwatt_truth");
  std::string line;
  std::getline(in, line);
  if (line != "kwatt-simulated-rapl-truth 1") return truth;
  std::string word;
  int64_t nanos;
  if (!(in >> word >> truth.update >> nanos) || word != "update") return Truth{};
  std::string name;
  int64_t value;
  while (in >> name >> value) truth.microjoules[name] = value;
  return truth;
}

int64_t Now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
}

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s ROOT RATE_HZ SECONDS\n", argv[0]);
    return 2;
  }
  const std::string root = argv[1];
  const double rate = std::stod(argv[2]);
  const double seconds = std::stod(argv[3]);
  kwatt::meter::MeterEnvironment environment;
  environment.sysfs_root = root;
  kwatt::meter::RaplOptions options;
  options.path = kwatt::meter::RaplPath::kPowercap;

  std::unique_ptr<kwatt::meter::EnergySource> source;
  Truth start;
  for (int attempt = 0; attempt < 1000 && !source; ++attempt) {
    Truth before = ReadTruth(root);
    auto opened = kwatt::meter::OpenRapl(environment, options);
    if (!opened.ok()) {
      std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
      return 1;
    }
    Truth after = ReadTruth(root);
    if (before.update >= 0 && before.update == after.update &&
        before.microjoules == after.microjoules) {
      source = std::move(*opened);
      start = before;
    }
  }
  if (!source) {
    std::fprintf(stderr, "the tree kept changing while the source opened\n");
    return 1;
  }
  const int64_t period = int64_t(1e9 / rate);
  const int64_t ticks = int64_t(seconds * rate);
  std::vector<kwatt::meter::DomainReading> readings;
  std::map<std::string, int> flag_counts;
  int64_t on_time = 0, worst_late = 0;
  double read_cpu = 0;  // the CPU time of Read() alone
  // As the meter's sampler: its clock, and no timer slack (the default 50 us would make ticks of
  // 1 kHz late by a tenth of the period).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const std::shared_ptr<kwatt::meter::Clock> clock = kwatt::meter::SystemClock();
  std::stop_source running;  // never stopped, but stoppable: the meter's sampler sleeps on such
  const std::stop_token never = running.get_token();
  const double cpu0 = CpuSeconds();
  const int64_t wall0 = Now();
  for (int64_t k = 1; k <= ticks; ++k) {
    const int64_t deadline = wall0 + k * period;
    if (!clock->SleepUntil(deadline, never)) return 1;
    const int64_t late = Now() - deadline;
    on_time += late <= period / 10 ? 1 : 0;
    worst_late = std::max(worst_late, late);
    const double read0 = ThreadCpuSeconds();
    if (!source->Read(&readings).ok()) return 1;
    read_cpu += ThreadCpuSeconds() - read0;
    for (const auto& r : readings) {
      if (r.flags) flag_counts[kwatt::meter::DescribeDomainFlags(r.flags)]++;
    }
  }
  const double wall = double(Now() - wall0) / 1e9;
  const double cpu = CpuSeconds() - cpu0;
  std::printf("loop-done\n");
  std::fflush(stdout);
  std::string line;
  std::getline(std::cin, line);
  if (!source->Read(&readings).ok()) return 1;
  for (const auto& r : readings) {
    if (r.flags) flag_counts[kwatt::meter::DescribeDomainFlags(r.flags)]++;
  }
  Truth end = ReadTruth(root);
  std::ostringstream json;
  json << "{\"rate_hz\": " << rate << ", \"ticks\": " << ticks << ", \"on_time\": " << on_time
       << ", \"worst_late_ns\": " << worst_late << ", \"wall_s\": " << wall
       << ", \"cpu_s\": " << cpu << ", \"read_cpu_s\": " << read_cpu
       << ", \"max_read_period_ns\": " << source->MaxReadPeriod().count() << ", \"flags\": {";
  bool first = true;
  for (const auto& [flags, count] : flag_counts) {
    json << (first ? "" : ", ") << "\"" << flags << "\": " << count;
    first = false;
  }
  json << "}, \"domains\": {";
  for (size_t i = 0; i < readings.size(); ++i) {
    const std::string& name = source->domains()[i].name;
    json << (i ? ", " : "") << "\"" << name << "\": {\"microjoules\": " << readings[i].microjoules
         << ", \"truth_microjoules\": " << end.microjoules[name] - start.microjoules[name] << "}";
  }
  json << "}}";
  std::printf("%s\n", json.str().c_str());
  return 0;
}
