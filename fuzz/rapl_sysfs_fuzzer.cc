// The RAPL sources' parsers of outside input (src/meter/sources/rapl_internal.h), the first byte
// choosing: 0 a sysfs number, then the counter layout inferred from it; 1 a perf event's config; 2
// a perf .scale; 3 a CPU list; 4 the saved counters of a powercap source (its state file), resumed
// on a simulated machine and read. Properties: a number reads back as its digits; a known layout
// gives back the maximum it was inferred from and every count from its energy_uj; a power-of-two
// scale converts 2^shift counts to one joule; a CPU list is not empty; saved counters are accepted
// or refused (InvalidArgument) and the source reads after either.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kwatt/meter/sources/rapl.h"
#include "kwatt/simulate/simulated_rapl.h"
#include "src/meter/sources/rapl_internal.h"

namespace {

using namespace kwatt::meter;
using namespace kwatt::meter::rapl_internal;
using namespace kwatt::simulate;

// A simulated machine opened once (the saved counters' harness resumes on it).
struct Machine {
  std::unique_ptr<SimulatedRapl> sim;
  std::unique_ptr<EnergySource> source;
  Machine() {
    auto made = SimulatedRapl::Create((kwatt::fuzz::ScratchDir() / "machine").string(),
                                      SimulatedRaplLayout::IntelServer(2),
                                      [](const std::string&, int64_t) { return 10.0; });
    KWATT_FUZZ_CHECK(made.ok());
    sim = std::move(*made);
    MeterEnvironment environment;
    environment.sysfs_root = sim->root();
    RaplOptions options;
    options.path = RaplPath::kPowercap;
    auto opened = OpenRapl(environment, options);
    KWATT_FUZZ_CHECK(opened.ok());
    source = std::move(*opened);
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 5) {
    case 0: {
      kwatt::Result<uint64_t> value = ParseSysfsUnsigned(text);
      if (!value.ok()) return 0;
      std::string_view digits = text;
      if (!digits.empty() && digits.back() == '\n') digits.remove_suffix(1);
      while (digits.size() > 1 && digits.front() == '0') digits.remove_prefix(1);
      KWATT_FUZZ_CHECK(std::to_string(*value) == digits);
      if (*value == 0) return 0;
      CounterLayout layout = InferCounterLayout(*value);
      KWATT_FUZZ_CHECK(layout.range > 0);
      if (!layout.known) return 0;
      KWATT_FUZZ_CHECK(MaxEnergyRange(layout.range, layout.reported_unit) == *value);
      for (uint64_t count : {uint64_t(0), uint64_t(1), layout.range / 3, layout.range - 1}) {
        uint64_t reported = uint64_t(CountToMicrojoules(count, layout.reported_unit));
        KWATT_FUZZ_CHECK(RawCount(reported, layout) == count);
      }
      return 0;
    }
    case 1:
      (void)ParsePerfEventConfig(text);
      return 0;
    case 2: {
      kwatt::Result<PerfScale> scale = ParsePerfScale(text);
      if (scale.ok() && scale->power_of_two) {
        KWATT_FUZZ_CHECK(scale->shift >= 0 && scale->shift <= 55);
        if (scale->shift < 64) {
          KWATT_FUZZ_CHECK(PerfCountToMicrojoules(uint64_t(1) << scale->shift, *scale) ==
                           1'000'000);
        }
      } else if (scale.ok()) {
        (void)PerfCountToMicrojoules(~uint64_t(0), *scale);
      }
      return 0;
    }
    case 3: {
      kwatt::Result<std::vector<int>> cpus = ParseCpuList(text);
      if (cpus.ok()) KWATT_FUZZ_CHECK(!cpus->empty());
      return 0;
    }
    default: {
      static Machine machine;
      kwatt::Status resumed = machine.source->ResumeCounters(text, std::chrono::seconds(3));
      KWATT_FUZZ_CHECK(resumed.ok() || resumed.code() == kwatt::Status::Code::kInvalidArgument);
      std::vector<DomainReading> readings;
      KWATT_FUZZ_CHECK(machine.source->Read(&readings).ok());
      KWATT_FUZZ_CHECK(readings.size() == 4);
      return 0;
    }
  }
}
