// The formula "smartwatts" in the meter (formula.h, smartwatts_model.h): RAPL domains shared by
// models learned on the targets' cycles and instructions, every other domain by CPU time.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "kwatt/meter/formulas/formula.h"

namespace kwatt::meter::smartwatts_formula_test {
namespace {

constexpr int64_t kSecond = kNanosPerSecond;

// The machine's true package power: 20 W idle, 2 nJ a cycle, 1 nJ an instruction.
constexpr double kIdleWatts = 20, kJoulesPerCycle = 2e-9, kJoulesPerInstruction = 1e-9;

std::vector<Domain> Domains() {
  return {Domain{"rapl", "package-0", "package", 0, "test"},
          Domain{"rapl", "core-0", "core", 0, "test"}, Domain{"nvml", "gpu-0", "gpu", 0, "test"}};
}

// Two targets whose cycles and instructions per second vary apart over time (so that the model
// is identifiable), each using a CPU's worth of time a second; the machine's busy time is theirs
// plus `other_cpu` CPUs of other software.
struct Machine {
  double other_cpu = 0;
  int64_t t = 0;  // seconds
  std::vector<int64_t> cycles = {0, 0}, instructions = {0, 0}, cpu = {0, 0};
  int64_t busy = 0;

  ActivitySnapshot Snapshot() const {
    ActivitySnapshot s;
    s.monotonic_nanos = t * kSecond;
    s.wall = 1'700'000'000 * kSecond + t * kSecond;
    s.cpus = 8;
    s.busy_microseconds = busy;
    s.total_microseconds = t * 8'000'000;
    for (int i = 0; i < 2; ++i) {
      TargetSample sample;
      sample.target = Target{TargetKind::kProcess, "pid:" + std::to_string(100 + i) + ":1",
                             "worker-" + std::to_string(i), 100 + i};
      sample.cpu_microseconds = cpu[i];
      sample.cycles = cycles[i];
      sample.instructions = instructions[i];
      s.targets.push_back(sample);
    }
    return s;
  }
  // One second: the targets' rates this second, and the package's true energy (joules).
  double Advance(double cycles0, double ipc0, double cycles1, double ipc1) {
    const double c[2] = {cycles0, cycles1}, ipc[2] = {ipc0, ipc1};
    double joules = kIdleWatts;
    for (int i = 0; i < 2; ++i) {
      cycles[i] += int64_t(c[i]);
      instructions[i] += int64_t(c[i] * ipc[i]);
      cpu[i] += 1'000'000;
      joules += c[i] * kJoulesPerCycle + c[i] * ipc[i] * kJoulesPerInstruction;
    }
    // Other software: a CPU's worth of cycles at IPC 1 for each CPU of it.
    joules += other_cpu * 2e9 * (kJoulesPerCycle + kJoulesPerInstruction);
    busy += 2'000'000 + int64_t(other_cpu * 1e6);
    ++t;
    return joules;
  }
};

FormulaOptions SmartWatts() {
  FormulaOptions options;
  options.name = "smartwatts";
  options.idle_policy = IdlePolicy::kNone;
  options.idle_watts = {{"gpu", 50.0}};
  return options;
}

struct Interval {
  IntervalReport report;
  IntervalActivity activity;
};

// One second of the machine through the formula: package and core measure the true energy, the
// GPU 100 W.
Interval Step(Formula& formula, Machine& machine, double cycles0, double ipc0, double cycles1,
              double ipc1) {
  ActivitySnapshot before = machine.Snapshot();
  const double joules = machine.Advance(cycles0, ipc0, cycles1, ipc1);
  ActivitySnapshot after = machine.Snapshot();
  Interval i;
  i.report.start = before.wall;
  i.report.end = after.wall;
  formula.BeginInterval(&before, &after, &i.report, &i.activity);
  i.report.domains.resize(3);
  const int64_t uj = std::llround(joules * 1e6);
  formula.FillDomain(i.activity, 0, uj, 0, &i.report);
  formula.FillDomain(i.activity, 1, uj / 2, 0, &i.report);
  formula.FillDomain(i.activity, 2, 100'000'000, 0, &i.report);
  return i;
}

void ExpectConserved(const IntervalReport& report) {
  for (const DomainEnergy& d : report.domains) {
    const int64_t shared =
        std::accumulate(d.target_microjoules.begin(), d.target_microjoules.end(), int64_t(0));
    EXPECT_EQ(d.measured_microjoules, d.idle_microjoules + d.unattributed_microjoules + shared);
  }
}

// Rates that vary apart: a few cycles' levels and IPCs, a different phase for each target.
std::array<double, 4> Rates(int t) {
  const double levels[] = {0.5e9, 1.5e9, 2.5e9, 1.0e9, 3.0e9};
  const double ipcs[] = {0.5, 2.0, 1.2, 3.0};
  return {levels[t % 5], ipcs[t % 4], levels[(t / 3) % 5], ipcs[(t / 2 + 1) % 4]};
}

TEST(SmartWattsFormula, LearnsTheMachinesModelAndSharesByIt) {
  auto formula = Formula::Create(SmartWatts(), Domains(), /*learn_idle=*/true);
  ASSERT_TRUE(formula.ok()) << formula.status().message();
  MeterHeader header;
  (*formula)->Describe(&header);
  EXPECT_EQ(header.formula, "smartwatts");
  EXPECT_EQ(header.idle_policy, "none");
  ASSERT_EQ(header.notes.size(), 2u);
  EXPECT_NE(header.notes[0].find("models package-0"), std::string::npos) << header.notes[0];
  EXPECT_NE(header.notes[1].find("core-0, gpu-0 by CPU time"), std::string::npos)
      << header.notes[1];

  Machine machine;
  // Until a model was learned (10 samples), the package's energy is unattributed.
  for (int t = 0; t < 9; ++t) {
    auto [c0, i0, c1, i1] = Rates(t);
    Interval i = Step(**formula, machine, c0, i0, c1, i1);
    EXPECT_TRUE(i.report.models.empty());
    EXPECT_EQ(i.report.domains[0].unattributed_microjoules,
              i.report.domains[0].measured_microjoules);
    ExpectConserved(i.report);
  }
  Interval last;
  for (int t = 9; t < 80; ++t) {
    auto [c0, i0, c1, i1] = Rates(t);
    last = Step(**formula, machine, c0, i0, c1, i1);
    ExpectConserved(last.report);
  }
  ASSERT_EQ(last.report.models.size(), 1u);
  const ModelInfo& model = last.report.models[0];
  EXPECT_EQ(model.domain, 0);
  EXPECT_NEAR(model.intercept_watts, kIdleWatts, 0.5);
  ASSERT_EQ(model.coefficients.size(), 2u);
  EXPECT_EQ(model.coefficients[0].first, "cycles");
  EXPECT_NEAR(model.coefficients[0].second, kJoulesPerCycle, 2e-11);
  EXPECT_EQ(model.coefficients[1].first, "instructions");
  EXPECT_NEAR(model.coefficients[1].second, kJoulesPerInstruction, 2e-11);
  EXPECT_LT(model.error_watts, 0.5);
  // The idle power the package's share used, as the meter's summary prints it.
  EXPECT_EQ(last.report.domains[0].idle_watts, model.intercept_watts);
  EXPECT_EQ(last.report.domains[0].idle_uncertainty_watts, model.error_watts);

  // The last second's shares: the intercept as idle, each target its own dynamic energy.
  auto [c0, i0, c1, i1] = Rates(79);
  const DomainEnergy& package = last.report.domains[0];
  ASSERT_EQ(last.report.targets.size(), 2u);
  EXPECT_NEAR(double(package.idle_microjoules) / 1e6, kIdleWatts, 0.5);
  EXPECT_NEAR(double(package.target_microjoules[0]) / 1e6,
              c0 * kJoulesPerCycle + c0 * i0 * kJoulesPerInstruction, 0.5);
  EXPECT_NEAR(double(package.target_microjoules[1]) / 1e6,
              c1 * kJoulesPerCycle + c1 * i1 * kJoulesPerInstruction, 0.5);

  // The GPU by CPU time (the two targets used as much), its given idle power kept apart.
  const DomainEnergy& gpu = last.report.domains[2];
  EXPECT_EQ(gpu.idle_microjoules, 50'000'000);
  EXPECT_EQ(gpu.target_microjoules[0], gpu.target_microjoules[1]);
  EXPECT_EQ(gpu.idle_watts, 50.0);
  // core-0 is not modelled: by CPU time too.
  EXPECT_EQ(last.report.domains[1].target_microjoules[0],
            last.report.domains[1].target_microjoules[1]);
}

TEST(SmartWattsFormula, OtherSoftwaresActivityStaysUnattributed) {
  auto formula = Formula::Create(SmartWatts(), Domains(), true);
  ASSERT_TRUE(formula.ok());
  Machine machine;
  machine.other_cpu = 1;  // a third CPU's worth, at the targets' mean rates or so
  Interval last;
  for (int t = 0; t < 60; ++t) {
    auto [c0, i0, c1, i1] = Rates(t);
    last = Step(**formula, machine, c0, i0, c1, i1);
    ExpectConserved(last.report);
  }
  ASSERT_EQ(last.report.models.size(), 1u);
  const DomainEnergy& package = last.report.domains[0];
  EXPECT_GT(package.unattributed_microjoules, 0);
  EXPECT_GT(package.target_microjoules[0], 0);
}

// Two formulas fed the same intervals, one of them given one more that must not be learned from:
// their next models are the same.
class NotLearnedFrom : public ::testing::Test {
 protected:
  void SetUp() override {
    auto made_a = Formula::Create(SmartWatts(), Domains(), true);
    auto made_b = Formula::Create(SmartWatts(), Domains(), true);
    ASSERT_TRUE(made_a.ok() && made_b.ok());
    a_ = std::move(*made_a);
    b_ = std::move(*made_b);
    for (int t = 0; t < 30; ++t) {
      auto [c0, i0, c1, i1] = Rates(t);
      Machine copy = machine_;
      Step(*a_, machine_, c0, i0, c1, i1);
      Step(*b_, copy, c0, i0, c1, i1);
    }
  }
  // The next interval through both: their models must agree.
  void ExpectTheSameNextModel() {
    Machine copy = machine_;
    Interval from_a = Step(*a_, machine_, 2e9, 1.5, 0.5e9, 0.7);
    Interval from_b = Step(*b_, copy, 2e9, 1.5, 0.5e9, 0.7);
    ASSERT_EQ(from_a.report.models.size(), 1u);
    ASSERT_EQ(from_b.report.models.size(), 1u);
    const ModelInfo &ma = from_a.report.models[0], &mb = from_b.report.models[0];
    EXPECT_EQ(ma.id, mb.id);
    EXPECT_EQ(ma.samples, mb.samples);
    EXPECT_DOUBLE_EQ(ma.intercept_watts, mb.intercept_watts);
    EXPECT_DOUBLE_EQ(ma.error_watts, mb.error_watts);
    EXPECT_EQ(from_a.report.domains[0].target_microjoules,
              from_b.report.domains[0].target_microjoules);
  }
  // One interval only `a_` sees: its package domain filled with `measured` and `flags`.
  IntervalReport OnlyA(const ActivitySnapshot* before, const ActivitySnapshot* after,
                       int64_t measured, uint32_t flags) {
    IntervalReport report;
    report.start = 1'700'000'000 * kSecond;
    report.end = report.start + kSecond;
    IntervalActivity activity;
    a_->BeginInterval(before, after, &report, &activity);
    report.domains.resize(3);
    a_->FillDomain(activity, 0, measured, flags, &report);
    return report;
  }

