// hwpc-sensor's CSV directory (src/meter/powerapi/hwpc.cc): the input is two files, core.csv and
// rapl.csv, separated by "\n@@rapl@@\n". No crash whatever they hold; when every report reads, they
// are written again (HwpcCsvWriter) and read back the same.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kwatt/meter/powerapi/hwpc.h"

using kwatt::meter::HwpcReport;

namespace {

bool ReadAll(const std::string& dir, std::vector<HwpcReport>* out) {
  auto reader = kwatt::meter::OpenHwpcCsvDirectory(dir);
  if (!reader.ok()) return false;
  HwpcReport r;
  while (true) {
    auto more = (*reader)->Next(&r);
    if (!more.ok()) return false;
    if (!*more) return true;
    out->push_back(r);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto [core, rapl] = kwatt::fuzz::SplitInput(input, "\n@@rapl@@\n");
  const std::filesystem::path dir = kwatt::fuzz::ScratchDir() / "in";
  const std::filesystem::path out = kwatt::fuzz::ScratchDir() / "out";
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::filesystem::remove_all(out, ignored);
  std::filesystem::create_directories(dir);
  kwatt::fuzz::WriteFile(dir / "core.csv", core);
  if (!rapl.empty()) kwatt::fuzz::WriteFile(dir / "rapl.csv", rapl);
  std::vector<HwpcReport> reports;
  if (!ReadAll(dir.string(), &reports) || reports.empty()) return 0;
  auto writer = kwatt::meter::HwpcCsvWriter::Open(out.string());
  KWATT_FUZZ_CHECK(writer.ok());
  for (const HwpcReport& r : reports) {
    // A name the writer refuses (a group that cannot name a file) ends the check.
    if (!(*writer)->Write(r).ok()) return 0;
  }
  KWATT_FUZZ_CHECK((*writer)->Close().ok());
  std::vector<HwpcReport> again;
  KWATT_FUZZ_CHECK(ReadAll(out.string(), &again));
  KWATT_FUZZ_CHECK(again.size() == reports.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    KWATT_FUZZ_CHECK(again[i].timestamp_ms == reports[i].timestamp_ms);
    KWATT_FUZZ_CHECK(again[i].target == reports[i].target);
    KWATT_FUZZ_CHECK(again[i].counters.size() == reports[i].counters.size());
    for (size_t c = 0; c < reports[i].counters.size(); ++c) {
      KWATT_FUZZ_CHECK(again[i].counters[c].events == reports[i].counters[c].events);
    }
  }
  return 0;
}
