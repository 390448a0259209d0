#include "kwatt/core/node_name.h"

#include <algorithm>
#include <cctype>

#include "kwatt/core/text.h"

namespace kwatt {

std::string NodeName::Cluster() const {
  size_t dash = uid.rfind('-');
  return dash == std::string::npos ? uid : uid.substr(0, dash);
}

namespace {

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// Removes "-ipv6" and "-kavlan-N" suffixes, in any order.
std::string_view StripNetworkSuffixes(std::string_view host) {
  bool changed = true;
  while (changed) {
    changed = false;
    if (EndsWith(host, "-ipv6")) {
      host.remove_suffix(5);
      changed = true;
    }
    size_t at = host.rfind("-kavlan-");
    if (at != std::string_view::npos && at > 0) {
      std::string_view number = host.substr(at + 8);
      if (!number.empty() && std::all_of(number.begin(), number.end(),
                                         [](char c) { return std::isdigit(uint8_t(c)); })) {
        host = host.substr(0, at);
        changed = true;
      }
    }
  }
  return host;
}

bool ValidLabel(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(uint8_t(c)) || c == '-' || c == '_';
  });
}

}  // namespace

Result<NodeName> ParseNodeName(std::string_view text) {
  // DNS names are case-insensitive; Grid'5000's uids and sites are lower case.
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  std::string_view name = lower;
  while (!name.empty() && std::isspace(uint8_t(name.front()))) name.remove_prefix(1);
  while (!name.empty() && std::isspace(uint8_t(name.back()))) name.remove_suffix(1);
  if (EndsWith(name, ".")) name.remove_suffix(1);
  if (EndsWith(name, ".grid5000.fr")) name.remove_suffix(12);
  size_t dot = name.find('.');
  if (name.empty()) return Status::InvalidArgument("empty node name");
  if (dot == std::string_view::npos) {
    return Status::InvalidArgument("node \"" + std::string(text) + "\" has no site: write it as " +
                                   std::string(name) + ".SITE or " + std::string(name) +
                                   ".SITE.grid5000.fr (e.g. nova-1.lyon)");
  }
  std::string_view host = name.substr(0, dot);
  std::string_view site = name.substr(dot + 1);
  if (site.find('.') != std::string_view::npos || !ValidLabel(site) || !ValidLabel(host)) {
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\" is not a Grid'5000 node name (expected uid.site or "
                                   "uid.site.grid5000.fr, e.g. nova-1.lyon.grid5000.fr)");
  }
  NodeName node;
  node.uid = std::string(StripNetworkSuffixes(host));
  node.site = std::string(site);
  // "-ipv6" alone leaves no uid, "-1" no cluster: either would ask the API for "/clusters/".
  if (node.uid.empty() || node.uid.front() == '-' || node.Cluster().empty()) {
    return Status::InvalidArgument("\"" + std::string(text) +
                                   "\" is not a Grid'5000 node name: it has no cluster name "
                                   "before the node number (expected CLUSTER-N.SITE, e.g. "
                                   "nova-1.lyon)");
  }
  return node;
}

Result<std::vector<NodeName>> ParseNodeList(std::string_view text) {
  std::vector<NodeName> nodes;
  for (const std::string& item : SplitCommaList(text)) {
    Result<NodeName> node = ParseNodeName(item);
    if (!node.ok()) return node.status();
    if (std::find(nodes.begin(), nodes.end(), *node) == nodes.end()) nodes.push_back(*node);
  }
  if (nodes.empty()) return Status::InvalidArgument("no node given");
  return nodes;
}

}  // namespace kwatt
