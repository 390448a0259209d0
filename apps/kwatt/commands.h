// The subcommands of the kwatt CLI, each in its own file.
#ifndef KWATT_APPS_KWATT_COMMANDS_H_
#define KWATT_APPS_KWATT_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/core/text.h"
#include "kwatt/energy/energy.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/kwollect/fetch.h"
#include "kwatt/meter/formulas/smartwatts.h"
#include "kwatt/store/open_store.h"

namespace kwatt::archive {
struct LoadOptions;
}  // namespace kwatt::archive

namespace kwatt::cli {

// Exit statuses (doc/errors.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int ExitCodeOf(const Status& status);

// CLI11 check of a path option: an empty value ("-o ''") is refused (exit 2 naming the option)
// instead of meaning stdout or the current directory.
CLI::Validator NonEmptyPath();
// A number from `low` to `high` (a whole one when `integer`); NaN, infinities and text refused,
// naming the range.
CLI::Validator NumberIn(double low, double high, bool integer);

// The query arguments shared by fetch, backup, energy and stats.
struct QueryArgs {
  std::string nodes, start, end, job, metrics, api, config;
  bool summary = false;
  bool custom_metrics = false;  // --metrics may name metrics no catalogue lists
  // Unset: the client options' defaults. Set: taken as given and checked by
  // kwollect::ValidateClientOptions (exit 2 naming the option).
  std::optional<int> concurrency, per_site, retries;
  std::optional<double> backoff;
  std::optional<int64_t> rows_per_request;
};
void AddQueryOptions(CLI::App* command, QueryArgs* args);
// The client options: the credentials file's (--config, else the default one), then those given;
// InvalidArgument naming the option when one is wrong.
Status ResolveClientOptions(const QueryArgs& args, kwollect::ClientOptions* options);
// Builds the query and client options; InvalidArgument naming the option when one is wrong.
Status ResolveQuery(const QueryArgs& args, kwollect::FetchQuery* query,
                    kwollect::ClientOptions* options);

// A store's URI as it may be shown: no password (kwatt/store/open_store.h).
using store::ShownStoreUri;

// A duration as given on the command line: "90" or "90s" (seconds), "250ms", "10m", "2h", "1.5h",
// "1d": seconds. Every command's durations are read by this one parser. InvalidArgument naming
// `option` when it is not a positive duration.
Result<double> ParseDuration(const std::string& text, const char* option);

// "HOST:PORT" (or ":PORT", "PORT": 127.0.0.1; "[::1]:PORT" for IPv6, the host then "::1"): an
// address to listen on; port 0 picks a free one.
// InvalidArgument naming `option` otherwise.
Status ParseListen(const std::string& text, std::string* host, int* port,
                   const char* option = "--listen");

// --idle-power's "package=12.5,dram=2" (repeatable): idle power in watts by domain kind or name.
// InvalidArgument naming the item that is not DOMAIN=WATTS (watts >= 0).
Result<std::map<std::string, double>> ParseIdlePower(const std::vector<std::string>& given);

// Prints "kwatt COMMAND: MESSAGE" on stderr and returns the exit status of `status`.
int Fail(const char* command, const Status& status);

// "1.2 MB": bytes for people (powers of 1000).
std::string HumanBytes(double bytes);

// The rows of energy and stats: an archive directory's (rows::FeedSource) when `archive_dir` is
// given, else those of the query (kwollect::Fetch). `metrics` narrows the rows read (empty: all).
// `metrics_are_candidates`: metrics no node reports are not an error (kwollect::FetchQuery::
// check_metrics false), for energy's list of power sources. `with_archives`: other archives of
// the same nodes read with it (rows::RowSource::with_archives; `kwatt energy --with-archive`).
// `margin`: rows read this far beyond the window (kwollect::FetchQuery::margin; an energy's:
// energy::EnergyFetchMargin). Several runs are read by report::ReadRun instead.
Result<RowsReport> RunSource(const std::string& archive_dir, const QueryArgs& args,
                             const std::vector<std::string>& metrics, RowSink* sink,
                             const ProgressCallback& progress, bool metrics_are_candidates = false,
                             const std::vector<std::string>& with_archives = {},
                             int64_t margin = 0);
// Progress on stderr when it is a terminal; a final summary line either way unless quiet.
ProgressCallback MakeProgress(const std::string& verb, bool quiet);
void PrintFailures(const char* command, const RowsReport& report);

// The arguments energy and stats share: a query or an archive, and phases and roles.
struct AnalysisArgs {
  QueryArgs query;
  std::string archive;
  std::vector<std::string> phases, roles;  // NAME=START..END, NAME=NODE,NODE
  // Other archives read with the rows (`--with-archive`: kwatt energy and kwatt report only).
  std::vector<std::string> with_archives;
};
// `--with-archive DIR` (repeatable) into `with_archives`; `several_runs`: the command reads
// several runs, each recording going with those it meets (kwatt report).
CLI::Option* AddWithArchiveOption(CLI::App* command, std::vector<std::string>* with_archives,
                                  bool several_runs);
void AddAnalysisOptions(CLI::App* command, AnalysisArgs* args);
// Parses --accuracy METRIC=P%+WW options into `accuracies` (by metric); InvalidArgument naming
// the one that is wrong.
Status ParseAccuracyOptions(const std::vector<std::string>& texts,
                            std::map<std::string, energy::StatedAccuracy>* accuracies);
// Parses --phase and --role; InvalidArgument naming the one that is wrong. A phase given as
// offsets after the window's start (NAME=+300..+600) is placed after `origin`, and refused
// without one.
Status ResolvePhasesAndRoles(const AnalysisArgs& args, std::vector<energy::Interval>* phases,
                             std::vector<energy::Role>* roles,
                             std::optional<UnixNanos> origin = std::nullopt);

// The smartwatts models' options, by PowerAPI's names: `kwatt meter --formula smartwatts` and
// `kwatt meter smartwatts` (hwpc-sensor's reports) share them.
struct SmartWattsModelArgs {
  meter::SmartWattsOptions options;
  std::string error_method = "median";
  bool disable_cpu = false, disable_dram = false;
};
void AddSmartWattsModelOptions(CLI::App* command, SmartWattsModelArgs* args);
// Sets the options from the flags and the method; InvalidArgument naming the option out of
// range.
Status ResolveSmartWattsModelOptions(SmartWattsModelArgs* args);

// Registers a subcommand; the returned function runs it once parsed.
using Runner = std::function<int()>;
Runner RegisterServe(CLI::App* app);
Runner RegisterFetch(CLI::App* app);
Runner RegisterBackup(CLI::App* app);
Runner RegisterEnergy(CLI::App* app);
Runner RegisterReport(CLI::App* app);
Runner RegisterSimulate(CLI::App* app);
// `simulate wattmetre`, under `simulate` (simulate_wattmetre.cc).
Runner RegisterSimulateWattmetre(CLI::App* simulate);
// `simulate rapl`, under `simulate` (simulate_rapl.cc).
Runner RegisterSimulateRapl(CLI::App* simulate);
// `simulate hwpc`, under `simulate` (simulate_hwpc.cc).
Runner RegisterSimulateHwpc(CLI::App* simulate);
// `meter` and `meter record` (meter_command.cc).
Runner RegisterMeter(CLI::App* app);
// `meter smartwatts`, under `meter` (meter_smartwatts.cc).
Runner RegisterMeterSmartwatts(CLI::App* meter);
Runner RegisterStats(CLI::App* app);
Runner RegisterInspect(CLI::App* app);
Runner RegisterCat(CLI::App* app);
Runner RegisterExport(CLI::App* app);
Runner RegisterImport(CLI::App* app);
Runner RegisterStore(CLI::App* app);
Runner RegisterCollect(CLI::App* app);
Runner RegisterJobs(CLI::App* app);

// The row filters of cat and export (cat_command.cc).
struct ArchiveFilterArgs {
  std::string nodes, metrics, start, end;
  bool allow_incomplete = false;
};
void AddArchiveFilterOptions(CLI::App* command, ArchiveFilterArgs* args);
// InvalidArgument naming the option when one is wrong.
Status ResolveArchiveFilters(const ArchiveFilterArgs& args, archive::LoadOptions* options);

}  // namespace kwatt::cli

#endif  // KWATT_APPS_KWATT_COMMANDS_H_
