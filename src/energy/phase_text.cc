#include "kwatt/energy/phase_text.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "kwatt/core/node_name.h"

namespace kwatt::energy {
namespace {

// Seconds after the window's start, "+300" or "+12.5"; nullopt for anything that does not start
// with '+'; InvalidArgument for a '+' without a number of seconds.
Result<std::optional<double>> ParseOffset(const std::string& text) {
  if (text.empty() || text[0] != '+') return std::optional<double>();
  char* end = nullptr;
  const double seconds = std::strtod(text.c_str() + 1, &end);
  // (At most 30 years: an offset in nanoseconds must fit.)
  if (text.size() < 2 || *end != '\0' || !std::isfinite(seconds) || seconds < 0 || seconds > 1e9 ||
      !std::isdigit(uint8_t(text[1]))) {
    return Status::InvalidArgument("'" + text + "' is no offset: expected +SECONDS after the " +
                                   "window's start (+300, +12.5)");
  }
  return std::optional<double>(seconds);
}

}  // namespace

Result<Interval> ParsePhase(const std::string& text, UnixNanos now,
                            std::optional<UnixNanos> origin) {
  size_t eq = text.find('='), dots = text.find("..");
  if (eq == std::string::npos || dots == std::string::npos || dots < eq || eq == 0) {
    return Status::InvalidArgument("--phase " + text + ": expected NAME=START..END");
  }
  const std::string from = text.substr(eq + 1, dots - eq - 1), to = text.substr(dots + 2);
  Result<std::optional<double>> from_offset = ParseOffset(from), to_offset = ParseOffset(to);
  if (!from_offset.ok()) return from_offset.status().WithContext("--phase " + text);
  if (!to_offset.ok()) return to_offset.status().WithContext("--phase " + text);
  if (from_offset->has_value() != to_offset->has_value()) {
    return Status::InvalidArgument("--phase " + text +
                                   ": give both ends as times or both as +SECONDS offsets");
  }
  if (from_offset->has_value()) {
    if (!origin) {
      return Status::InvalidArgument("--phase " + text +
                                     ": offsets (+SECONDS) are kwatt energy's; give times here");
    }
    Interval phase{text.substr(0, eq), *origin + UnixNanos(**from_offset * 1e9),
                   *origin + UnixNanos(**to_offset * 1e9)};
    KWATT_RETURN_IF_ERROR(CheckPhases({phase}).WithContext("--phase " + text));
    return phase;
  }
  Result<UnixNanos> a = ParseUserTime(from, now);
  Result<UnixNanos> b = ParseUserTime(to, now);
  if (!a.ok()) return a.status().WithContext("--phase " + text);
  if (!b.ok()) return b.status().WithContext("--phase " + text);
  Interval phase{text.substr(0, eq), *a, *b};
  KWATT_RETURN_IF_ERROR(CheckPhases({phase}).WithContext("--phase " + text));
  return phase;
}

Result<Role> ParseRole(const std::string& text) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status::InvalidArgument("--role " + text + ": expected NAME=NODE,NODE...");
  }
  Result<std::vector<NodeName>> nodes = ParseNodeList(text.substr(eq + 1));
  if (!nodes.ok()) return nodes.status().WithContext("--role " + text);
  Role role{text.substr(0, eq), {}};
  for (const auto& node : *nodes) role.nodes.push_back(node.Fqdn());
  return role;
}

Status ParsePhasesAndRoles(const std::vector<std::string>& phases,
                           const std::vector<std::string>& roles, UnixNanos now,
                           std::optional<UnixNanos> origin, std::vector<Interval>* phases_out,
                           std::vector<Role>* roles_out) {
  for (const std::string& text : phases) {
    KWATT_ASSIGN_OR_RETURN(Interval phase, ParsePhase(text, now, origin));
    phases_out->push_back(std::move(phase));
  }
  for (const std::string& text : roles) {
    KWATT_ASSIGN_OR_RETURN(Role role, ParseRole(text));
    roles_out->push_back(std::move(role));
  }
  return Status::OK();
}

Result<std::map<std::string, StatedAccuracy>> ParseStatedAccuracies(
    const std::vector<std::string>& texts) {
  std::map<std::string, StatedAccuracy> out;
  for (const std::string& text : texts) {
    Result<std::pair<std::string, StatedAccuracy>> accuracy = ParseStatedAccuracy(text);
    if (!accuracy.ok()) return accuracy.status();
    out[accuracy->first] = accuracy->second;
  }
  return out;
}

}  // namespace kwatt::energy
