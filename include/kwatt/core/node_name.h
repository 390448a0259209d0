// Grid'5000 node names as users write them, and the Kwollect device id they stand for.
//
// Accepted: "nova-1.lyon.grid5000.fr" (FQDN), "nova-1-kavlan-4.lyon.grid5000.fr" and
// "nova-1-ipv6.lyon.grid5000.fr" (KaVLAN and IPv6 names, mapped back to the node), and
// "nova-1.lyon" (uid.site). A bare uid has no site and is refused with a hint.
// Pure functions; thread-safe.
#ifndef KWATT_KWOLLECT_NODE_NAME_H_
#define KWATT_KWOLLECT_NODE_NAME_H_

#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"

namespace kwatt::kwollect {

using kwatt::NodeName;  // the type is core's (kwatt/core/row_sink.h)

Result<NodeName> ParseNodeName(std::string_view text);
// Parses a comma-separated list (spaces allowed), keeping the first occurrence of duplicates.
Result<std::vector<NodeName>> ParseNodeList(std::string_view text);

}  // namespace kwatt::kwollect

#endif  // KWATT_KWOLLECT_NODE_NAME_H_
