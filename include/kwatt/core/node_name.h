// Node names as users write them, and the node (its uid and site) they stand for: how every part
// of kwatt names a node (Grid'5000's naming, which kwatt's own server and meter take up too).
//
// Accepted: "nova-1.lyon.grid5000.fr" (FQDN), "nova-1-kavlan-4.lyon.grid5000.fr" and
// "nova-1-ipv6.lyon.grid5000.fr" (KaVLAN and IPv6 names, mapped back to the node), and
// "nova-1.lyon" (uid.site). A bare uid has no site and is refused with a hint.
// Pure functions; thread-safe.
#ifndef KWATT_CORE_NODE_NAME_H_
#define KWATT_CORE_NODE_NAME_H_

#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt {

// A node: its uid (the device id of its metrics) and its site. Parsing what users write
// ("nova-1.lyon.grid5000.fr", KaVLAN and IPv6 names...) is ParseNodeName's.
struct NodeName {
  std::string uid;   // "nova-1": the device id its metrics carry
  std::string site;  // "lyon"

  std::string Fqdn() const { return uid + "." + site + ".grid5000.fr"; }
  // The cluster part of the uid: "nova" for "nova-1".
  std::string Cluster() const;
  bool operator==(const NodeName&) const = default;
};

Result<NodeName> ParseNodeName(std::string_view text);
// Parses a comma-separated list (spaces allowed), keeping the first occurrence of duplicates.
Result<std::vector<NodeName>> ParseNodeList(std::string_view text);

}  // namespace kwatt

#endif  // KWATT_CORE_NODE_NAME_H_
