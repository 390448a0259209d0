// The outputs of the power meter: where its IntervalReports go (doc/meter/outputs.md, "Outputs").
//
// Every output is an OutputSink (a ReportSink whose counters survive a restart: a StatefulSink of
// meter.h) that OpenOutput makes from a command-line spec; the meter takes it as
// MeterOutput{sink->Name(), std::move(sink)}:
//
//   csv:PATH            kwatt's CSV: one row per interval, domain and share (`-`: standard output)
//   jsonl:PATH          kwatt's JSON Lines: a header line, one line per interval, an end line
//   influxdb:URL/DB     InfluxDB 1.x line protocol over HTTP (PowerAPI's power_consumption)
//   kwollect:URL        Kwollect's custom metrics: POST /sites/SITE/metrics
//   textfile:PATH       a node exporter's textfile collector: Kwollect's kwollect_custom lines
//   archive:DIR         a kwatt archive (doc/archive_format.md) of the rows pushed to Kwollect
//   powerapi-csv:DIR, powerapi-json:PATH, powerapi-formula-json:PATH
//                       PowerAPI's power (and formula) reports (powerapi_reports.h)
//
// and the Prometheus exposition, served on --listen: a PrometheusExposition (the sink) and its
// http::MetricsServer (BindMetricsServer, bound before the meter's threads start).
//
// Kwollect, InfluxDB, the textfile, the archive and Prometheus share one set of series, named once
// (doc/meter/outputs.md, "Metric names"): per domain its measured power and energy, and its shares
// (idle, unattributed, each target, "other"); the N targets with the most energy lately have series
// of their own, the others are summed as "other", and every energy counter only ever grows,
// whatever targets come and go (OutputOptions::max_targets). Counters are kept as integer
// microjoules and can be saved and restored (SaveState, RestoreState) so that the meter's state
// file makes them survive a restart.
//
// Errors: everything OpenOutput can check is checked before it returns (the spec, the file or
// directory, the URL, the node's name, the peer's answer to a probe), so that a configuration
// error is reported before any thread starts; no output ever prints a credential.
//
// Thread safety: an OutputSink is fed by one thread at a time (ReportSink's contract); its
// SaveState, Stats and Notes may be called from any thread at any time. PrometheusExposition's
// Text and its MetricsServer are safe from any thread.
#ifndef KWATT_METER_OUTPUTS_OUTPUTS_H_
#define KWATT_METER_OUTPUTS_OUTPUTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/version.h"
#include "kwatt/http/metrics_server.h"
#include "kwatt/meter/formulas/report.h"
#include "kwatt/meter/pipeline/fan_out.h"

namespace kwatt::meter {

// The versions of kwatt's own formats (doc/meter/README.md). A version changes when a reader of the
// previous one could misread the new one.
inline constexpr int kCsvFormatVersion = 1;    // its header line is its version's
inline constexpr int kJsonlFormatVersion = 1;  // "version" of its header line
inline constexpr int kStateFormatVersion = 1;  // "version" of SaveState's text

struct OutputOptions {
  // The device id the meter's rows are written under (Kwollect's device_id; the archive's node):
  // a node's uid, "nova-1" (no '.' nor ','). Empty: the machine's host name up to its first '.'.
  std::string node;
  // The node's Grid'5000 site: where Kwollect pushes go when the URL names no site, and the
  // archive's site. Empty: the host name's second label when it ends in ".grid5000.fr"; else
  // "local" for an archive (a kwollect output then needs one).
  std::string site;

  // Targets with series of their own in every output but CSV and JSON Lines (which write every
  // target): the N with the most energy lately; the others are summed as "other". 0: no bound.
  int max_targets = 10;
  // "Lately": each target's energy, all domains together, with this half-life.
  double ranking_half_life_seconds = 60;

  // HTTP outputs (InfluxDB, Kwollect). Rows are sent in requests of at most
  // max_rows_per_request, at the latest flush_seconds after their report (0: at each report).
  double flush_seconds = 5;
  int64_t max_rows_per_request = 5000;
  // Rows kept while the peer cannot take them (down, slow, refusing for a while); beyond, the
  // oldest are dropped and counted (OutputStats::rows_dropped, and the report's Write fails).
  int64_t max_buffered_rows = 200000;
  // After a failed request, the next is tried this long after, the wait doubling up to 60 s
  // (0: at each report).
  double retry_seconds = 1;
  double timeout_seconds = 10;         // one request, whole
  double connect_timeout_seconds = 5;  // connecting
  double finish_seconds = 30;          // how long Finish keeps trying to send what is left
  // Ask the peer at open (InfluxDB: ping, the database; Kwollect: the site): refused credentials
  // or a site that does not exist are errors then. A peer that does not answer is not: rows wait
  // for it (Notes() says so), so that a meter started before its database measures anyway.
  bool probe_peer = true;
  bool verify_tls = true;  // verify HTTPS peers' certificates
  std::string ca_file;     // CA bundle to verify with; empty: the system's
  // python-grid5000's credentials (username, password, uri, verify_ssl) for kwollect:, then
  // KWATT_USERNAME and KWATT_PASSWORD (include/kwatt/kwollect/client_options.h); credentials in
  // the URL win. Empty: ~/.python-grid5000.yaml.
  std::string credentials_file;

