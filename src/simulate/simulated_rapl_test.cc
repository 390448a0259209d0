#include "kwatt/simulate/simulated_rapl.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/testing/temp_dir.h"

namespace kwatt::simulate::simulated_rapl_test {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

uint64_t Number(const std::string& path) { return std::stoull(Slurp(path)); }

SimulatedPowerTrace Constant(double watts) {
  return [watts](const std::string&, int64_t) { return watts; };
}

TEST(SimulatedRapl, LaysOutTheKernelsPowercapTreeAndPowerPmu) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  std::string root = temp.root().string();
  auto sim = SimulatedRapl::Create(root, SimulatedRaplLayout::IntelServer(2), Constant(10));
  ASSERT_TRUE(sim.ok()) << sim.status().ToString();
  EXPECT_EQ((*sim)->domains(),
            (std::vector<std::string>{"package-0", "dram-0", "package-1", "dram-1"}));
  const std::string p = root + "/class/powercap/";
  EXPECT_TRUE(fs::is_symlink(p + "intel-rapl:0"));
  EXPECT_EQ(Slurp(p + "intel-rapl:0/name"), "package-0\n");
  EXPECT_EQ(Slurp(p + "intel-rapl:0:0/name"), "dram\n");
  EXPECT_EQ(Slurp(p + "intel-rapl:1:0/name"), "dram\n");
  // The children sit in their package's directory, as in sysfs.
  EXPECT_TRUE(fs::is_directory(p + "intel-rapl:0/intel-rapl:0:0"));
  // floor((2^32 - 1) * 61035 nJ) and floor((2^32 - 1) * 15258 nJ): the kernel's truncated units.
  EXPECT_EQ(Number(p + "intel-rapl:0/max_energy_range_uj"), 262143328850u);
  EXPECT_EQ(Number(p + "intel-rapl:0:0/max_energy_range_uj"), 65532610987u);
  EXPECT_EQ(Number(p + "intel-rapl:0/constraint_0_max_power_uw"), 125000000u);
  // energy_uj zero-padded to the range's width (written in place, never caught short).
  EXPECT_EQ(Slurp(p + "intel-rapl:0/energy_uj").size(), 13u);
  const std::string pmu = root + "/bus/event_source/devices/power/";
  EXPECT_EQ(Slurp(pmu + "cpumask"), "0,4\n");
  EXPECT_EQ(Slurp(pmu + "events/energy-pkg"), "event=0x02\n");
  EXPECT_EQ(Slurp(pmu + "events/energy-ram"), "event=0x03\n");
  EXPECT_EQ(Slurp(pmu + "events/energy-pkg.scale"), "2.3283064365386962890625e-10\n");
  EXPECT_FALSE(fs::exists(pmu + "events/energy-cores"));
  EXPECT_EQ(Slurp(root + "/devices/system/cpu/cpu5/topology/physical_package_id"), "1\n");
}

TEST(SimulatedRapl, CountsAsTheHardwareAndReportsAsTheKernel) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  SimulatedRaplLayout layout = SimulatedRaplLayout::IntelServer(1);
  for (auto& z : layout.zones) z.initial_joules = 0;
  auto sim = SimulatedRapl::Create(temp.root().string(), layout, Constant(10));
  ASSERT_TRUE(sim.ok());
  ASSERT_TRUE((*sim)->AdvanceTo(1'000'000'000).ok());
  EXPECT_EQ((*sim)->TrueMicrojoulesFloor("package-0"), 10'000'000);
  // 10 J in 2^-14 J counts: 163840; times the kernel's 61035 nJ: 9999974.4 -> 9999974.
  EXPECT_EQ(Number((*sim)->ZoneDir("package-0") + "/energy_uj"), 9999974u);
  // 10 J in 2^-16 J counts: 655360; times 15258 nJ: 9999482.88 -> 9999482.
  EXPECT_EQ(Number((*sim)->ZoneDir("dram-0") + "/energy_uj"), 9999482u);
  // The power is taken at each step's start and held: 10 W then 30 W.
  auto trace = [](const std::string&, int64_t t) { return t < 500'000'000 ? 10.0 : 30.0; };
  kwatt::testing::TempDir temp2("kwatt_simrapl");
  auto sim2 = SimulatedRapl::Create(temp2.root().string(), layout, trace);
  ASSERT_TRUE((*sim2)->AdvanceTo(500'000'000).ok());
  ASSERT_TRUE((*sim2)->AdvanceTo(750'000'000).ok());
  EXPECT_EQ((*sim2)->TrueMicrojoulesFloor("package-0"), 5'000'000 + 7'500'000);
}

TEST(SimulatedRapl, ExactUnitsSmallRangesAndWraps) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  SimulatedRaplLayout layout;
  SimulatedRaplZone zone;
  zone.unit = SimulatedRaplUnit::PowerOfTwo(14, /*kernel_truncated=*/false);
  layout.zones = {zone};
  auto sim = SimulatedRapl::Create(temp.root().string(), layout, Constant(100));
  ASSERT_TRUE(sim.ok());
  // The idealised unit: floor((2^32 - 1) * 2^-14 J) = 2^18 J - 61.03515625 uJ.
  EXPECT_EQ(Number((*sim)->ZoneDir("package-0") + "/max_energy_range_uj"), 262143999938u);

  kwatt::testing::TempDir temp2("kwatt_simrapl");
  layout.SetCounterRange(1 << 16);  // 2^16 counts of 2^-14 J: 4 J
  auto small = SimulatedRapl::Create(temp2.root().string(), layout, Constant(100));
  ASSERT_TRUE(small.ok());
  const std::string energy = (*small)->ZoneDir("package-0") + "/energy_uj";
  EXPECT_EQ(Number((*small)->ZoneDir("package-0") + "/max_energy_range_uj"), 3999938u);
  ASSERT_TRUE((*small)->AdvanceTo(30'000'000).ok());  // 3 J
  EXPECT_EQ(Number(energy), 3'000'000u);
  ASSERT_TRUE((*small)->AdvanceTo(50'000'000).ok());  // 5 J: wrapped once, 1 J
  EXPECT_EQ(Number(energy), 1'000'000u);
}

