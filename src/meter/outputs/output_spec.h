// The meter's output specs as the command line gives them (`csv:PATH`, `influxdb:URL/DB`...),
// parsed without touching anything: what OpenOutput checks first, and what the output_spec fuzz
// harness feeds. Internal to the meter part.
//
// Pure functions; thread-safe.
#ifndef KWATT_SRC_METER_OUTPUTS_OUTPUT_SPEC_H_
#define KWATT_SRC_METER_OUTPUTS_OUTPUT_SPEC_H_

#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::meter::internal {

// An http:// or https:// URL: scheme://[USER[:PASSWORD]@]HOST[:PORT][/PATH][?QUERY].
struct HttpUrl {
  std::string scheme;    // "http" or "https"
  std::string username;  // percent-decoded; "" when none
  std::string password;  // percent-decoded; never shown
  std::string host;      // without the brackets of an IPv6 address
  int port = 0;          // 0: none given
  std::string path;      // without its leading '/', nor a trailing one
  std::string query;     // after '?', as written

  // "scheme://host[:port]" ("[::1]" for IPv6).
  std::string Origin() const;
  // Origin(), then "/" and the path when there is one: no credentials, no query.
  std::string Shown() const;
};

// InvalidArgument saying what is wrong (no scheme, another scheme than http or https, no host, a
// port that is not 1..65535, a fragment), never repeating the password.
Result<HttpUrl> ParseHttpUrl(std::string_view text);

enum class OutputKind {
  kCsv,
  kJsonl,
  kInfluxdb,
  kKwollect,
  kTextfile,
  kArchive,
  kPowerApiCsv,          // PowerAPI's CSV output directory (powerapi_reports.h)
  kPowerApiJson,         // PowerAPI's power reports as JSON lines
  kPowerApiFormulaJson,  // PowerAPI's formula reports as JSON lines
};

struct OutputSpec {
  OutputKind kind = OutputKind::kCsv;
  std::string path;  // csv, jsonl ("-": standard output), textfile, archive, powerapi-*
  // influxdb, kwollect: the server. kwollect: the API's base URL (".../stable"), empty when the
  // spec gave none (the credentials file's, else Grid'5000's).
  HttpUrl url;
  bool has_url = false;
  std::string database;  // influxdb
  std::string site;      // kwollect: the site the URL ends with (".../sites/lyon"), "" when none
  std::string shown;     // the spec without credentials, for messages and Name()
};

// InvalidArgument naming the spec (without credentials) and what to write instead.
Result<OutputSpec> ParseOutputSpec(std::string_view spec);

}  // namespace kwatt::meter::internal

#endif  // KWATT_SRC_METER_OUTPUTS_OUTPUT_SPEC_H_
