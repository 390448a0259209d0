// The collector's configuration: Kwollect's metric description files (doc/collect.md), read so
// that an existing Kwollect configuration works unchanged.
//
// A directory of files, every one read (in name order; no extension filter, as Kwollect; hidden
// files and `*~`/`*.bak`/`*.dpkg-*` leftovers skipped); each is YAML holding one description (a
// mapping) or a list of them; an empty file is allowed. A description's fields: `name`,
// `device_id`, `url` (required), `update_every` (milliseconds, default 10000), `optional`
// (default false), `optional_period` (milliseconds while promoted; default `update_every`),
// `labels` (a mapping; `_device_alias` names the node a device measures), `scale_factor`; and,
// for kwatt's wattmeter stream only (`wattmetre://`), `command` (a list: the program whose output
// is the stream) and `mapping` (Kwollect's wattmeter mapping file, relative to the description's
// file: each node and its ports).
//
// Pure functions; thread-safe.
#ifndef KWATT_COLLECT_CONFIG_H_
#define KWATT_COLLECT_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/status.h"

namespace kwatt::collect {

// A row's labels: (key, the value's JSON text) pairs, e.g. {"interface", "\"eth0\""}.
using Labels = std::vector<std::pair<std::string, std::string>>;

// The labels object's text as Kwollect writes it (PostgreSQL's jsonb): keys shorter first, then
// in byte order; a key given twice keeps its last value; no blanks: {"psu":"1","interface":"eth0"}.
std::string LabelsText(Labels labels);

// A metric's `url`, parsed: scheme://[USER[:PASSWORD]@]HOST[:PORT]/PATH[?QUERY][#FRAGMENT] (user,
// password, path and fragment percent-decoded).
struct MetricUrl {
  std::string scheme;    // "snmp", "ipmisensor", "prometheus", "wattmetre", "json"
  std::string user;      // SNMP: the community
  std::string password;  // never written to logs, the store or the API: see Redacted()
  std::string host;
  int port = 0;          // 0: the scheme's default
  std::string path;      // without the leading '/'
  std::string query;     // after '?', kept as written
  std::string fragment;  // after '#', percent-decoded (json://: the JSON pointer of the value)

  // The URL with the password replaced by "***" (and an SNMP community too): what messages show.
  std::string Redacted() const;
  // What one device is: the scheme, host, port and credentials (descriptions with equal keys are
  // polled together, as Kwollect groups them).
  std::string DeviceKey() const;

  bool operator==(const MetricUrl&) const = default;
};

// Parses `text` as a MetricUrl. InvalidArgument saying what is wrong (no scheme, no host, a port
// that is not a number in 1..65535, a bad percent escape) without repeating the password.
Result<MetricUrl> ParseMetricUrl(std::string_view text);

// One metric description.
struct MetricDescription {
  std::string name;       // the metric id written ("wattmetre_power_watt")
  std::string device_id;  // the device id written ("nova-1", "gros-pdu2-port-1")
  MetricUrl url;
  int64_t update_every_ms = 10000;
  bool optional = false;           // polled only while a job promotes it
  int64_t optional_period_ms = 0;  // its period while promoted (0: update_every_ms)
  Labels labels;                   // in the file's order, `_device_alias` included
  std::string device_alias;        // labels' `_device_alias` when it is a string, else empty
  std::optional<double> scale_factor;
  std::string origin;  // where it was read: "metrics/pdu.yaml, entry 3"
  // wattmetre:// only: the program (argv) whose standard output is the stream, when not a path.
  std::vector<std::string> command;
  // wattmetre:// only: the mapping file's path (made absolute), empty when none.
  std::string mapping_file;

  // The period it is polled at: optional_period_ms when optional and set, else update_every_ms.
  int64_t PeriodMs() const;
};

struct CollectConfig {
  std::vector<MetricDescription> metrics;  // in file order, then entry order
  std::vector<std::string> files;          // the files read
};

// Parses one description file's text. `file` names it in errors. InvalidArgument naming the
// file, the entry (1-based) and the field: a missing or empty required field, an unknown field, a
// field of the wrong type, a period that is not a whole number of milliseconds in
// 1..86,400,000, a URL that does not parse or whose scheme kwatt has no driver for, labels that
// are not a mapping. The password of a URL never appears in an error.
Result<std::vector<MetricDescription>> ParseMetricDescriptions(std::string_view text,
                                                               std::string_view file);

// Reads every description file of `dir` (see above). Besides the errors of
// ParseMetricDescriptions: NotFound when `dir` is not a directory; InvalidArgument when no file
// holds a description, or when two descriptions write the same (device_id, name, labels) from
// different URLs (naming both).
Result<CollectConfig> ReadCollectConfig(const std::string& dir);

}  // namespace kwatt::collect

#endif  // KWATT_COLLECT_CONFIG_H_
