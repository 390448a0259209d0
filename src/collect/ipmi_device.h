// The IPMI driver: ipmisensor://USER:PASS@HOST[:PORT]/SENSOR[?OPTIONS], read by running FreeIPMI's
// ipmi-sensors over LAN 2.0 (RMCP+) against the BMC, as Kwollect does. Internal to the collect
// part (MakeDevice dispatches to MakeIpmiDevice).
//
// One Device per BMC: a poll runs ipmi-sensors once for all of its active metrics and matches
// each metric's SENSOR against the record id (first column) and then the sensor name of every line
// of its output; a reading of "N/A", or a sensor that is not there, gives no reading.
//
// The password is never on a command line (ps shows it to every user) nor in a message: it goes
// to ipmi-sensors in a configuration file (--config-file; mode 0600, in the device's private
// directory, removed when the run ends). The SDR cache is kept between polls in that directory
// (ipmi-sensors' --sdr-cache-recreate remakes it only when the BMC's repository changed or the
// cache is invalid; a run that fails because of the cache anyway is run again once on a flushed
// cache). The poll's deadline bounds the session (--session-timeout) and kills ipmi-sensors.
//
// OPTIONS (the URL's query, `key=value` joined by '&'; the same for every description of the
// device), passed to ipmi-sensors as they are named there:
//   workaround-flags=FLAG[,FLAG...]  e.g. opensesspriv (needed by OpenIPMI's ipmi_sim, and by
//                                    some vendors' BMCs: see ipmi-sensors(8))
//   cipher-suite-id=N                the RMCP+ cipher suite (FreeIPMI's default: 3)
//   privilege-level=user|operator|admin
#ifndef KWATT_SRC_COLLECT_IPMI_DEVICE_H_
#define KWATT_SRC_COLLECT_IPMI_DEVICE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"
#include "kwatt/core/status.h"
#include "src/collect/drivers.h"

namespace kwatt::collect {

// MakeIpmiDevice (src/collect/drivers.h) makes the device of one BMC. InvalidArgument naming the
// description (its origin) for: no metric, a scheme other than ipmisensor, descriptions of
// different BMCs or options, an empty SENSOR, no host, a password or user holding a line break or
// NUL, an unknown option or a bad option value. IOError when the device's directory cannot be
// made.

namespace internal {

// One line of `ipmi-sensors --comma-separated-output --no-header-output`.
struct IpmiSensorLine {
  std::string record_id;  // "2"
  std::string name;       // "PSU1 Power"
  std::string reading;    // "180.00", "N/A"
};

// Parses that output: one line per sensor, "ID,Name,Type,Reading,Units,Event" (a name holding
// commas is rejoined). Lines with fewer fields are skipped.
std::vector<IpmiSensorLine> ParseIpmiSensorsOutput(std::string_view text);

// `value` as one argument of a FreeIPMI configuration file line: in double quotes, with '\', '#'
// and '"' escaped by '\' (FreeIPMI's conffile rules). REQUIRES: no '\n', '\r' or NUL in value.
std::string FreeIpmiConfigArgument(std::string_view value);

}  // namespace internal
}  // namespace kwatt::collect

#endif  // KWATT_SRC_COLLECT_IPMI_DEVICE_H_
