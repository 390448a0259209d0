#include "kwatt/meter/sources/rapl.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "kwatt/meter/pipeline/meter.h"
#include "kwatt/simulate/simulated_rapl.h"
#include "src/meter/sources/rapl_internal.h"
#include "src/testing/manual_clock.h"
#include "src/testing/temp_dir.h"
#include "src/testing/unprivileged.h"

namespace kwatt::meter::rapl_test {
namespace {

namespace fs = std::filesystem;
using namespace rapl_internal;

constexpr int64_t kMilli = 1'000'000;
constexpr int64_t kSecond = 1'000'000'000;

// ---- the counter arithmetic ----

TEST(RaplUnits, InfersTheKernelsUnitsFromTheRange) {
  CounterLayout package = InferCounterLayout(262143328850u);  // 2^-14 J, kernel's 61035 nJ
  EXPECT_TRUE(package.known);
  EXPECT_EQ(package.range, uint64_t(1) << 32);
  EXPECT_EQ(package.reported_unit.numerator, 61035u);
  EXPECT_EQ(package.reported_unit.denominator, 1000u);
  EXPECT_EQ(CountToMicrojoules(1 << 14, package.hardware_unit), 1'000'000);  // 2^14 counts = 1 J
  // The modulus: 2^32 counts of 2^-14 J = 2^18 J exactly.
  EXPECT_EQ(RangeMicrojoules(package), 262144000000);
  EXPECT_NE(package.description.find("2^-14 J"), std::string::npos);

  CounterLayout exact = InferCounterLayout(262143999938u);  // the idealised 2^-14 J unit
  EXPECT_TRUE(exact.known);
  EXPECT_EQ(exact.range, uint64_t(1) << 32);
  EXPECT_EQ(RangeMicrojoules(exact), 262144000000);
  EXPECT_EQ(exact.reported_unit.denominator, 16384u);

  CounterLayout dram = InferCounterLayout(65532610987u);  // 2^-16 J, kernel's 15258 nJ
  EXPECT_EQ(dram.reported_unit.numerator, 15258u);
  EXPECT_EQ(RangeMicrojoules(dram), 65536000000);

  CounterLayout xeon_dram = InferCounterLayout(65712999613u);  // the fixed 15.3 uJ of Xeon DRAM
  EXPECT_TRUE(xeon_dram.known);
  EXPECT_EQ(xeon_dram.reported_unit.numerator, 15300u);
  EXPECT_EQ(xeon_dram.hardware_unit.numerator, 15300u);

  // Small ranges of the simulated trees, both unit styles.
  for (int bits : {8, 12, 16, 20, 24, 31}) {
    for (int exponent : {14, 16}) {
      for (bool truncated : {true, false}) {
        simulate::SimulatedRaplUnit unit =
            simulate::SimulatedRaplUnit::PowerOfTwo(exponent, truncated);
        uint64_t range = uint64_t(1) << bits;
        CounterLayout layout = InferCounterLayout(MaxEnergyRange(range, unit.reported));
        EXPECT_TRUE(layout.known) << bits << " " << exponent;
        EXPECT_EQ(layout.range, range) << bits << " " << exponent << " " << truncated;
        EXPECT_EQ(CountToMicrojoules(range, layout.hardware_unit),
                  CountToMicrojoules(range, unit.hardware));
      }
    }
  }
  // Anything else: microjoules, wrapping at the range plus one estimated unit.
  CounterLayout odd = InferCounterLayout(1000003);
  EXPECT_FALSE(odd.known);
  EXPECT_EQ(odd.range, 1000004u);
  EXPECT_EQ(RawCount(777, odd), 777u);
  EXPECT_NE(odd.description.find("unknown"), std::string::npos);
}

TEST(RaplUnits, EveryReportedValueGivesBackItsCount) {
  std::mt19937_64 random(3);
  for (uint64_t max_range : {262143328850ull, 262143999938ull, 65532610987ull, 65712999613ull}) {
    CounterLayout layout = InferCounterLayout(max_range);
    for (int i = 0; i < 20000; ++i) {
      uint64_t raw = i < 10 ? uint64_t(i)
                            : (i < 20 ? layout.range - uint64_t(i - 9) : random() % layout.range);
      uint64_t reported = uint64_t(CountToMicrojoules(raw, layout.reported_unit));
      ASSERT_EQ(RawCount(reported, layout), raw) << max_range << " " << raw;
      ASSERT_LE(reported, max_range);
    }
  }
}

TEST(RaplParsers, SysfsNumbersPerfEventsScalesAndCpuLists) {
  EXPECT_EQ(*ParseSysfsUnsigned("262143328850\n"), 262143328850u);
  EXPECT_EQ(*ParseSysfsUnsigned("0007"), 7u);
  for (const char* bad : {"", "\n", "-1\n", "12 \n", "1e5", "18446744073709551616", "12\n\n"}) {
    EXPECT_EQ(ParseSysfsUnsigned(bad).status().code(), Status::Code::kCorruption) << bad;
  }
  EXPECT_EQ(*ParsePerfEventConfig("event=0x02\n"), 2u);
  EXPECT_EQ(*ParsePerfEventConfig("event=19"), 19u);
  EXPECT_FALSE(ParsePerfEventConfig("umask=0x02").ok());
  EXPECT_FALSE(ParsePerfEventConfig("event=0xzz").ok());
  Result<PerfScale> scale = ParsePerfScale("2.3283064365386962890625e-10\n");
  ASSERT_TRUE(scale.ok());
  EXPECT_TRUE(scale->power_of_two);
  EXPECT_EQ(scale->shift, 32);
  EXPECT_EQ(PerfCountToMicrojoules(uint64_t(1) << 32, *scale), 1'000'000);
  EXPECT_EQ(PerfCountToMicrojoules((uint64_t(1) << 32) - 1, *scale), 999'999);
  EXPECT_EQ(ParsePerfScale("0.5")->shift, 1);
  EXPECT_EQ(ParsePerfScale("1")->shift, 0);
  Result<PerfScale> decimal = ParsePerfScale("1e-6");
  ASSERT_TRUE(decimal.ok());
  EXPECT_FALSE(decimal->power_of_two);
  EXPECT_EQ(PerfCountToMicrojoules(123456, *decimal), 123456);
  EXPECT_EQ(PerfCountToMicrojoules(10, *ParsePerfScale("2.5e-7")), 2);
  for (const char* bad : {"", "e-10", "1.2.3", "0", "1e", "abc", "1e-99999"}) {
    EXPECT_FALSE(ParsePerfScale(bad).ok()) << bad;
  }
  EXPECT_EQ(*ParseCpuList("0,28\n"), (std::vector<int>{0, 28}));
  EXPECT_EQ(*ParseCpuList("0-2,8"), (std::vector<int>{0, 1, 2, 8}));
  for (const char* bad : {"", "a", "3-1", "1,,2", "-1"})
    EXPECT_FALSE(ParseCpuList(bad).ok()) << bad;
  EXPECT_EQ(ZoneKind("package-1-die-0\n"), "package");
  EXPECT_EQ(ZoneKind("psys-1"), "psys");
  EXPECT_EQ(ZoneKind("gpu"), "");
}

// ---- sources on simulated machines ----

// A simulated machine, a manual clock on the same time, and an environment over them.
struct Machine {
  kwatt::testing::TempDir temp{"kwatt_rapl"};
  std::unique_ptr<simulate::SimulatedRapl> sim;
  std::shared_ptr<ManualClock> clock = std::make_shared<ManualClock>();
  MeterEnvironment environment;

  Machine(simulate::SimulatedRaplLayout layout, simulate::SimulatedPowerTrace trace) {
    auto made =
        simulate::SimulatedRapl::Create(temp.root().string(), std::move(layout), std::move(trace));
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    sim = std::move(*made);
    environment.sysfs_root = temp.root().string();
    environment.procfs_root = temp.root().string() + "/proc";
    environment.clock = clock;
    environment.perf = sim->perf_events();
  }
  void AdvanceTo(int64_t t) {
    ASSERT_TRUE(sim->AdvanceTo(t).ok());
    clock->Jump(t);
  }
  Result<std::unique_ptr<EnergySource>> Open(RaplPath path = RaplPath::kPowercap,
                                             std::vector<std::string> domains = {}) {
    RaplOptions options;
    options.path = path;
    options.domains = std::move(domains);
    return OpenRapl(environment, options);
  }
};

// Power that changes at every step: 20..100 W, the same for a seed.
simulate::SimulatedPowerTrace Varying(int64_t step) {
  return [step](const std::string& domain, int64_t t) {
    uint64_t k = uint64_t(t / step) * 2654435761u + std::hash<std::string>()(domain);
    k ^= k >> 13;
    k *= 0x9E3779B97F4A7C15ull;
    return 20.0 + double((k >> 20) % 80001) / 1000.0;
  };
}

simulate::SimulatedPowerTrace Constant(double watts) {
  return [watts](const std::string&, int64_t) { return watts; };
}

bool Has(const std::vector<std::string>& notes, const std::string& part) {
  for (const std::string& note : notes) {
    if (note.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string AllNotes(const EnergySource& source) {
  std::string text;
  for (const std::string& note : source.Notes()) text += note + "\n";
  return text;
}

struct PeriodCase {
  int64_t period;
  int range_bits;
  bool kernel_truncated;
};

class PowercapTotals : public ::testing::TestWithParam<PeriodCase> {};

// Totals within two counter units of the simulated truth (the quantisation at both ends), whatever
// the read period, across hundreds of wraps.
TEST_P(PowercapTotals, MatchTheTruthAcrossManyWraps) {
  const PeriodCase& c = GetParam();
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(2);
  for (auto& z : layout.zones) {
    z.unit =
        simulate::SimulatedRaplUnit::PowerOfTwo(z.kind == "dram" ? 16 : 14, c.kernel_truncated);
    z.max_power_watts = 100;
  }
  // The same range in joules for every domain: dram's unit is 4 times smaller.
  for (auto& z : layout.zones)
    z.counter_range = uint64_t(1) << (c.range_bits + (z.kind == "dram" ? 2 : 0));
  Machine m(layout, Varying(c.period));
  auto source = m.Open();
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_GE((*source)->MaxReadPeriod().count(), c.period) << AllNotes(**source);
  const size_t n = (*source)->domains().size();
  ASSERT_EQ(n, 4u);
  std::vector<int64_t> truth_at_open(n);
  for (size_t i = 0; i < n; ++i) {
    truth_at_open[i] = m.sim->TrueMicrojoulesFloor((*source)->domains()[i].name);
  }
  std::vector<DomainReading> readings;
  std::vector<int> wraps(n, 0);
  for (int k = 1; k <= 2000; ++k) {
    m.AdvanceTo(k * c.period);
    ASSERT_TRUE((*source)->Read(&readings).ok());
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(readings[i].flags & ~uint32_t(kWrapped), 0u)
          << DescribeDomainFlags(readings[i].flags) << " at read " << k;
      wraps[i] += (readings[i].flags & kWrapped) ? 1 : 0;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = (*source)->domains()[i].name;
    long double truth = m.sim->TrueMicrojoules(name) - truth_at_open[i];
    long double unit = name[0] == 'd' ? 15.2587890625L : 61.03515625L;
    EXPECT_LE(std::fabs((long double)readings[i].microjoules - truth), 2 * unit + 1)
        << name << " " << readings[i].microjoules << " vs " << (double)truth;
    EXPECT_GE(wraps[i], 50) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ReadPeriods, PowercapTotals,
    ::testing::Values(PeriodCase{kMilli, 13, true}, PeriodCase{10 * kMilli, 16, true},
                      PeriodCase{100 * kMilli, 20, true}, PeriodCase{kSecond, 23, true},
                      PeriodCase{kMilli, 13, false}, PeriodCase{kSecond, 23, false}));

TEST(Powercap, XeonDramFixedUnitWrapsExactlyOnTheFullRange) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  layout.zones[1].unit = simulate::SimulatedRaplUnit::FixedNanojoules(15300);
  layout.zones[1].initial_joules = 60000;  // 5.7 kJ below the top of its 65.7 kJ range
  layout.zones[1].max_power_watts = 150;
  Machine m(layout, Varying(kSecond));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE(Has((*source)->Notes(), "15300 nJ counts, 32-bit")) << AllNotes(**source);
  std::vector<DomainReading> readings;
  int wraps = 0;
  for (int k = 1; k <= 2000; ++k) {
    m.AdvanceTo(k * kSecond);
    ASSERT_TRUE((*source)->Read(&readings).ok());
    ASSERT_EQ(readings[1].flags & ~uint32_t(kWrapped), 0u);
    wraps += readings[1].flags & kWrapped ? 1 : 0;
  }
  EXPECT_EQ(wraps, 2);  // 60 kJ + ~120 kJ over a 65.7 kJ range
  EXPECT_LE(std::fabs((long double)readings[1].microjoules - m.sim->TrueMicrojoules("dram-0")),
            2 * 15.3L + 1);
}

TEST(Powercap, DomainsNamesOriginsAndTheReadPeriod) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(2), Constant(10));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  const auto& d = (*source)->domains();
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].name, "package-0");
  EXPECT_EQ(d[0].kind, "package");
  EXPECT_EQ(d[0].source, "rapl");
  EXPECT_EQ(d[1].name, "dram-0");
  EXPECT_EQ(d[1].kind, "dram");
  EXPECT_EQ(d[3].socket, 1);
  EXPECT_EQ(d[0].origin, m.temp.root().string() + "/class/powercap/intel-rapl:0");
  // The shortest wrap: dram's 2^16 J at 2 x 40 W, 819.2 s; half of it is the read period.
  EXPECT_EQ((*source)->MaxReadPeriod().count(), 409'600'000'000);
  EXPECT_TRUE(Has((*source)->Notes(), "the powercap tree (asked for)"));
  EXPECT_TRUE(Has((*source)->Notes(), "constraint_0_max_power_uw x 2")) << AllNotes(**source);

  auto packages = m.Open(RaplPath::kPowercap, {"package", "dram-1"});
  ASSERT_TRUE(packages.ok());
  ASSERT_EQ((*packages)->domains().size(), 3u);
  EXPECT_EQ((*packages)->domains()[2].name, "dram-1");
  auto none = m.Open(RaplPath::kPowercap, {"gpu-0"});
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidArgument);
  EXPECT_NE(none.status().message().find("package-0, dram-0, package-1, dram-1"), std::string::npos)
      << none.status().message();
}

TEST(Powercap, KindDefaultsWhenTheZoneGivesNoPower) {
  Machine m(simulate::SimulatedRaplLayout::IntelClient(), Constant(3));
  RaplOptions options;
  options.path = RaplPath::kPowercap;
  options.largest_power.core_watts = 400;
  options.largest_power.uncore_watts = 100;
  auto source = OpenRapl(m.environment, options);
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE(Has((*source)->Notes(), "kwatt's default for core")) << AllNotes(**source);
  EXPECT_TRUE(Has((*source)->Notes(), "at its largest power 400 W")) << AllNotes(**source);
  // The core's 2^18 J at 400 W: 655 s, read at least every 327.68 s.
  EXPECT_EQ((*source)->MaxReadPeriod().count(), 327'680'000'000);
  options.largest_power.dram_watts = 0;
  EXPECT_EQ(OpenRapl(m.environment, options).status().code(), Status::Code::kInvalidArgument);
}

TEST(Powercap, ResetIsToldApartFromAWrap) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  // package-0 at 1 kJ below the top of its range: wraps within 20 s at 60 W.
  layout.zones[0].initial_joules = 262144.0 - 1000;
  Machine m(layout, Constant(60));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  std::vector<DomainReading> r;
  int64_t t = 0;
  uint32_t seen = 0;
  for (int k = 0; k < 30; ++k) {
    m.AdvanceTo(t += kSecond);
    ASSERT_TRUE((*source)->Read(&r).ok());
    seen |= r[0].flags;
  }
  EXPECT_EQ(seen, uint32_t(kWrapped));
  EXPECT_NEAR(double(r[0].microjoules), 30 * 60e6, 130);
  // The counter back to 0 mid-range: a wrap would need 262 kJ in a second.
  ASSERT_TRUE(m.sim->Reset("package-0").ok());
  m.AdvanceTo(t += kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kReset));
  EXPECT_EQ(r[1].flags, 0u);
  EXPECT_NEAR(double(r[0].microjoules), 30 * 60e6, 130);  // that interval not counted
  m.AdvanceTo(t += kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, 0u);
  EXPECT_NEAR(double(r[0].microjoules), 31 * 60e6, 130);
}

// issue 22, item 10: a counter that jumps forward by more than the domain's largest power allows
// (200 kJ in 0.5 s) is no energy the package used: flagged and not counted, as a reset.
TEST(Powercap, AJumpBeyondTheLargestPowerIsFlaggedAndNotCounted) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  Machine m(layout, Constant(60));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  std::vector<DomainReading> r;
  m.AdvanceTo(kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  const int64_t before = r[0].microjoules;
  m.AdvanceTo(kSecond + kSecond / 2);
  // energy_uj 200 kJ ahead of the truth (within the 262 kJ range: no wrap to explain it).
  ASSERT_TRUE(
      m.sim->SetMalformed("package-0", std::to_string(200'000'000'000LL + 90'000'000LL)).ok());
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kReset));
  EXPECT_EQ(r[0].microjoules, before);
  EXPECT_EQ(r[1].flags, 0u);  // dram-0 read as ever
}

// issue 22, item 10: a counter that cannot be read when the source opens stops the meter (and
// --check) naming the file and the error, rather than reporting 0 J without a word.
TEST(Powercap, ACounterThatCannotBeReadAtOpenIsAnErrorNamingTheFile) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(1), Constant(60));
  ASSERT_TRUE(m.sim->SetUnreadable("dram-0", true).ok());
  auto source = m.Open();
  ASSERT_FALSE(source.ok());
  const std::string message = source.status().message();
  EXPECT_EQ(source.status().code(), Status::Code::kIOError) << message;
  EXPECT_NE(message.find(m.sim->ZoneDir("dram-0") + "/energy_uj"), std::string::npos) << message;
  EXPECT_NE(message.find(std::strerror(EISDIR)), std::string::npos) << message;
}

