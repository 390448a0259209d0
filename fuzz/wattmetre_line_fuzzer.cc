// The wattmeter's line stream (src/collect/wattmetre.h): no crash whatever the line; the first
// byte picks the version (even: 2, odd: 3). A line that reads has exactly the ports its fields
// say, each value the double from_chars reads from the field (the fast path agrees with it),
// and its time written back as SECONDS.NANOSECONDS reads as the same instant.
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "src/collect/wattmetre.h"

namespace {

using kwatt::collect::ParseWattmetreLine;
using kwatt::collect::WattmetreEntry;
using kwatt::collect::WattmetreLine;

std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> fields;
  while (true) {
    size_t comma = line.find(',');
    fields.push_back(line.substr(0, comma));
    if (comma == std::string_view::npos) return fields;
    line.remove_prefix(comma + 1);
  }
}

std::string_view Trim(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  int version = (data[0] & 1) ? 3 : 2;
  std::string_view line(reinterpret_cast<const char*>(data) + 1, size - 1);
  WattmetreEntry entry;
  if (ParseWattmetreLine(line, version, &entry) != WattmetreLine::kEntry) return 0;
  KWATT_FUZZ_CHECK(entry.time >= 0);
  KWATT_FUZZ_CHECK(entry.values.size() == entry.has_value.size());
  std::vector<std::string_view> fields = Fields(Trim(line));
  size_t first = version == 2 ? 4 : 6;
  size_t step = version == 2 ? 1 : 2;
  size_t ports = version == 2 ? fields.size() - 4 : (fields.size() - 11) / 2;
  KWATT_FUZZ_CHECK(entry.port_count() == ports);
  for (size_t i = 0; i < ports; ++i) {
    std::string_view field = Trim(fields[first + step * i]);
    KWATT_FUZZ_CHECK(bool(entry.has_value[i]) == !field.empty());
    if (field.empty()) continue;
    if (field.front() == '+') field.remove_prefix(1);
    double expected = 0;
    auto [end, error] = std::from_chars(field.data(), field.data() + field.size(), expected);
    KWATT_FUZZ_CHECK(error == std::errc() && end == field.data() + field.size());
    KWATT_FUZZ_CHECK(std::isfinite(entry.values[i]));
    KWATT_FUZZ_CHECK(entry.values[i] == expected);
    KWATT_FUZZ_CHECK(std::signbit(entry.values[i]) == std::signbit(expected));
  }
  // The time, written back exactly, reads the same.
  char text[96];
  std::snprintf(text, sizeof text, "%" PRId64 ".%09" PRId64, entry.time / 1000000000,
                entry.time % 1000000000);
  std::string again = version == 2 ? std::string("d,d,") + text + ",OK,1"
                                   : std::string(text) + ",true,a,b,c,d,1,x,1,2,3,4,5";
  WattmetreEntry reread;
  KWATT_FUZZ_CHECK(ParseWattmetreLine(again, version, &reread) == WattmetreLine::kEntry);
  KWATT_FUZZ_CHECK(reread.time == entry.time);
  return 0;
}
