// Reports built by hand, for the tests of what consumes them (the outputs; later the pipeline's
// own): a header with RAPL-like domains, and intervals whose energy is shared by the real formula
// (Attribute, attribution.h), so that every report conserves energy exactly as the meter's do.
//
//   MeterHeader header = testing::TestHeader();               // package-0, dram-0 of "nova-1"
//   testing::ReportBuilder reports(header);                   // 1 s intervals from header.start
//   IntervalReport first = reports.Next({30.0, 5.0}, {{testing::ProcessTarget(42, "python3"),
//                                                      400'000}});
#ifndef KWATT_SRC_TESTING_METER_REPORTS_H_
#define KWATT_SRC_TESTING_METER_REPORTS_H_

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/meter/formulas/attribution.h"
#include "kwatt/meter/formulas/report.h"

namespace kwatt::meter::testing {

inline Domain RaplDomain(std::string name, std::string kind, int socket) {
  Domain domain;
  domain.source = "rapl";
  domain.name = std::move(name);
  domain.kind = std::move(kind);
  domain.socket = socket;
  domain.origin = "/sys/class/powercap/intel-rapl:" + std::to_string(std::max(socket, 0));
  return domain;
}

// A process as the activity reader names it: key "pid:PID:START" (START: its start time in clock
// ticks, 1000 + PID here).
inline Target ProcessTarget(int64_t pid, std::string name, TargetKind kind = TargetKind::kProcess) {
  Target target;
  target.kind = kind;
  target.key = "pid:" + std::to_string(pid) + ":" + std::to_string(1000 + pid);
  target.name = std::move(name);
  target.pid = pid;
  return target;
}

inline Target CgroupTarget(std::string path) {
  Target target;
  target.kind = TargetKind::kCgroup;
  target.key = "cgroup:" + path;
  target.name = std::move(path);
  return target;
}

// 2025-04-18T18:13:20Z.
inline constexpr UnixNanos kTestStart = 1'745'000'000'000'000'000;

// package-0 and dram-0 of socket 0 by default.
inline MeterHeader TestHeader(std::vector<Domain> domains = {RaplDomain("package-0", "package", 0),
                                                             RaplDomain("dram-0", "dram", 0)},
                              UnixNanos start = kTestStart) {
  MeterHeader header;
  header.sensor = "nova-1";
  header.domains = std::move(domains);
  header.formula = "cputime";
  header.idle_policy = "none";
  header.start = start;
  header.notes = {"a test header"};
  return header;
}

// A target's CPU time in one interval.
struct Activity {
  Target target;
  int64_t cpu_microseconds = 0;
};

class ReportBuilder {
 public:
  explicit ReportBuilder(const MeterHeader& header,
                         std::chrono::nanoseconds period = std::chrono::seconds(1),
                         IdlePolicy policy = IdlePolicy::kNone)
      : header_(header), period_(period.count()), policy_(policy), next_start_(header.start) {}

  // The next interval: each domain's mean power (its measured energy is `watts` x the period, in
  // whole microjoules), the targets' CPU time (in any order: the report sorts them by key), the
  // machine's busy CPU time (-1: the targets' sum and a tenth more, for the kernel), each domain's
  // idle power (none: 0), and each domain's flags (kReset or kUnreadable: a gap, measured 0).
  IntervalReport Next(const std::vector<double>& watts, std::vector<Activity> targets = {},
                      int64_t busy_microseconds = -1, const std::vector<double>& idle_watts = {},
                      const std::vector<uint32_t>& flags = {}) {
    std::sort(targets.begin(), targets.end(),
              [](const Activity& a, const Activity& b) { return a.target.key < b.target.key; });
    IntervalReport report;
    report.sequence = sequence_++;
    report.start = next_start_;
    report.end = next_start_ + period_;
    next_start_ = report.end;
    std::vector<int64_t> cpu;
    int64_t sum = 0;
    for (const Activity& activity : targets) {
      report.targets.push_back({activity.target, activity.cpu_microseconds});
      cpu.push_back(activity.cpu_microseconds);
      sum += activity.cpu_microseconds;
    }
    report.busy_microseconds = busy_microseconds >= 0 ? busy_microseconds : sum + sum / 10;
    report.capacity_microseconds = 8 * period_ / 1000;  // 8 CPUs
    for (size_t d = 0; d < header_.domains.size(); ++d) {
      uint32_t flag = d < flags.size() ? flags[d] : 0;
      bool gap = (flag & (kReset | kUnreadable)) != 0;
      int64_t measured =
          gap ? 0 : std::llround((d < watts.size() ? watts[d] : 0.0) * double(period_) / 1e3);
      int64_t idle =
          std::llround((d < idle_watts.size() ? idle_watts[d] : 0.0) * double(period_) / 1e3);
      DomainEnergy energy = Attribute(measured, idle, cpu, report.busy_microseconds, policy_);
      energy.flags = flag;
      if (flag & kWrapped) ++health_.wraps;
      if (flag & kReset) ++health_.resets;
      report.domains.push_back(std::move(energy));
    }
    ++health_.ticks;
    health_.reports = report.sequence + 1;
    report.health = health_;
    return report;
  }

  // The health the next reports carry (ticks, reports, wraps and resets are counted by Next).
  MeterHealth& health() { return health_; }
  UnixNanos next_start() const { return next_start_; }

 private:
  MeterHeader header_;
  int64_t period_;
  IdlePolicy policy_;
  UnixNanos next_start_;
  int64_t sequence_ = 0;
  MeterHealth health_;
};

}  // namespace kwatt::meter::testing

#endif  // KWATT_SRC_TESTING_METER_REPORTS_H_
