// Node names (FQDN, KaVLAN, IPv6, uid.site, lists): no crash; a parsed name has a uid, a site and
// a cluster, and its FQDN parses back to the same node.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/core/node_name.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  kwatt::Result<kwatt::NodeName> node = kwatt::ParseNodeName(text);
  if (node.ok()) {
    KWATT_FUZZ_CHECK(!node->uid.empty() && !node->site.empty() && !node->Cluster().empty());
    kwatt::Result<kwatt::NodeName> again = kwatt::ParseNodeName(node->Fqdn());
    KWATT_FUZZ_CHECK(again.ok() && *again == *node);
  }
  (void)kwatt::ParseNodeList(text);
  return 0;
}