TEST(SimulatedRapl, Faults) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  SimulatedRaplLayout layout = SimulatedRaplLayout::IntelServer(2);
  auto made = SimulatedRapl::Create(temp.root().string(), layout, Constant(50));
  ASSERT_TRUE(made.ok());
  SimulatedRapl& sim = **made;
  ASSERT_TRUE(sim.AdvanceTo(1'000'000'000).ok());
  const std::string energy = sim.ZoneDir("package-0") + "/energy_uj";
  EXPECT_GT(Number(energy), 50'000'000u);
  // Reset: the count starts again from 0.
  ASSERT_TRUE(sim.Reset("package-0").ok());
  EXPECT_EQ(Number(energy), 0u);
  ASSERT_TRUE(sim.AdvanceTo(2'000'000'000).ok());
  // 50 J: 819200 counts of 2^-14 J, times the kernel's 61035 nJ.
  EXPECT_EQ(Number(energy), 49999872u);
  // The truth goes on.
  EXPECT_EQ(sim.TrueMicrojoulesFloor("package-0"), 100'000'000);

  // A handle kept open on a zone that is unplugged reads nothing, as sysfs's would fail.
  std::ifstream kept(energy);
  ASSERT_TRUE(sim.Unplug(0).ok());
  EXPECT_FALSE(fs::exists(sim.ZoneDir("package-0")));
  EXPECT_FALSE(fs::exists(sim.ZoneDir("dram-0")));
  EXPECT_TRUE(fs::exists(sim.ZoneDir("package-1")));
  std::string line;
  EXPECT_FALSE(std::getline(kept, line));
  ASSERT_TRUE(sim.AdvanceTo(3'000'000'000).ok());
  ASSERT_TRUE(sim.Replug(0).ok());
  EXPECT_EQ(Slurp(sim.ZoneDir("dram-0") + "/name"), "dram\n");
  EXPECT_EQ(Number(energy), 99999744u);  // 100 J: counted while unplugged

  ASSERT_TRUE(sim.SetMalformed("package-1", "12x4\n").ok());
  EXPECT_EQ(Slurp(sim.ZoneDir("package-1") + "/energy_uj"), "12x4\n");
  ASSERT_TRUE(sim.AdvanceTo(3'500'000'000).ok());
  EXPECT_EQ(Slurp(sim.ZoneDir("package-1") + "/energy_uj"), "12x4\n");
  ASSERT_TRUE(sim.SetMalformed("package-1", std::nullopt).ok());
  EXPECT_EQ(Slurp(sim.ZoneDir("package-1") + "/energy_uj").size(), 13u);

  ASSERT_TRUE(sim.SetUnreadable("dram-1", true).ok());
  EXPECT_TRUE(fs::is_directory(sim.ZoneDir("dram-1") + "/energy_uj"));
  ASSERT_TRUE(sim.AdvanceTo(4'000'000'000).ok());
  ASSERT_TRUE(sim.SetUnreadable("dram-1", false).ok());
  EXPECT_TRUE(fs::is_regular_file(sim.ZoneDir("dram-1") + "/energy_uj"));
  EXPECT_FALSE(sim.Reset("gpu-7").ok());
}

TEST(SimulatedRapl, RootOnlyEnergyAndTruthFile) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  SimulatedRaplLayout layout = SimulatedRaplLayout::IntelClient(/*mmio_duplicate=*/true);
  layout.root_only_energy = true;
  auto sim = SimulatedRapl::Create(temp.root().string(), layout, Constant(4));
  ASSERT_TRUE(sim.ok());
  struct stat info {};
  ASSERT_EQ(::stat(((*sim)->ZoneDir("package-0") + "/energy_uj").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0400u);
  const std::string mmio = temp.root().string() + "/class/powercap/intel-rapl-mmio:0";
  EXPECT_EQ(Slurp(mmio + "/name"), "package-0\n");
  EXPECT_EQ(Slurp((*sim)->ZoneDir("psys") + "/name"), "psys\n");
  ASSERT_TRUE((*sim)->EnableTruthFile().ok());
  ASSERT_TRUE((*sim)->AdvanceTo(250'000'000).ok());
  // The MMIO zone shows package-0's counter.
  EXPECT_EQ(Slurp(mmio + "/energy_uj"), Slurp((*sim)->ZoneDir("package-0") + "/energy_uj"));
  std::string truth = Slurp(temp.root().string() + "/kwatt_truth");
  EXPECT_NE(truth.find("kwatt-simulated-rapl-truth 1\nupdate 1 250000000\n"), std::string::npos);
  EXPECT_NE(truth.find("package-0 1000000\n"), std::string::npos);
  EXPECT_NE(truth.find("psys 1000000\n"), std::string::npos);
}

TEST(SimulatedRapl, PerfCountsInTwoToTheMinus32Joules) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  SimulatedRaplLayout layout = SimulatedRaplLayout::IntelServer(2);
  auto made = SimulatedRapl::Create(temp.root().string(), layout, Constant(8));
  ASSERT_TRUE(made.ok());
  SimulatedRapl& sim = **made;
  auto perf = sim.perf_events();
  meter::PerfEventSpec spec;
  spec.type = layout.perf_type;
  spec.config = 2;
  spec.cpu = 4;  // package 1
  spec.name = "power/energy-pkg/ on CPU 4";
  Result<int> handle = perf->Open(spec);
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  ASSERT_TRUE(sim.AdvanceTo(2'000'000'000).ok());
  Result<meter::PerfCount> count = perf->Read(*handle);
  ASSERT_TRUE(count.ok());
  // 16 J = 262144 counts of 2^-14 J, << 18.
  EXPECT_EQ(count->value, uint64_t(262144) << 18);
  EXPECT_EQ(count->time_enabled, 2'000'000'000u);
  // Not a CPU of the cpumask, a per-task counter, another PMU: refused as the kernel does.
  spec.cpu = 1;
  EXPECT_EQ(perf->Open(spec).status().code(), Status::Code::kNotFound);
  spec.cpu = 0;
  spec.config = 1;  // energy-cores: no core domain on this layout
  EXPECT_EQ(perf->Open(spec).status().code(), Status::Code::kNotFound);
  sim.SetPerfOpenError(EACCES);
  spec.config = 2;
  Result<int> refused = perf->Open(spec);
  EXPECT_EQ(refused.status().code(), Status::Code::kPermissionDenied);
  EXPECT_NE(refused.status().message().find("perf_event_paranoid"), std::string::npos);
  perf->Close(*handle);
  EXPECT_FALSE(perf->Read(*handle).ok());
}

TEST(SimulatedRapl, RefusesWrongLayouts) {
  kwatt::testing::TempDir temp("kwatt_simrapl");
  SimulatedRaplLayout layout = SimulatedRaplLayout::IntelServer(1);
  layout.zones[1].socket = 3;
  EXPECT_EQ(SimulatedRapl::Create(temp.root().string(), layout, Constant(1)).status().code(),
            Status::Code::kInvalidArgument);
  layout = SimulatedRaplLayout::IntelServer(1);
  layout.SetCounterRange(100);
  EXPECT_FALSE(SimulatedRapl::Create(temp.root().string(), layout, Constant(1)).ok());
  layout = SimulatedRaplLayout::IntelServer(1);
  layout.zones[0].kind = "gpu";
  EXPECT_FALSE(SimulatedRapl::Create(temp.root().string(), layout, Constant(1)).ok());
  layout = SimulatedRaplLayout::IntelServer(1);
  auto sim = SimulatedRapl::Create(temp.root().string(), layout, Constant(-1));
  ASSERT_TRUE(sim.ok());
  EXPECT_FALSE((*sim)->AdvanceTo(1000).ok());
  EXPECT_FALSE(SimulatedRapl::Create(temp.root().string(), layout, Constant(1)).ok())
      << "a second tree over the first";
}

}  // namespace
}  // namespace kwatt::simulate::simulated_rapl_test