  std::string kwatt_version = KwattVersion();  // written in archive manifests

  // Files are flushed at each report (a live meter: readers see each report at once); false:
  // when their buffers fill and at Finish (reading stored reports to the end, several times
  // faster). PowerAPI's formats.
  bool flush_each_report = true;
};

// What an output did so far.
struct OutputStats {
  int64_t reports = 0;       // reports written
  int64_t rows_written = 0;  // rows (lines, points) written or sent
  int64_t rows_pending = 0;  // HTTP outputs: rows waiting to be sent
  int64_t rows_dropped = 0;  // HTTP outputs: rows lost (buffer full, refused by the peer)
  int64_t requests = 0;      // HTTP outputs: requests sent
  int64_t failed_requests = 0;
  std::string last_error;  // the last failure, "" when none
};

// An output of the meter.
class OutputSink : public ReportSink, public StatefulSink {
 public:
  // The spec it was opened from, without credentials ("influxdb:http://db.lab:8086/power"): the
  // name the meter shows it by (MeterOutput::name, MeterHealth::dropped_reports) and keeps its
  // state under.
  virtual std::string Name() const = 0;

  // Its counters (the energy counters of its series) after the last report written, as text for
  // the meter's state file (doc/meter/outputs.md, "Outputs"; it names that report's sequence); ""
  // when it keeps none (CSV, JSON Lines and InfluxDB write each interval's energy only).
  std::string SaveState() const override { return ""; }
  // Before Begin: continue the counters from `state` (SaveState's text; "" restores nothing):
  // the series of domains and targets named there start from their saved values, others from 0.
  // Corruption naming what is wrong when `state` is not such a text (nothing is restored then).
  [[nodiscard]] Status RestoreState(std::string_view state) override { return Status::OK(); }

  virtual OutputStats Stats() const = 0;
  // What a person should know about it, said once at open ("the InfluxDB server at ... does not
  // answer (connection refused): rows wait for it, 200000 at most").
  virtual std::vector<std::string> Notes() const { return {}; }
};

// Opens the output `spec` names (see the top of this file and doc/meter/README.md). Nothing is
// written before Begin; files and directories are created then. Errors, all naming the spec
// (without credentials) and what to write instead:
// - InvalidArgument: an unknown kind, a malformed spec or URL, a file path that is a directory, a
//   directory that does not exist, an archive directory that holds something else, a node name
//   Kwollect would refuse, a kwollect output without a site;
// - PermissionDenied: a file or directory that cannot be written;
// - Unauthenticated, NotFound: the peer refused the credentials, or has no such site; InfluxDB's
//   database is created when missing (as PowerAPI does), an error when that is refused.
Result<std::unique_ptr<OutputSink>> OpenOutput(std::string_view spec, const OutputOptions& options);

// The Prometheus exposition of the meter (text format 0.0.4): at each report it renders the
// whole text, which scrapes then get as it is (a scrape never reads anything: power and energy
// are the meter's own, on its own clock). Families (doc/meter/outputs.md, "Prometheus"):
//   kwatt_meter_domain_energy_joules_total, kwatt_meter_domain_power_watts  {source, domain, kind}
//   kwatt_meter_energy_joules_total, kwatt_meter_power_watts  {source, domain, kind, target, name}
//   the meter's health (ticks, late, missed, lag, reports, dropped reports per output, wraps,
//   resets), kwatt_meter_last_report_timestamp_seconds, kwatt_meter_info.
class PrometheusExposition : public OutputSink {
 public:
  explicit PrometheusExposition(const OutputOptions& options = {});
  ~PrometheusExposition() override;

  Status Begin(const MeterHeader& header) override;
  Status Write(const IntervalReport& report) override;
  Status Finish() override;
  std::string Name() const override { return "prometheus"; }
  std::string SaveState() const override;
  Status RestoreState(std::string_view state) override;
  OutputStats Stats() const override;

  // The text of the last report ("" before the first one, but for the info and health families
  // once Begin has run), as a scrape reads it: a new target's series is shown at 0 until a text
  // showing that 0 was read through Text() (doc/meter/outputs.md, "Prometheus"). Any thread.
  std::string Text() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The HTTP server of --listen: GET /metrics answers the exposition's Text() (kwatt's one
// /metrics endpoint, http::MetricsServer, the collector's too). Bound before the meter's threads
// start (a busy port is a configuration error); then Serve. http::MetricsServer::Bind's errors.
// REQUIRES: `exposition` outlives the server.
Result<std::unique_ptr<http::MetricsServer>> BindMetricsServer(
    const std::string& host, int port, const PrometheusExposition& exposition);

}  // namespace kwatt::meter

#endif  // KWATT_METER_OUTPUTS_OUTPUTS_H_
