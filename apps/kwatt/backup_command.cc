#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "apps/kwatt/commands.h"
#include "kwatt/backup/backup.h"
#include "kwatt/core/version.h"

namespace kwatt::cli {
namespace {

// Ctrl-C or a kill while a backup runs: the archive is crash-safe (what was committed stays), so
// the interrupted command says so and how to go on, then ends as the signal would have.
std::string g_interrupted;  // the message, made before the handler is installed

extern "C" void OnBackupInterrupted(int signal_number) {
  (void)!write(STDERR_FILENO, g_interrupted.data(), g_interrupted.size());
  _exit(128 + signal_number);
}

}  // namespace

Runner RegisterBackup(CLI::App* app) {
  struct Args {
    QueryArgs query;
    std::string dir;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "backup",
      "Archive every row of nodes over a window (or a job): lossless, compressed, "
      "crash-safe and resumable (doc/archive_format.md)");
  AddQueryOptions(command, &args->query);
  command
      ->add_option("-o,--output", args->dir,
                   "Archive directory (new, empty, or an "
                   "interrupted backup of the same query)")
      ->required()
      ->check(NonEmptyPath());
  command->add_flag("-q,--quiet", args->quiet, "No progress line, no summary");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    kwollect::FetchQuery query;
    kwollect::ClientOptions options;
    Status status = ResolveQuery(args->query, &query, &options);
    if (!status.ok()) {
      std::fprintf(stderr, "kwatt backup: %s\n", status.message().c_str());
      return ExitCodeOf(status);
    }
    g_interrupted = "\nkwatt backup: interrupted; the rows written so far stay in " + args->dir +
                    ": run the same kwatt backup command again to complete it\n";
    struct sigaction action {};
    action.sa_handler = OnBackupInterrupted;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    Result<backup::BackupOutcome> outcome = backup::Backup(
        options, query, args->dir, KwattVersion(), MakeProgress("kwatt backup", args->quiet),
        [&](bool resuming) {
          if (resuming && !args->quiet) {
            std::fprintf(stderr, "kwatt backup: completing the interrupted backup in %s\n",
                         args->dir.c_str());
          }
        });
    if (!outcome.ok()) {
      std::fprintf(stderr, "kwatt backup: %s\n", outcome.status().message().c_str());
      return ExitCodeOf(outcome.status());
    }
    if (outcome->already_complete) {
      if (!args->quiet) {
        std::fprintf(stderr, "kwatt backup: %s already holds the complete backup of this query\n",
                     args->dir.c_str());
      }
      return kExitOk;
    }
    const RowsReport* report = &outcome->report;
    PrintFailures("kwatt backup", *report);
    if (!outcome->finished.ok()) {
      std::fprintf(stderr, "kwatt backup: INCOMPLETE: %s\n", outcome->finished.message().c_str());
      return kExitFailure;
    }
    if (!args->quiet) {
      double ratio =
          outcome->bytes_written > 0 ? double(report->bytes) / double(outcome->bytes_written) : 0;
      std::fprintf(stderr,
                   "kwatt backup: %s complete: %lld rows %s for %zu nodes, %.1f MB (%.1f times "
                   "smaller than the %.1f MB the API sent) in %.2f s\n",
                   args->dir.c_str(), (long long)outcome->rows_written,
                   outcome->resuming ? "added" : "written", report->nodes.size(),
                   double(outcome->bytes_written) / 1e6, ratio, double(report->bytes) / 1e6,
                   report->seconds);
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
