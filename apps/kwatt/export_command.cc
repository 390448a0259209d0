// `kwatt export DIR --to csv -o PATH`: an archive's rows in another format.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"
#include "kwatt/core/output_file.h"
#include "kwatt/core/text.h"
#include "kwatt/rows/text_sinks.h"

namespace kwatt::cli {
namespace {

// Parquet is written by the Python package (pyarrow, the well-kept writer), in its own process:
// the CLI names the command that does it (the same arguments) and starts nothing.
int RefuseParquet(const std::string& dir, const std::string& output,
                  const ArchiveFilterArgs& filters) {
  std::string command =
      "python -m kwatt export " + ShellQuoted(dir) + " --to parquet -o " + ShellQuoted(output);
  for (auto [flag, value] :
       {std::pair{"--nodes", &filters.nodes}, std::pair{"--metrics", &filters.metrics},
        std::pair{"--start", &filters.start}, std::pair{"--end", &filters.end}}) {
    if (!value->empty()) command += std::string(" ") + flag + " " + ShellQuoted(*value);
  }
  if (filters.allow_incomplete) command += " --allow-incomplete";
  std::fprintf(stderr,
               "kwatt export: Parquet is written by the Python package (pyarrow), not by this "
               "command: run %s (pip install 'kwatt[parquet]' gives it)\n",
               command.c_str());
  return kExitUsage;
}

}  // namespace

Runner RegisterExport(CLI::App* app) {
  struct Args {
    std::string dir;
    std::string to;
    std::string output;
    ArchiveFilterArgs filters;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "export",
      "Write an archive's rows as CSV (the columns of kwatt fetch --format csv), "
      "checking them as they are read");
  command->add_option("dir", args->dir, "Archive directory")->required();
  command
      ->add_option("--to", args->to,
                   "Format: csv (parquet: python -m kwatt export, the Python package's)")
      ->required()
      ->check(CLI::IsMember({"csv", "parquet"}));
  command->add_option("-o,--output", args->output, "Output file (- for stdout)")
      ->check(NonEmptyPath());
  AddArchiveFilterOptions(command, &args->filters);
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    if (args->output.empty()) {
      std::fprintf(stderr, "kwatt export: give the output file: -o PATH (- for stdout)\n");
      return kExitUsage;
    }
    if (args->to == "parquet") {
      // An output that could never be written is named first (python -m kwatt export checks the
      // same).
      if (Status refused = args->output == "-"
                               ? Status::OK()
                               : OutputFile::Plan(args->output, {args->dir}).status();
          !refused.ok()) {
        std::fprintf(stderr, "kwatt export: -o: %s\n", refused.message().c_str());
        return ExitCodeOf(refused);
      }
      return RefuseParquet(args->dir, args->output, args->filters);
    }
    archive::LoadOptions options;
    Status status = ResolveArchiveFilters(args->filters, &options);
    if (!status.ok()) {
      std::fprintf(stderr, "kwatt export: %s\n", status.message().c_str());
      return ExitCodeOf(status);
    }
    auto reader = archive::ArchiveReader::Open(args->dir, options);
    if (!reader.ok()) {
      std::fprintf(stderr, "kwatt export: %s\n", reader.status().message().c_str());
      return ExitCodeOf(reader.status());
    }
    // A regular file is written under a temporary name and renamed once whole, so that a damaged
    // archive never leaves a shorter file that looks finished; a device or a FIFO is written
    // through, never replaced (OutputFile).
    const bool to_stdout = args->output == "-";
    std::optional<OutputFile> target;
    FILE* out = stdout;
    if (!to_stdout) {
      Result<OutputFile> planned = OutputFile::Plan(args->output, {args->dir});
      if (!planned.ok()) {
        std::fprintf(stderr, "kwatt export: -o: %s\n", planned.status().message().c_str());
        return ExitCodeOf(planned.status());
      }
      target.emplace(std::move(*planned));
      out = std::fopen(target->write_path().c_str(), "wb");
      if (out == nullptr) {
        std::fprintf(stderr, "kwatt export: cannot create %s: %s\n", target->write_path().c_str(),
                     std::strerror(errno));
        return kExitFailure;
      }
    }
    rows::CsvSink sink(out, to_stdout ? "stdout" : args->output);
    RowBatch batch;
    Status written = sink.Write("", batch, (*reader)->interner());  // the header, even if no row
    while (written.ok() && (*reader)->Next(&batch)) {
      written = sink.Write((*reader)->current_file().site, batch, (*reader)->interner());
    }
    Status flushed = sink.Flush();
    if (!to_stdout && std::fclose(out) != 0 && flushed.ok()) {
      flushed = Status::IOError("cannot write " + args->output + ": " + std::strerror(errno));
    }
    Status outcome = written;
    if (outcome.ok()) outcome = (*reader)->status();
    if (outcome.ok()) outcome = flushed;
    if (outcome.ok() && target) outcome = target->Commit();
    if (!outcome.ok()) {
      if (target) target->Abandon();
      std::fprintf(stderr, "kwatt export: %s%s\n", outcome.message().c_str(),
                   target && target->replaces() ? "; nothing was written" : "");
      return ExitCodeOf(outcome);
    }
    if (!(*reader)->manifest().complete) {
      std::fprintf(stderr,
                   "kwatt export: WARNING: %s is INCOMPLETE: wrote only the rows its "
                   "interrupted backup committed\n",
                   args->dir.c_str());
    }
    std::fprintf(stderr, "kwatt export: %lld rows to %s\n", (long long)(*reader)->rows(),
                 to_stdout ? "stdout" : args->output.c_str());
    return kExitOk;
  };
}

}  // namespace kwatt::cli
