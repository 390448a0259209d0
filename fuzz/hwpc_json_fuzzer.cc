// hwpc-sensor's JSON documents (src/meter/powerapi/hwpc.cc): the splitter fed the input whole and
// in pieces of 1-7 bytes (the first byte picks the size) finds the same documents; each that parses
// as a report is written back (FormatHwpcJson) to text that parses to the same report.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kwatt/meter/powerapi/hwpc.h"

using kwatt::meter::HwpcReport;
using kwatt::meter::JsonDocumentSplitter;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 7;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::vector<std::pair<std::string, int64_t>> whole, pieces;
  JsonDocumentSplitter a(4096), b(4096);
  a.Feed(input, &whole);
  for (size_t at = 0; at < input.size(); at += piece) b.Feed(input.substr(at, piece), &pieces);
  KWATT_FUZZ_CHECK(whole == pieces);
  KWATT_FUZZ_CHECK(a.Pending() == b.Pending());
  KWATT_FUZZ_CHECK(a.stray_runs() == b.stray_runs());
  for (const auto& [text, line] : whole) {
    KWATT_FUZZ_CHECK(line >= 1);
    HwpcReport report;
    if (!kwatt::meter::ParseHwpcJson(text, "fuzz", &report).ok()) continue;
    HwpcReport again;
    std::string written = kwatt::meter::FormatHwpcJson(report);
    KWATT_FUZZ_CHECK(kwatt::meter::ParseHwpcJson(written, "again", &again).ok());
    KWATT_FUZZ_CHECK(again.timestamp_ms == report.timestamp_ms);
    KWATT_FUZZ_CHECK(again.sensor == report.sensor && again.target == report.target);
    KWATT_FUZZ_CHECK(again.counters.size() == report.counters.size());
    for (size_t i = 0; i < report.counters.size(); ++i) {
      KWATT_FUZZ_CHECK(again.counters[i].group == report.counters[i].group);
      KWATT_FUZZ_CHECK(again.counters[i].socket == report.counters[i].socket);
      KWATT_FUZZ_CHECK(again.counters[i].cpu == report.counters[i].cpu);
      KWATT_FUZZ_CHECK(again.counters[i].events == report.counters[i].events);
    }
  }
  return 0;
}