TEST(Powercap, MaybeMissedWrapWhenTheReadsAreTooFarApart) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  layout.SetCounterRange(1 << 16);  // 4 J (package), 1 J (dram)
  layout.SetMaxPower(50);           // largest 100 W: wraps at least 10 ms apart for dram
  Machine m(layout, Constant(30));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  EXPECT_EQ((*source)->MaxReadPeriod().count(), 5 * kMilli);
  std::vector<DomainReading> r;
  m.AdvanceTo(5 * kMilli);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[1].flags & kMaybeMissedWrap, 0u);
  m.AdvanceTo(200 * kMilli);  // 195 ms: the dram counter (1 J at 30 W) wrapped 5 times
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_NE(r[1].flags & kMaybeMissedWrap, 0u);
  EXPECT_NE(r[0].flags & kMaybeMissedWrap, 0u);  // 4 J at 100 W: 40 ms < 195 ms
}

TEST(Powercap, HotUnplugIsAGapThenAReset) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(2), Constant(40));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  std::vector<DomainReading> r;
  m.AdvanceTo(kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  ASSERT_TRUE(m.sim->Unplug(1).ok());
  for (int k = 2; k <= 3; ++k) {
    m.AdvanceTo(k * kSecond);
    ASSERT_TRUE((*source)->Read(&r).ok());
    EXPECT_EQ(r[0].flags, 0u);
    EXPECT_EQ(r[2].flags, uint32_t(kUnreadable));
    EXPECT_EQ(r[3].flags, uint32_t(kUnreadable));
  }
  EXPECT_NEAR(double(r[2].microjoules), 40e6, 100);  // unmoved
  ASSERT_TRUE(m.sim->Replug(1).ok());
  m.AdvanceTo(4 * kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[2].flags, uint32_t(kReset));  // vanished and came back
  EXPECT_EQ(r[3].flags, uint32_t(kReset));
  EXPECT_NEAR(double(r[2].microjoules), 40e6, 100);
  m.AdvanceTo(5 * kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[2].flags, 0u);
  EXPECT_NEAR(double(r[2].microjoules), 80e6, 200);
  EXPECT_NEAR(double(r[0].microjoules), 200e6, 200);
}

