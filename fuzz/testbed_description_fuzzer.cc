// A testbed description file (doc/store.md, "Describing a testbed"): YAML read as JSON, then every
// field checked. No crash, whatever the text; a description that builds has a site with a cluster
// whose nodes are found by their names.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/core/yaml_json.h"
#include "kwatt/simulate/testbed.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)kwatt::internal::YamlToJson(text, "fuzz");
  std::filesystem::path path = kwatt::fuzz::ScratchDir() / "testbed.yaml";
  kwatt::fuzz::WriteFile(path, text);
  kwatt::simulate::Testbed::Options options;
  options.description_file = path.string();
  auto built = kwatt::simulate::Testbed::Build(options, kwatt::jobs::JobSet());
  if (built.ok()) {
    const auto& sites = (*built)->sites();
    KWATT_FUZZ_CHECK(!sites.empty() && !sites[0]->clusters.empty());
    for (const auto* node : sites[0]->clusters[0]->nodes) {
      KWATT_FUZZ_CHECK((*built)->FindNode(*sites[0], node->uid) == node);
    }
  }
  return 0;
}
