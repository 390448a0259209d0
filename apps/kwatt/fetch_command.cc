#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>

#include "apps/kwatt/commands.h"
#include "kwatt/core/output_file.h"
#include "kwatt/rows/text_sinks.h"

namespace kwatt::cli {

Runner RegisterFetch(CLI::App* app) {
  struct Args {
    QueryArgs query;
    std::string format = "jsonl";
    std::string output;
    bool quiet = false;
    bool as_rate = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "fetch", "Fetch every row Kwollect has for nodes over a window (or a job), in parallel");
  AddQueryOptions(command, &args->query);
  command->add_option("--format", args->format, "jsonl (rows exactly as the API sent them) or csv")
      ->check(CLI::IsMember({"jsonl", "csv"}))
      ->capture_default_str();
  command->add_option("-o,--output", args->output, "Output file (default: stdout)")
      ->check(NonEmptyPath());
  command->add_flag("-q,--quiet", args->quiet, "No progress line, no summary");
  command->add_flag("--as-rate", args->as_rate,
                    "Each value as its series' rate per second, as Kwollect's as_rate=true gives "
                    "it (null first; a counter's wrap counted), over the whole window");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    kwollect::FetchQuery query;
    kwollect::ClientOptions options;
    Status status = ResolveQuery(args->query, &query, &options);
    if (!status.ok()) {
      std::fprintf(stderr, "kwatt fetch: %s\n", status.message().c_str());
      return ExitCodeOf(status);
    }
    query.as_rate = args->as_rate;
    // A regular file is written under a temporary name and renamed once the fetch is over, so
    // that a fetch that fails (a typo in --metrics, an unknown node, a wrong password) leaves an
    // existing file as it was; a device or a FIFO is written through (OutputFile).
    FILE* out = stdout;
    std::string name = "stdout";
    std::optional<OutputFile> target;
    if (!args->output.empty() && args->output != "-") {
      Result<OutputFile> planned = OutputFile::Plan(args->output);
      if (!planned.ok()) {
        std::fprintf(stderr, "kwatt fetch: -o: %s\n", planned.status().message().c_str());
        return ExitCodeOf(planned.status());
      }
      target.emplace(std::move(*planned));
      out = std::fopen(target->write_path().c_str(), "wb");
      name = args->output;
      if (!out) {
        std::fprintf(stderr, "kwatt fetch: cannot create %s: %s\n", target->write_path().c_str(),
                     std::strerror(errno));
        return kExitFailure;
      }
    }
    std::unique_ptr<rows::TextSink> sink;
    if (args->format == "csv") {
      sink = std::make_unique<rows::CsvSink>(out, name);
    } else {
      sink = std::make_unique<rows::JsonlSink>(out, name);
    }
    Result<RowsReport> report =
        kwollect::Fetch(options, query, sink.get(), MakeProgress("kwatt fetch", args->quiet));
    Status flushed = sink->Flush();
    if (out != stdout && std::fclose(out) != 0 && flushed.ok()) {
      flushed = Status::IOError("cannot write " + name + ": " + std::strerror(errno));
    }
    if (!report.ok()) {
      if (target) target->Abandon();
      std::fprintf(stderr, "kwatt fetch: %s%s\n", report.status().message().c_str(),
                   target && target->replaces() ? "; nothing was written" : "");
      return ExitCodeOf(report.status());
    }
    // The rows of an incomplete fetch are kept: every row written is one the API sent, and the
    // exit status and the lines below say what is missing.
    if (flushed.ok() && target) flushed = target->Commit();
    if (!flushed.ok()) {
      std::fprintf(stderr, "kwatt fetch: %s\n", flushed.message().c_str());
      return kExitFailure;
    }
    if (!args->quiet) {
      std::fprintf(stderr,
                   "kwatt fetch: %lld rows from %zu nodes in %.2f s (%lld requests, %lld retries, "
                   "%lld splits)%s\n",
                   (long long)report->rows, report->nodes.size(), report->seconds,
                   (long long)report->requests, (long long)report->retries,
                   (long long)report->splits,
                   report->complete() ? "" : ": INCOMPLETE, see the pieces above");
    }
    PrintFailures("kwatt fetch", *report);
    if (!report->complete()) {
      std::fprintf(stderr,
                   "kwatt fetch: %zu piece(s) could not be fetched; every other row was "
                   "written\n",
                   report->failures.size());
      return kExitFailure;
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