TEST(Powercap, MalformedAndUnreadableFilesAreGaps) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(1), Constant(20));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  std::vector<DomainReading> r;
  int64_t t = 0;
  auto step = [&] {
    m.AdvanceTo(t += kSecond);
    EXPECT_TRUE((*source)->Read(&r).ok());
  };
  step();
  for (const char* text : {"garbage\n", "", "-5\n", "999999999999999999\n", "12 34\n"}) {
    ASSERT_TRUE(m.sim->SetMalformed("package-0", std::string(text)).ok());
    step();
    EXPECT_EQ(r[0].flags, uint32_t(kUnreadable)) << "'" << text << "'";
    EXPECT_EQ(r[1].flags, 0u);
  }
  EXPECT_NEAR(double(r[0].microjoules), 20e6, 100);
  ASSERT_TRUE(m.sim->SetMalformed("package-0", std::nullopt).ok());
  step();
  EXPECT_EQ(r[0].flags, uint32_t(kReset));
  step();
  EXPECT_EQ(r[0].flags, 0u);
  EXPECT_NEAR(double(r[0].microjoules), 40e6, 100);

  ASSERT_TRUE(m.sim->SetUnreadable("dram-0", true).ok());
  step();
  EXPECT_EQ(r[1].flags, uint32_t(kUnreadable));
  step();
  EXPECT_EQ(r[1].flags, uint32_t(kUnreadable));
  ASSERT_TRUE(m.sim->SetUnreadable("dram-0", false).ok());
  step();
  EXPECT_EQ(r[1].flags, uint32_t(kReset));
  step();
  EXPECT_EQ(r[1].flags, 0u);
  EXPECT_NEAR(double(r[1].microjoules), 9 * 20e6, 100);  // all but the 3 gap intervals
}

