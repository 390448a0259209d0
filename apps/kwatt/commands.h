// The subcommands of the kwatt CLI, each in its own file.
#ifndef KWATT_APPS_KWATT_COMMANDS_H_
#define KWATT_APPS_KWATT_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/kwollect/client_options.h"
#include "kwatt/energy/energy.h"
#include "kwatt/kwollect/fetch.h"

namespace kwatt::cli {

// Exit statuses (doc/errors.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

int ExitCodeOf(const Status& status);

// The query arguments shared by fetch, backup, energy and stats.
struct QueryArgs {
  std::string nodes, start, end, job, metrics, api, config;
  bool summary = false;
  int concurrency = 0, per_site = 0, retries = -1;
  double backoff = -1;
  int64_t rows_per_request = 0;
};
void AddQueryOptions(CLI::App* command, QueryArgs* args);
// Builds the query and client options; InvalidArgument naming the option when one is wrong.
Status ResolveQuery(const QueryArgs& args, kwollect::FetchQuery* query,
                    kwollect::ClientOptions* options);

// Progress on stderr when it is a terminal; a final summary line either way unless quiet.
kwollect::ProgressCallback MakeProgress(const std::string& verb, bool quiet);
void PrintFailures(const char* command, const kwollect::FetchReport& report);

// --phase NAME=START..END and --role NAME=NODE,NODE of energy and stats.
Result<energy::Interval> ParsePhaseArgument(const std::string& text, UnixNanos now);
Result<energy::Role> ParseRoleArgument(const std::string& text);

// Registers a subcommand; the returned function runs it once parsed.
using Runner = std::function<int()>;
Runner RegisterServe(CLI::App* app);
Runner RegisterFetch(CLI::App* app);
Runner RegisterBackup(CLI::App* app);
Runner RegisterEnergy(CLI::App* app);
Runner RegisterSimulate(CLI::App* app);
Runner RegisterStats(CLI::App* app);

}  // namespace kwatt::cli

#endif  // KWATT_APPS_KWATT_COMMANDS_H_
