// A collector's metric description file (doc/collect.md, Kwollect's format): YAML read as JSON,
// then every field and URL checked. No crash, whatever the text; a description that parses has a
// name, a device id and a scheme kwatt has a driver for, and its URL parses again from its
// redacted form's parts.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/collect/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto metrics = kwatt::collect::ParseMetricDescriptions(text, "fuzz.yaml");
  if (!metrics.ok()) {
    KWATT_FUZZ_CHECK(metrics.status().message().rfind("fuzz.yaml", 0) == 0);
    return 0;
  }
  for (const auto& metric : *metrics) {
    KWATT_FUZZ_CHECK(!metric.name.empty() && !metric.device_id.empty());
    KWATT_FUZZ_CHECK(!metric.url.scheme.empty() && !metric.url.host.empty());
    KWATT_FUZZ_CHECK(metric.update_every_ms >= 1 && metric.PeriodMs() >= 1);
    std::string labels = kwatt::collect::LabelsText(metric.labels);
    KWATT_FUZZ_CHECK(labels.front() == '{' && labels.back() == '}');
    if (!metric.url.password.empty()) {
      KWATT_FUZZ_CHECK(metric.url.Redacted().find(":***@") != std::string::npos);
    }
  }
  return 0;
}
