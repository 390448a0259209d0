#include "kwatt/meter/powerapi/hwpc_smartwatts.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "kwatt/simulate/hwpc_simulation.h"

namespace kwatt::meter::smartwatts_test {
namespace {

class MemorySink : public ReportSink {
 public:
  Status Begin(const MeterHeader& header) override {
    header_ = header;
    ++begins_;
    return Status::OK();
  }
  Status Write(const IntervalReport& report) override {
    reports_.push_back(report);
    return Status::OK();
  }
  Status Finish() override {
    ++finishes_;
    return Status::OK();
  }
  MeterHeader header_;
  std::vector<IntervalReport> reports_;
  int begins_ = 0, finishes_ = 0;
};

constexpr const char* kThread = "CPU_CLK_THREAD_UNHALTED:THREAD_P";
constexpr const char* kInstructions = "INSTRUCTIONS_RETIRED";
constexpr const char* kLlc = "LLC_MISSES";

// One socket, three identifiable events, two cgroups whose phases vary IPC and misses apart.
simulate::HwpcSimulation KnownModel() {
  simulate::HwpcSimulation s;
  s.sockets = 1;
  s.cpus_per_socket = 8;
  s.duration_seconds = 400;
  s.noise_watts = 0.05;
  s.events = {kThread, kInstructions, kLlc};
  s.frequency = {{0, 2100}};
  s.power_models = {{0, 0, 20.0, {{kThread, 2.0e-9}, {kInstructions, 1.0e-9}, {kLlc, 1.0e-7}}}};
  s.cgroups = {
      {"/a", {}, {{13, 2, 1.5, 1}, {7, 4, 0.5, 10}, {11, 1, 2.5, 0.2}}},
      {"/b", {}, {{9, 1, 0.8, 20}, {17, 3, 2.0, 3}, {5, 0.2, 1.0, 0.5}}},
  };
  return s;
}

struct FormulaRun {
  MemorySink sink;
  SmartWattsStats stats;
  // Per (timestamp, socket, target): true dynamic watts.
  std::map<std::tuple<int64_t, int, std::string>, double> truth;
  int64_t total_units = 0;
};

void RunFormula(const simulate::HwpcSimulation& simulation, const SmartWattsOptions& options,
                FormulaRun* run) {
  auto sim = simulate::HwpcSimulator::Create(simulation);
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  auto formula = HwpcSmartWatts::Create(options, &run->sink);
  ASSERT_TRUE(formula.ok()) << formula.status().ToString();
  std::vector<HwpcReport> reports;
  std::vector<simulate::HwpcTruth> truth;
  while ((*sim)->Next(&reports, &truth)) {
    for (const simulate::HwpcTruth& t : truth) {
      run->truth[{t.timestamp_ms, t.socket, t.target}] = t.dynamic_watts;
    }
    for (const HwpcCpuCounters& c : reports[0].counters) {
      if (c.group == "rapl") run->total_units += c.Get("RAPL_ENERGY_PKG");
    }
    for (HwpcReport& r : reports) ASSERT_TRUE((*formula)->Add(std::move(r)).ok());
  }
  ASSERT_TRUE((*formula)->Finish().ok());
  run->stats = (*formula)->stats();
}

void ExpectConservation(const MemorySink& sink) {
  for (const IntervalReport& r : sink.reports_) {
    for (const DomainEnergy& e : r.domains) {
      int64_t sum =
          e.idle_microjoules + e.unattributed_microjoules +
          std::accumulate(e.target_microjoules.begin(), e.target_microjoules.end(), int64_t{0});
      ASSERT_EQ(sum, e.measured_microjoules) << "report " << r.sequence;
      ASSERT_GE(e.idle_microjoules, 0);
      ASSERT_GE(e.unattributed_microjoules, 0);
      for (int64_t t : e.target_microjoules) ASSERT_GE(t, 0);
    }
  }
}

// Mean absolute error (watts) of the targets' power against the truth's dynamic power, over the
// reports from `from_seconds` on whose domain has a model.
double TargetError(const FormulaRun& run, double from_seconds, int64_t start_ms) {
  double sum = 0;
  int n = 0;
  for (const IntervalReport& r : run.sink.reports_) {
    int64_t ms = r.end / 1000000;
    if (ms - start_ms < from_seconds * 1000) continue;
    for (const ModelInfo& m : r.models) {
      const DomainEnergy& e = r.domains[size_t(m.domain)];
      double micros = double(r.end - r.start) / 1000;
      for (size_t t = 0; t < r.targets.size(); ++t) {
        double watts = double(e.target_microjoules[t]) / micros;
        auto it = run.truth.find({ms, m.socket, r.targets[t].target.name});
        if (it == run.truth.end()) continue;
        sum += std::fabs(watts - it->second);
        ++n;
      }
    }
  }
  return n ? sum / n : 1e9;
}

TEST(SmartWatts, RecoversAKnownLinearModel) {
  FormulaRun run;
  simulate::HwpcSimulation s = KnownModel();
  SmartWattsOptions options;
  options.cpu_error_threshold_watts = 0.3;
  RunFormula(s, options, &run);
  ASSERT_EQ(run.sink.begins_, 1);
  ASSERT_EQ(run.sink.finishes_, 1);
  ASSERT_EQ(run.sink.header_.domains.size(), 1u);  // no RAPL_ENERGY_DRAM: no dram domain
  EXPECT_EQ(run.sink.header_.domains[0].name, "package-0");
  EXPECT_EQ(run.sink.header_.formula, "smartwatts");
  EXPECT_EQ(run.sink.reports_.size(), 400u);
  EXPECT_EQ(run.stats.ticks, 400);
  ExpectConservation(run.sink);
  // The last model: intercept and per-second coefficients as simulated.
  const IntervalReport& last = run.sink.reports_.back();
  ASSERT_EQ(last.models.size(), 1u);
  const ModelInfo& m = last.models[0];
  EXPECT_EQ(m.layer_frequency_mhz, 2100);
  EXPECT_EQ(m.package_frequency_mhz, 2100);
  EXPECT_NEAR(m.intercept_watts, 20.0, 0.5);
  std::map<std::string, double> coefficients(m.coefficients.begin(), m.coefficients.end());
  EXPECT_NEAR(coefficients[kThread], 2.0e-9, 0.1e-9);
  EXPECT_NEAR(coefficients[kInstructions], 1.0e-9, 0.05e-9);
  EXPECT_NEAR(coefficients[kLlc], 1.0e-7, 0.1e-7);
  EXPECT_LT(m.error_watts, 0.5);
  EXPECT_EQ(m.id.rfind("socket0-2100MHz-#", 0), 0u) << m.id;
  // Per target, once learned: within 0.2 W of the true dynamic power.
  EXPECT_LT(TargetError(run, 30, s.start_ms), 0.2);
  // Measured energy is exact: the sum of the intervals' microjoules is the floor of the total.
  int64_t measured = 0;
  for (const IntervalReport& r : run.sink.reports_) measured += r.domains[0].measured_microjoules;
  EXPECT_EQ(measured, int64_t((unsigned __int128)run.total_units * 1000000 >> 32));
}

TEST(SmartWatts, LearnsOnlyOnceItHasTheMinimumOfSamples) {
  FormulaRun run;
  SmartWattsOptions options;
  options.min_samples = 25;
  RunFormula(KnownModel(), options, &run);
  for (size_t i = 0; i < run.sink.reports_.size(); ++i) {
    const IntervalReport& r = run.sink.reports_[i];
    if (i < 25) {
      // Learning: everything unattributed, no model reported.
      EXPECT_TRUE(r.models.empty()) << i;
      EXPECT_EQ(r.domains[0].unattributed_microjoules, r.domains[0].measured_microjoules);
    } else {
      EXPECT_EQ(r.models.size(), 1u) << i;
    }
  }
}

TEST(SmartWatts, RelearnsWhenTheMachinesModelChanges) {
  simulate::HwpcSimulation s = KnownModel();
  s.duration_seconds = 600;
  // At 300 s the machine's model changes (a new firmware, say): more idle, dearer cycles.
  s.power_models.push_back(
      {300, 0, 30.0, {{kThread, 3.0e-9}, {kInstructions, 0.5e-9}, {kLlc, 2.0e-7}}});
  FormulaRun run;
  SmartWattsOptions options;
  options.cpu_error_threshold_watts = 0.3;
  RunFormula(s, options, &run);
  ExpectConservation(run.sink);
  const ModelInfo& before = run.sink.reports_[290].models.at(0);
  const ModelInfo& after = run.sink.reports_.back().models.at(0);
  EXPECT_NE(before.id, after.id);
  EXPECT_NEAR(before.intercept_watts, 20, 0.5);
  EXPECT_NEAR(after.intercept_watts, 30, 1.0);
  std::map<std::string, double> c(after.coefficients.begin(), after.coefficients.end());
  EXPECT_NEAR(c[kThread], 3.0e-9, 0.2e-9);
  EXPECT_LT(after.error_watts, 1.0);
  EXPECT_GE(run.stats.models_learned, 2);
  EXPECT_LT(TargetError(run, 400, s.start_ms), 0.3);
}

TEST(SmartWatts, AModelPerFrequencyLayer) {
  simulate::HwpcSimulation s =
      simulate::DefaultHwpcSimulation();  // 2100 MHz, then 2600 MHz from 300 s
  FormulaRun run;
  RunFormula(s, SmartWattsOptions(), &run);
  ExpectConservation(run.sink);
  ASSERT_EQ(run.sink.header_.domains.size(), 2u);  // two packages
  std::map<int, int> layers;
  for (const IntervalReport& r : run.sink.reports_) {
    for (const ModelInfo& m : r.models) ++layers[m.layer_frequency_mhz];
  }
  EXPECT_GT(layers[2100], 200);
  EXPECT_GT(layers[2600], 200);
  EXPECT_EQ(layers.size(), 2u);
  const ModelInfo& last = run.sink.reports_.back().models.at(0);
  EXPECT_NEAR(last.intercept_watts, 22, 1.5);
  EXPECT_LT(TargetError(run, 350, s.start_ms), 0.5);
}

TEST(SmartWatts, ScalesMultiplexedCounts) {
  simulate::HwpcSimulation s = KnownModel();
  s.multiplexing = 0.5;  // counters run 50-100 % of each tick
  FormulaRun scaled, unscaled;
  SmartWattsOptions options;
  options.cpu_error_threshold_watts = 0.3;
  RunFormula(s, options, &scaled);
  SmartWattsOptions raw = options;
  raw.scale_multiplexing = false;  // as SmartWatts reads them
  RunFormula(s, raw, &unscaled);
  double scaled_error = TargetError(scaled, 30, s.start_ms);
  double unscaled_error = TargetError(unscaled, 30, s.start_ms);
  EXPECT_LT(scaled_error, 0.3);
  EXPECT_GT(unscaled_error, 3 * scaled_error);
  std::map<std::string, double> c(scaled.sink.reports_.back().models.at(0).coefficients.begin(),
                                  scaled.sink.reports_.back().models.at(0).coefficients.end());
  EXPECT_NEAR(c[kThread], 2.0e-9, 0.15e-9);
}

TEST(SmartWatts, PerSecondRatesGiveOneModelAtTwoSamplingPeriods) {
  std::vector<std::map<std::string, double>> coefficients;
  std::vector<double> intercepts;
  for (int64_t period : {500, 2000}) {
    simulate::HwpcSimulation s = KnownModel();
    s.period_ms = period;
    s.duration_seconds = 800;
    SmartWattsOptions options;
    options.sensor_period_ms = period;
    options.cpu_error_threshold_watts = 0.3;
    FormulaRun run;
    RunFormula(s, options, &run);
    ExpectConservation(run.sink);
    const ModelInfo& m = run.sink.reports_.back().models.at(0);
    coefficients.emplace_back(m.coefficients.begin(), m.coefficients.end());
    intercepts.push_back(m.intercept_watts);
    EXPECT_LT(TargetError(run, 100, s.start_ms), 0.3) << period;
  }
  EXPECT_NEAR(intercepts[0], intercepts[1], 0.8);
  for (const char* e : {kThread, kInstructions, kLlc}) {
    EXPECT_NEAR(coefficients[0][e], coefficients[1][e], 0.1 * coefficients[1][e]) << e;
  }
}

TEST(SmartWatts, LateReportsAndTicksWithoutAllAreCountedNotLost) {
  simulate::HwpcSimulation s = KnownModel();
  s.duration_seconds = 30;
  auto sim = simulate::HwpcSimulator::Create(s);
  ASSERT_TRUE(sim.ok());
  std::vector<std::vector<HwpcReport>> ticks;
  std::vector<HwpcReport> reports;
  std::vector<simulate::HwpcTruth> truth;
  while ((*sim)->Next(&reports, &truth)) ticks.push_back(reports);
  MemorySink sink;
  SmartWattsOptions options;
  options.reorder_ticks = 2;
  auto formula = HwpcSmartWatts::Create(options, &sink);
  ASSERT_TRUE(formula.ok());
  for (size_t t = 0; t < ticks.size(); ++t) {
    for (size_t i = 0; i < ticks[t].size(); ++i) {
      if (t == 10 && i == 0) continue;  // tick 10 has no "all"
      if (t == 5 && i == 2) continue;   // tick 5's /b comes late, after tick 9
      ASSERT_TRUE((*formula)->Add(ticks[t][i]).ok());
    }
    if (t == 6) {
      ASSERT_TRUE((*formula)->Add(ticks[5][1]).ok());  // within the window: a duplicate
    }
    if (t == 9) {
      ASSERT_TRUE((*formula)->Add(ticks[5][2]).ok());  // too late: dropped
    }
  }
  ASSERT_TRUE((*formula)->Finish().ok());
  const SmartWattsStats& stats = (*formula)->stats();
  EXPECT_EQ(stats.late_reports, 1);
  EXPECT_EQ(stats.duplicate_reports, 1);
  EXPECT_EQ(stats.ticks_without_all, 1);
  EXPECT_EQ(stats.ticks, 30);
  ASSERT_EQ(sink.reports_.size(), 30u);
  EXPECT_EQ(sink.reports_[10].domains[0].flags, uint32_t(kUnreadable));
  EXPECT_EQ(sink.reports_[10].domains[0].measured_microjoules, 0);
  EXPECT_EQ(sink.reports_[5].targets.size(), 1u);  // /a only
  EXPECT_EQ(sink.reports_.back().health.late_ticks, 1);
  ExpectConservation(sink);
}

TEST(SmartWatts, RefusesInvalidOptionsAndInputWithoutRapl) {
  SmartWattsOptions o;
  o.min_samples = 100;  // more than the history window (60)
  Status s = ValidateSmartWattsOptions(o);
  EXPECT_NE(s.message().find("learn-min-samples-required"), std::string::npos) << s.message();
  o = SmartWattsOptions();
  o.cpu_error_threshold_watts = 0;
  EXPECT_NE(ValidateSmartWattsOptions(o).message().find("cpu-error-threshold"), std::string::npos);
  o = SmartWattsOptions();
  o.cpu_formula = o.dram_formula = false;
  EXPECT_FALSE(ValidateSmartWattsOptions(o).ok());
  MemorySink sink;
  EXPECT_FALSE(HwpcSmartWatts::Create(o, &sink).ok());
  // A first tick with no RAPL energy cannot start the meter.
  auto formula = HwpcSmartWatts::Create(SmartWattsOptions(), &sink);
  ASSERT_TRUE(formula.ok());
  HwpcReport r;
  r.timestamp_ms = 1000;
  r.sensor = "s";
  r.target = "all";
  r.counters.push_back({"core", 0, 0, {{"INSTRUCTIONS_RETIRED", 5}}});
  ASSERT_TRUE((*formula)->Add(r).ok());
  Status finished = (*formula)->Finish();
  EXPECT_EQ(finished.code(), Status::Code::kCorruption);
  EXPECT_NE(finished.message().find("RAPL_ENERGY_PKG"), std::string::npos);
}

}  // namespace
}  // namespace kwatt::meter::smartwatts_test