TEST(Powercap, AZoneWhoseRangeChangedIsAReset) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(1), Constant(20));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  std::vector<DomainReading> r;
  m.AdvanceTo(kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  // The driver reloaded with another unit: same name, another range, the counter lower.
  std::ofstream(m.sim->ZoneDir("package-0") + "/max_energy_range_uj") << "262143999938\n";
  ASSERT_TRUE(m.sim->Reset("package-0").ok());
  m.AdvanceTo(2 * kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kReset));
  EXPECT_NEAR(double(r[0].microjoules), 20e6, 100);
}

TEST(Powercap, SavedCountersResumeAcrossARestart) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  layout.zones[0].initial_joules = 262144.0 - 100;  // wraps while the meter is down
  Machine m(layout, Constant(50));
  std::string saved;
  {
    auto source = m.Open();
    ASSERT_TRUE(source.ok());
    std::vector<DomainReading> r;
    m.AdvanceTo(kSecond);
    ASSERT_TRUE((*source)->Read(&r).ok());
    saved = (*source)->SaveCounters();
  }
  EXPECT_EQ(saved.rfind("kwatt-rapl-counters 1 powercap\npackage-0 intel-rapl:0 262143328850 ", 0),
            0u)
      << saved;
  int64_t truth_at_save = m.sim->TrueMicrojoulesFloor("package-0");
  m.AdvanceTo(10 * kSecond);  // down for 9 s: 450 J, the counter wrapped
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  ASSERT_TRUE((*source)->ResumeCounters(saved, std::chrono::seconds(9)).ok());
  m.AdvanceTo(11 * kSecond);
  std::vector<DomainReading> r;
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kWrapped));
  EXPECT_NEAR(double(r[0].microjoules),
              double(m.sim->TrueMicrojoulesFloor("package-0") - truth_at_save), 130);
  // Down for longer than a wrap period at the largest power: may have missed a wrap.
  auto again = m.Open();
  ASSERT_TRUE((*again)->ResumeCounters((*source)->SaveCounters(), std::chrono::hours(1)).ok());
  m.AdvanceTo(12 * kSecond);
  ASSERT_TRUE((*again)->Read(&r).ok());
  EXPECT_NE(r[0].flags & kMaybeMissedWrap, 0u);
  // Another machine's counters, or garbage: refused, counting from now.
  EXPECT_EQ((*again)
                ->ResumeCounters("kwatt-rapl-counters 1 powercap\npackage-0 intel-rapl:0 "
                                 "65532610987 5\ndram-0 intel-rapl:0:0 65532610987 5\n",
                                 std::chrono::seconds(1))
                .code(),
            Status::Code::kInvalidArgument);
  EXPECT_FALSE((*again)->ResumeCounters("hello", std::chrono::seconds(1)).ok());
  EXPECT_FALSE(
      (*again)
          ->ResumeCounters("kwatt-rapl-counters 1 powercap\npackage-0 x\n", std::chrono::seconds(1))
          .ok());
}

