// The SNMP v2c driver: snmp://COMMUNITY@HOST[:PORT]/OID (doc/collect.md). Internal to the collect
// part; MakeDevice dispatches the "snmp" scheme here.
//
// One device per (host, port, community): the descriptions given to MakeSnmpDevice share them.
// The community is the URL's user (required); the port defaults to 161; the path is the OID,
// numeric ("1.3.6.1.2.1.1.3.0", a leading '.' accepted): kwatt reads no MIB and no net-snmp
// configuration file, so names (SNMPv2-MIB::sysUpTime.0) are refused.
//
// Templates. An OID may hold one template `{{ PREFIX == VALUE }}` after a numeric part (blanks
// around PREFIX, `==` and VALUE optional; VALUE is the text up to `}}`, blanks around it dropped,
// and may itself hold blanks): walking PREFIX (GETBULK) finds the first entry, in OID order, whose
// value is VALUE (an OCTET STRING compared as its bytes, an integer type as its decimal text, an
// IpAddress as a.b.c.d); the part of that entry's OID after PREFIX replaces the template.
// Kwollect keeps the last match; the two differ only when a table holds VALUE twice. E.g. a
// switch port's 64-bit input octets by the port's name (IF-MIB ifHCInOctets by ifName):
//   snmp://public@sw/1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == TenGigabitEthernet 0/25 }}
// (ifHCOutOctets is ...31.1.1.1.10.{{ same }}). Templates are resolved at the first poll (within
// its deadline; tried again at each poll until one walk succeeds) and again by Refresh() (the
// scheduler calls it every 5 minutes; bounded by SnmpOptions::refresh_timeout). A template whose
// VALUE is not found gives no reading for its metric (the poll is OK) until a later walk finds it.
// A walk that fails keeps the OIDs the previous walk resolved (Kwollect disables them).
//
// A poll sends GETs of the active metrics' OIDs, at most SnmpOptions::max_oids_per_request
// (Kwollect's 50) per request, one after the other; a response too big for the agent (tooBig) is
// asked again in halves. Every reading is timestamped PollRequest::sent_at, the same instant for
// the whole poll (the two outlets of a 2-PSU node then sum in AliasReadings). Values:
//   INTEGER, Gauge32/Unsigned32, Counter32, TimeTicks (hundredths of a second, as sent),
//   Counter64 (rounded to the nearest double above 2^53), Opaque float/double: the number;
//   OCTET STRING: ReadingOf(metric, time, text) (a number's text is the number, else NaN with the
//   text in the label value_str); IpAddress, OBJECT IDENTIFIER: their dotted text (so NaN +
//   value_str); noSuchObject, noSuchInstance, endOfMibView: no reading for that OID (the others
//   are kept). Scale factor and labels as ReadingOf applies them. Two descriptions of one OID
//   both get a reading from one varbind.
//
// Errors (Poll, Refresh): Unavailable naming the device by MetricUrl::Redacted() (never the
// community) and what happened: no answer before the deadline ("timed out"; there are no retries
// beyond the deadline; a v2c agent does not answer a wrong community, so that is a timeout too),
// an unknown host, a send that failed, an error status from the agent (naming the OID it points
// at). A failed poll returns no reading.
//
// PDU outlet power, as a user writes it (OUTLET is the outlet's number, 1-based). Checked against
// public third-party code that reads these agents (NUT drivers, monitoring tools), not against
// the vendors' MIB files themselves, which were not available:
//   Raritan PDU2-MIB measurementsOutletSensorValue (table ...13742.6.5.4.3.1, column 4, index
//   pduId.outletId.sensorType; sensor type 5 = activePower, W), PDU 1:
//     1.3.6.1.4.1.13742.6.5.4.3.1.4.1.OUTLET.5
//   The value is an integer to divide by 10^outletSensorDecimalDigits
//   (1.3.6.1.4.1.13742.6.3.5.4.1.7.1.OUTLET.5); that is 0 for power on the PDUs those tools
//   read, but set scale_factor if yours says otherwise.
//   APC PowerNet-MIB rPDU2OutletMeteredStatusPower (W), metered-by-outlet rack PDUs; the index is
//   the table's row, the outlet's number on a PDU that is not daisy-chained:
//     1.3.6.1.4.1.318.1.1.26.9.4.3.1.7.OUTLET
//   Eaton EATON-EPDU-MIB outletWatts (W), index strappingIndex.outlet, PDU (strapping) 0:
//     1.3.6.1.4.1.534.6.6.7.6.5.1.3.0.OUTLET
//
// Thread safety: a device is used by one thread at a time (device.h); distinct devices run
// concurrently, each with its own net-snmp session (the single-session API). The library is
// initialised once per process (std::call_once) without reading configuration files, MIBs or
// persistent state, and its log goes nowhere (nothing on standard error).
#ifndef KWATT_SRC_COLLECT_SNMP_DEVICE_H_
#define KWATT_SRC_COLLECT_SNMP_DEVICE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/collect/config.h"
#include "kwatt/collect/device.h"
#include "kwatt/core/status.h"

namespace kwatt::collect {

struct SnmpOptions {
  // The budget of the template walks done by Refresh() (a poll's walks have the poll's deadline).
  std::chrono::milliseconds refresh_timeout{10000};
  // OIDs per GET request: Kwollect's 50, which keeps a request and its answer in one datagram.
  int max_oids_per_request = 50;
  // GETBULK max-repetitions while walking a template's prefix.
  int walk_repetitions = 25;
};

// Makes the device for `metrics` (all snmp://, of one host, port and community), with default
// options. InvalidArgument naming the description's origin and the field: no community, a path
// that is not a numeric OID or holds a malformed template, descriptions of different devices.
// No network traffic: the session is opened at the first poll.
Result<std::unique_ptr<Device>> MakeSnmpDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment);
Result<std::unique_ptr<Device>> MakeSnmpDevice(const std::vector<MetricDescription>& metrics,
                                               const DriverEnvironment& environment,
                                               const SnmpOptions& options);

// An SNMP path, parsed: `oid`, or `oid` . {{ template_prefix == template_value }} [. `after`].
struct SnmpPath {
  std::vector<uint32_t> oid;  // the whole OID, or the part before the template
  bool has_template = false;
  std::vector<uint32_t> template_prefix;  // the table walked
  std::string template_value;             // the value looked for
  std::vector<uint32_t> after;            // the components after the template (often none)
};

// Parses a description's path. InvalidArgument saying what is wrong (the text quoted).
Result<SnmpPath> ParseSnmpPath(std::string_view path);

// "1.3.6.1.2.1.1.3.0".
std::string OidText(const std::vector<uint32_t>& oid);

}  // namespace kwatt::collect

#endif  // KWATT_SRC_COLLECT_SNMP_DEVICE_H_