  std::unique_ptr<Formula> a_, b_;
  Machine machine_;
};

TEST_F(NotLearnedFrom, AGap) {
  ActivitySnapshot before = machine_.Snapshot(), after = before;
  after.monotonic_nanos += kSecond;
  IntervalReport report = OnlyA(&before, &after, 0, kUnreadable);
  EXPECT_TRUE(report.models.empty());
  EXPECT_EQ(report.domains[0].flags, kUnreadable);
  report = OnlyA(&before, &after, 900'000'000, kReset);  // 900 W: learned, it would show
  EXPECT_EQ(report.domains[0].unattributed_microjoules, 900'000'000);
  ExpectTheSameNextModel();
}

TEST_F(NotLearnedFrom, AnIntervalWithoutActivityAtBothEnds) {
  // A first interval, or a restart's downtime: hours of energy in one interval, no rates.
  ActivitySnapshot after = machine_.Snapshot();
  IntervalReport report = OnlyA(nullptr, &after, 3'600'000'000, 0);
  EXPECT_TRUE(report.models.empty());
  EXPECT_EQ(report.domains[0].unattributed_microjoules, 3'600'000'000);
  ExpectTheSameNextModel();
}

TEST_F(NotLearnedFrom, ABusyMachineNoneOfWhoseTargetsCountersWereRead) {
  ActivitySnapshot before = machine_.Snapshot();
  Machine later = machine_;
  later.Advance(1e9, 1, 1e9, 1);
  ActivitySnapshot after = later.Snapshot();
  for (auto& t : after.targets) t.cycles = -1;  // the kernel counted nothing
  IntervalReport report = OnlyA(&before, &after, 500'000'000, 0);
  EXPECT_TRUE(report.models.empty());
  EXPECT_EQ(report.domains[0].unattributed_microjoules, 500'000'000);
  ExpectTheSameNextModel();
}

TEST(SmartWattsFormula, RefusesWhatItCannotModel) {
  std::vector<Domain> no_rapl = {Domain{"nvml", "gpu-0", "gpu", 0, "test"}};
  auto refused = Formula::Create(SmartWatts(), no_rapl, true);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("--source rapl"), std::string::npos)
      << refused.status().message();

  FormulaOptions bad = SmartWatts();
  bad.smartwatts.min_samples = 0;
  auto invalid = Formula::Create(bad, Domains(), true);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("learn-min-samples-required"), std::string::npos);

  FormulaOptions unknown;
  unknown.name = "powerapi";
  auto named = Formula::Create(unknown, Domains(), true);
  ASSERT_FALSE(named.ok());
  EXPECT_NE(named.status().message().find("cputime"), std::string::npos);
  EXPECT_TRUE(FormulaNeedsHardwareCounters("smartwatts"));
  EXPECT_FALSE(FormulaNeedsHardwareCounters("cputime"));

  // Idle power is the models' intercept for the domains they model; given for another, it holds.
  FormulaOptions idle = SmartWatts();
  idle.idle_watts = {{"package", 20.0}};
  auto given = Formula::Create(idle, Domains(), true);
  ASSERT_FALSE(given.ok());
  EXPECT_NE(given.status().message().find("package-0, which the smartwatts formula models"),
            std::string::npos)
      << given.status().message();
  idle.idle_watts = {{"core-0", 5.0}};
  EXPECT_TRUE(Formula::Create(idle, Domains(), true).ok());

  // Both scopes disabled: nothing left to model.
  FormulaOptions none = SmartWatts();
  none.smartwatts.cpu_formula = false;
  none.smartwatts.dram_formula = false;
  EXPECT_FALSE(Formula::Create(none, Domains(), true).ok());
}

}  // namespace
}  // namespace kwatt::meter::smartwatts_formula_test