TEST(Powercap, AnMmioDuplicateIsReadOnce) {
  Machine m(simulate::SimulatedRaplLayout::IntelClient(/*mmio_duplicate=*/true), Constant(5));
  auto source = m.Open();
  ASSERT_TRUE(source.ok());
  std::vector<std::string> names;
  for (const Domain& d : (*source)->domains()) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"package-0", "core-0", "uncore-0", "psys"}));
  EXPECT_EQ((*source)->domains()[0].origin,
            m.temp.root().string() + "/class/powercap/intel-rapl:0");
  EXPECT_TRUE(Has((*source)->Notes(), "intel-rapl-mmio:0 (package-0) measures what intel-rapl:0"))
      << AllNotes(**source);
  EXPECT_EQ((*source)->domains()[3].socket, -1);
}

TEST(Powercap, MalformedTreesAreRefusedNamingTheFile) {
  kwatt::testing::TempDir temp("kwatt_rapl");
  const std::string zone = temp.root().string() + "/class/powercap/intel-rapl:0";
  fs::create_directories(zone);
  std::ofstream(zone + "/name") << "package-0\n";
  std::ofstream(zone + "/max_energy_range_uj") << "lots\n";
  std::ofstream(zone + "/energy_uj") << "5\n";
  MeterEnvironment environment;
  environment.sysfs_root = temp.root().string();
  RaplOptions options;
  options.path = RaplPath::kPowercap;
  Result<std::unique_ptr<EnergySource>> source = OpenRapl(environment, options);
  EXPECT_EQ(source.status().code(), Status::Code::kCorruption);
  EXPECT_NE(
      source.status().message().find("intel-rapl:0: max_energy_range_uj: not a number: 'lots"),
      std::string::npos)
      << source.status().message();
}

