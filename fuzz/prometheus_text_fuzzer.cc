// The Prometheus text exposition (kwatt/collect/prometheus_text.h): no crash whatever the text;
// a text that reads reads the same samples again when its samples are written back one per line.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "kwatt/collect/prometheus_text.h"

namespace {

using kwatt::collect::PrometheusSample;

std::string Written(const std::vector<PrometheusSample>& samples) {
  std::string out;
  for (const PrometheusSample& s : samples) {
    out += s.name;
    out += '{';
    for (const auto& [name, value] : s.labels) {
      out += name + "=\"";
      for (char c : value) {
        if (c == '\\' || c == '"') out += '\\';
        if (c == '\n') {
          out += "\\n";
          continue;
        }
        out += c;
      }
      out += "\",";
    }
    char number[64];
    std::snprintf(number, sizeof number, "} %.17g", s.value);
    out += number;
    if (s.timestamp_ms) out += " " + std::to_string(*s.timestamp_ms);
    out += '\n';
  }
  return out;
}

bool Same(const PrometheusSample& a, const PrometheusSample& b) {
  return a.name == b.name && a.labels == b.labels && a.timestamp_ms == b.timestamp_ms &&
         (a.value == b.value || (std::isnan(a.value) && std::isnan(b.value)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<PrometheusSample> first;
  kwatt::Status read = kwatt::collect::ReadPrometheusText(text, [&](const PrometheusSample& s) {
    first.push_back(s);
    return kwatt::Status::OK();
  });
  if (!read.ok()) return 0;
  std::vector<PrometheusSample> again;
  kwatt::Status reread =
      kwatt::collect::ReadPrometheusText(Written(first), [&](const PrometheusSample& s) {
        again.push_back(s);
        return kwatt::Status::OK();
      });
  KWATT_FUZZ_CHECK(reread.ok());
  KWATT_FUZZ_CHECK(again.size() == first.size());
  for (size_t i = 0; i < first.size(); ++i) KWATT_FUZZ_CHECK(Same(first[i], again[i]));
  return 0;
}
