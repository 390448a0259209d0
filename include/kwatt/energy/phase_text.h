// Phases, roles and stated accuracies as users write them (`--phase busy=+300..+600`, `--role
// servers=nova-1,nova-2`, `--accuracy wattmetre_power_watt=1%+0.5`): the CLI's options and the
// report's request (kwatt/report/report.h) are parsed here, once.
//
// Thread safety: free functions of their arguments only.
#ifndef KWATT_ENERGY_PHASE_TEXT_H_
#define KWATT_ENERGY_PHASE_TEXT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/energy/energy.h"
#include "kwatt/energy/source_check.h"

namespace kwatt::energy {

// "busy=2025-04-18T14:05:00+02:00..2025-04-18T14:10:00+02:00" (times as ParseUserTime reads them,
// relative ones after `now`), or offsets after the window's start `origin`: "busy=+300..+600"
// (refused without an origin: stats knows no window before it reads). InvalidArgument naming the
// text ("--phase TEXT: ...").
Result<Interval> ParsePhase(const std::string& text, UnixNanos now,
                            std::optional<UnixNanos> origin);

// "servers=nova-1,nova-2.lyon": the nodes' full names. InvalidArgument naming the text.
Result<Role> ParseRole(const std::string& text);

// Every phase and role of `phases` and `roles` (ParsePhase, ParseRole), in order.
Status ParsePhasesAndRoles(const std::vector<std::string>& phases,
                           const std::vector<std::string>& roles, UnixNanos now,
                           std::optional<UnixNanos> origin, std::vector<Interval>* phases_out,
                           std::vector<Role>* roles_out);

// "METRIC=P%+WW" each (ParseStatedAccuracy), by metric; ParseStatedAccuracy's InvalidArgument.
Result<std::map<std::string, StatedAccuracy>> ParseStatedAccuracies(
    const std::vector<std::string>& texts);

}  // namespace kwatt::energy

#endif  // KWATT_ENERGY_PHASE_TEXT_H_