// ---- perf ----

TEST(Perf, ExactTotalsFrom64BitCounts) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(2), Varying(10 * kMilli));
  auto source = m.Open(RaplPath::kPerf);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->MaxReadPeriod(), std::chrono::nanoseconds::max());
  ASSERT_EQ((*source)->domains().size(), 4u);
  EXPECT_EQ((*source)->domains()[2].origin, "perf power/energy-pkg/ on CPU 4");
  EXPECT_EQ((*source)->domains()[3].name, "dram-1");
  std::vector<DomainReading> r;
  for (int k = 1; k <= 500; ++k) {
    m.AdvanceTo(k * 10 * kMilli);
    ASSERT_TRUE((*source)->Read(&r).ok());
  }
  for (size_t i = 0; i < 4; ++i) {
    const std::string& name = (*source)->domains()[i].name;
    EXPECT_EQ(r[i].flags, 0u);
    long double unit = name[0] == 'd' ? 15.2587890625L : 61.03515625L;
    EXPECT_LE(std::fabs((long double)r[i].microjoules - m.sim->TrueMicrojoules(name)), 2 * unit)
        << name;
  }
  EXPECT_FALSE((*source)->ResumeCounters("x", std::chrono::seconds(1)).ok());
  EXPECT_EQ((*source)->SaveCounters(), "");
}

// A PerfEvents that has no counter for one event on one CPU, as a PMU that lists an event some
// package does not count.
class MissingEvent : public PerfEvents {
 public:
  explicit MissingEvent(std::shared_ptr<PerfEvents> inner) : inner_(std::move(inner)) {}
  Result<int> Open(const PerfEventSpec& spec) override {
    if (spec.config == 3 && spec.cpu == 4) {
      return Status::NotFound("perf_event_open of " + spec.name + " is not available");
    }
    return inner_->Open(spec);
  }
  Result<PerfCount> Read(int handle) override { return inner_->Read(handle); }
  void Close(int handle) override { inner_->Close(handle); }

 private:
  std::shared_ptr<PerfEvents> inner_;
};

TEST(Perf, ACounterThatDoesNotOpenIsLeftOutWithANote) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(2), Constant(10));
  m.environment.perf = std::make_shared<MissingEvent>(m.environment.perf);
  auto source = m.Open(RaplPath::kPerf);
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<std::string> names;
  for (const Domain& d : (*source)->domains()) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"package-0", "dram-0", "package-1"}));
  EXPECT_TRUE(Has((*source)->Notes(), "perf: dram-1 is not read")) << AllNotes(**source);
}

// A PerfEvents whose reads fail on request: the interval is a gap, then a reset.
class FailingReads : public PerfEvents {
 public:
  explicit FailingReads(std::shared_ptr<PerfEvents> inner) : inner_(std::move(inner)) {}
  Result<int> Open(const PerfEventSpec& spec) override { return inner_->Open(spec); }
  Result<PerfCount> Read(int handle) override {
    if (fail) return Status::IOError("reading a perf counter failed: No such device");
    return inner_->Read(handle);
  }
  void Close(int handle) override { inner_->Close(handle); }
  bool fail = false;

 private:
  std::shared_ptr<PerfEvents> inner_;
};

TEST(Perf, AFailedReadIsAGap) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(1), Constant(10));
  auto failing = std::make_shared<FailingReads>(m.environment.perf);
  m.environment.perf = failing;
  auto source = m.Open(RaplPath::kPerf);
  ASSERT_TRUE(source.ok());
  std::vector<DomainReading> r;
  m.AdvanceTo(kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  failing->fail = true;
  m.AdvanceTo(2 * kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kUnreadable));
  failing->fail = false;
  m.AdvanceTo(3 * kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, uint32_t(kReset));
  m.AdvanceTo(4 * kSecond);
  ASSERT_TRUE((*source)->Read(&r).ok());
  EXPECT_EQ(r[0].flags, 0u);
  EXPECT_NEAR(double(r[0].microjoules), 20e6, 130);
}

