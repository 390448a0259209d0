#include <cstdio>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/writer.h"

#ifndef KWATT_VERSION
#define KWATT_VERSION "0.0.0"
#endif

namespace kwatt::cli {

Runner RegisterBackup(CLI::App* app) {
  struct Args {
    QueryArgs query;
    std::string dir;
    bool quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "backup", "Archive every row of nodes over a window (or a job): lossless, compressed, "
                "crash-safe and resumable (doc/archive_format.md)");
  AddQueryOptions(command, &args->query);
  command->add_option("-o,--output", args->dir, "Archive directory (new, empty, or an "
                                                "interrupted backup of the same query)")
      ->required();
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
    archive::BackupQuery described;
    described.api = options.api_url;
    for (const kwollect::NodeName& node : query.nodes) described.nodes.push_back(node.Fqdn());
    described.job = query.job;
    described.start = query.start;
    described.end = query.end;
    described.metrics = query.metrics;
    described.summary = query.summary;
    auto writer = archive::ArchiveWriter::Open(args->dir, described, KWATT_VERSION);
    if (!writer.ok()) {
      std::fprintf(stderr, "kwatt backup: %s\n", writer.status().message().c_str());
      return ExitCodeOf(writer.status());
    }
    if ((*writer)->already_complete()) {
      if (!args->quiet) {
        std::fprintf(stderr, "kwatt backup: %s already holds the complete backup of this query\n",
                     args->dir.c_str());
      }
      return kExitOk;
    }
    if ((*writer)->resuming() && !args->quiet) {
      std::fprintf(stderr, "kwatt backup: completing the interrupted backup in %s\n",
                   args->dir.c_str());
    }
    Result<kwollect::FetchReport> report =
        kwollect::Fetch(options, (*writer)->FetchQueryToRun(query), writer->get(),
                        MakeProgress("kwatt backup", args->quiet));
    if (!report.ok()) {
      std::fprintf(stderr, "kwatt backup: %s\n", report.status().message().c_str());
      return ExitCodeOf(report.status());
    }
    PrintFailures("kwatt backup", *report);
    Status finished = (*writer)->Finish(*report);
    if (!finished.ok()) {
      std::fprintf(stderr, "kwatt backup: INCOMPLETE: %s\n", finished.message().c_str());
      return kExitFailure;
    }
    if (!args->quiet) {
      double ratio = (*writer)->bytes_written() > 0
                         ? double(report->bytes) / double((*writer)->bytes_written())
                         : 0;
      std::fprintf(stderr,
                   "kwatt backup: %s complete: %lld rows %s for %zu nodes, %.1f MB (%.1f times "
                   "smaller than the %.1f MB the API sent) in %.2f s\n",
                   args->dir.c_str(), (long long)(*writer)->rows_written(),
                   (*writer)->resuming() ? "added" : "written", report->nodes.size(),
                   double((*writer)->bytes_written()) / 1e6, ratio, double(report->bytes) / 1e6,
                   report->seconds);
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