// ---- the path chosen ----

TEST(OpenRapl, AutoPrefersPerfAndCrossChecksPowercap) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(2), Constant(10));
  auto source = m.Open(RaplPath::kAuto);
  ASSERT_TRUE(source.ok());
  std::vector<std::string> notes = (*source)->Notes();
  ASSERT_GE(notes.size(), 2u);
  EXPECT_NE(notes[0].find("perf's power PMU"), std::string::npos) << notes[0];
  EXPECT_EQ(notes[1],
            "perf's power PMU and powercap have the same 4 domains (package-0, dram-0, "
            "package-1, dram-1)");
  EXPECT_EQ((*source)->domains()[0].origin.rfind("perf ", 0), 0u);
}

TEST(OpenRapl, AmdLayoutsNameWhatOnePathLacks) {
  Machine m(simulate::SimulatedRaplLayout::Amd(1), Constant(10));
  auto source = m.Open(RaplPath::kAuto);
  ASSERT_TRUE(source.ok());
  EXPECT_TRUE(Has((*source)->Notes(), "powercap has core-0 that perf's power PMU lacks"))
      << AllNotes(**source);
  EXPECT_EQ((*source)->domains().size(), 1u);
  // Asking for core: perf has none; auto reads it from powercap, saying why.
  auto core = m.Open(RaplPath::kAuto, {"core"});
  ASSERT_TRUE(core.ok()) << core.status().ToString();
  EXPECT_EQ((*core)->domains()[0].name, "core-0");
  EXPECT_TRUE(Has((*core)->Notes(), "no RAPL domain named or of kind 'core' in perf's power PMU"))
      << AllNotes(**core);
  EXPECT_EQ(m.Open(RaplPath::kPerf, {"core"}).status().code(), Status::Code::kInvalidArgument);
}

TEST(OpenRapl, AutoFallsBackToPowercapWhenPerfIsRefused) {
  Machine m(simulate::SimulatedRaplLayout::IntelServer(1), Constant(10));
  m.sim->SetPerfOpenError(EACCES);
  auto source = m.Open(RaplPath::kAuto);
  ASSERT_TRUE(source.ok());
  std::vector<std::string> notes = (*source)->Notes();
  EXPECT_NE(notes[0].find("the powercap tree, as perf's power PMU could not be used"),
            std::string::npos);
  EXPECT_NE(notes[0].find("perf_event_paranoid"), std::string::npos) << notes[0];
  EXPECT_EQ((*source)->domains()[0].origin.rfind(m.temp.root().string(), 0), 0u);
  // Asked for perf: its refusal as is.
  EXPECT_EQ(m.Open(RaplPath::kPerf).status().code(), Status::Code::kPermissionDenied);
}

TEST(OpenRapl, NeitherPathIsNotFoundNamingBoth) {
  kwatt::testing::TempDir temp("kwatt_rapl");
  MeterEnvironment environment;
  environment.sysfs_root = temp.root().string();
  Result<std::unique_ptr<EnergySource>> source = OpenRapl(environment);
  EXPECT_EQ(source.status().code(), Status::Code::kNotFound);
  EXPECT_NE(
      source.status().message().find(temp.root().string() + "/bus/event_source/devices/power"),
      std::string::npos);
  EXPECT_NE(source.status().message().find(temp.root().string() + "/class/powercap"),
            std::string::npos)
      << source.status().message();
  EXPECT_EQ(ParseRaplPath("perf").value(), RaplPath::kPerf);
  EXPECT_FALSE(ParseRaplPath("msr").ok());
}

// What a user who is not root sees on Linux 5.10+: energy_uj mode 0400. The check runs in a child
// that drops to `nobody` (the tests run as root, which reads any file).
TEST(OpenRapl, RootOnlyEnergyIsPermissionDeniedNamingTheFixes) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  layout.root_only_energy = true;
  Machine m(layout, Constant(10));
  m.sim->SetPerfOpenError(EACCES);
  fs::permissions(m.temp.root(), fs::perms::others_exec | fs::perms::others_read,
                  fs::perm_options::add);
  std::optional<std::string> checked = kwatt::testing::RunAsNobody([&] {
    RaplOptions options;
    Result<std::unique_ptr<EnergySource>> source = OpenRapl(m.environment, options);
    std::string text =
        std::string(Status::CodeName(source.status().code())) + "|" + source.status().message();
    options.path = RaplPath::kPowercap;
    return text + "|" +
           std::string(Status::CodeName(OpenRapl(m.environment, options).status().code()));
  });
  if (!checked) GTEST_SKIP() << "needs root and a user nobody to drop to";
  const std::string& text = *checked;
  ASSERT_NE(text, "setresuid failed");
  EXPECT_EQ(text.rfind("PermissionDenied|", 0), 0u) << text;
  EXPECT_NE(text.find("intel-rapl:0/energy_uj is readable by root only"), std::string::npos)
      << text;
  EXPECT_NE(text.find("CVE-2020-8694"), std::string::npos);
  EXPECT_NE(text.find("chmod o+r"), std::string::npos);
  EXPECT_NE(text.find("CAP_PERFMON"), std::string::npos);
  EXPECT_NE(text.find("perf_event_paranoid"), std::string::npos);
  EXPECT_EQ(text.substr(text.rfind('|')), "|PermissionDenied");
}

// ---- in the meter ----

// The meter's sampler reads RAPL as often as its wraps need (MaxReadPeriod), its totals are the
// simulated truth across wraps, and a restart with the state file neither loses nor double-counts.
TEST(RaplInTheMeter, TotalsMatchTheTruthAcrossWrapsAndARestart) {
  simulate::SimulatedRaplLayout layout = simulate::SimulatedRaplLayout::IntelServer(1);
  layout.SetCounterRange(uint64_t(1) << 24);  // package 1 kJ, dram 256 J
  layout.SetMaxPower(50);                     // read at least every 1.28 s (dram at 100 W)
  Machine m(layout, Varying(10 * kMilli));
  m.clock->OnAdvance([&m](int64_t t) {
    if (t > m.sim->now()) {
      EXPECT_TRUE(m.sim->AdvanceTo(t).ok());
    }
  });
  const std::string proc = m.temp.root().string() + "/proc";
  fs::create_directories(proc + "/sys/kernel/random");
  std::ofstream(proc + "/sys/kernel/random/boot_id") << "boot-1\n";
  const std::string state = m.temp.root().string() + "/meter.state";
  auto run = [&](int64_t from, int64_t to) -> MeterTotals {
    m.clock->Jump(from);
    auto source = m.Open();
    EXPECT_TRUE(source.ok()) << source.status().ToString();
    std::vector<std::unique_ptr<EnergySource>> sources;
    sources.push_back(std::move(*source));
    std::vector<MeterOutput> outputs;
    outputs.push_back({"memory", std::make_unique<ReportBuffer>()});
    MeterOptions options;
    options.period = std::chrono::milliseconds(100);
    options.state_file = state;
    auto meter =
        Meter::Create(m.environment, std::move(sources), {}, nullptr, std::move(outputs), options);
    EXPECT_TRUE(meter.ok()) << meter.status().ToString();
    EXPECT_TRUE((*meter)->Start().ok());
    m.clock->AdvanceTo(to);
    m.clock->WaitUntilIdle();
    EXPECT_TRUE((*meter)->Stop().ok());
    return (*meter)->Totals();
  };
  MeterTotals first = run(0, 5 * kSecond);
  ASSERT_EQ(first.domains.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const std::string& name = first.domains[i].name;
    long double unit = i == 1 ? 15.2587890625L : 61.03515625L;
    EXPECT_LE(std::fabs((long double)first.measured_microjoules[i] - m.sim->TrueMicrojoules(name)),
              2 * unit)
        << name;
    EXPECT_EQ(first.flags[i] & ~uint32_t(kWrapped), 0u) << DescribeDomainFlags(first.flags[i]);
  }
  EXPECT_NE(first.flags[1] & kWrapped, 0u);  // dram wrapped: 256 J at 20-100 W
  // Down for 2 s (the counters go on, dram may wrap once), then the meter starts again.
  MeterTotals second = run(7 * kSecond, 10 * kSecond);
  for (size_t i = 0; i < 2; ++i) {
    const std::string& name = second.domains[i].name;
    long double unit = i == 1 ? 15.2587890625L : 61.03515625L;
    EXPECT_LE(std::fabs((long double)second.measured_microjoules[i] - m.sim->TrueMicrojoules(name)),
              2 * unit)
        << name << ": the downtime's energy is counted once";
  }
}

// ---- the machine's own RAPL, where it has one ----

TEST(RealRapl, ReadsThisMachinesCounters) {
  MeterEnvironment environment;
  if (!fs::exists("/sys/class/powercap/intel-rapl:0") &&
      !fs::exists("/sys/bus/event_source/devices/power")) {
    GTEST_SKIP() << "this machine has no RAPL (no /sys/class/powercap/intel-rapl:0, no perf "
                    "power PMU): the sources are tested on simulated trees";
  }
  Result<std::unique_ptr<EnergySource>> source = OpenRapl(environment);
  if (source.status().code() == Status::Code::kPermissionDenied) {
    GTEST_SKIP() << "RAPL is here but not readable by this user: " << source.status().message();
  }
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  std::vector<DomainReading> r;
  ASSERT_TRUE((*source)->Read(&r).ok());
  // A running machine's package counter moves within a few hundred ms (its unit is 61 uJ). A
  // virtual machine may show the tree, or perf's PMU, with counters that never move: that is not
  // this machine's RAPL to check, so the test says so and skips rather than passing or failing.
  bool any_energy = false;
  for (int tries = 0; tries < 10 && !any_energy; ++tries) {
    ::usleep(200'000);
    ASSERT_TRUE((*source)->Read(&r).ok());
    for (const DomainReading& reading : r) any_energy |= reading.microjoules > 0;
  }
  if (!any_energy) {
    GTEST_SKIP() << "RAPL is here (" << r.size()
                 << " domains) but no counter moved in 2 s: a virtual machine's frozen counters, "
                    "not hardware to check";
  }
}

}  // namespace
}  // namespace kwatt::meter::rapl_test
