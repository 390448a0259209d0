// `kwatt export DIR --to csv -o PATH`: an archive's rows in another format.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"
#include "kwatt/kwollect/text_sinks.h"

namespace kwatt::cli {

Runner RegisterExport(CLI::App* app) {
  struct Args {
    std::string dir;
    std::string to;
    std::string output;
    ArchiveFilterArgs filters;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "export", "Write an archive's rows as CSV (the columns of kwatt fetch --format csv), "
                "checking them as they are read");
  command->add_option("dir", args->dir, "Archive directory")->required();
  command->add_option("--to", args->to, "Format: csv (parquet: with the Python package)")
      ->required()
      ->check(CLI::IsMember({"csv", "parquet"}));
  command->add_option("-o,--output", args->output, "Output file (- for stdout)");
  AddArchiveFilterOptions(command, &args->filters);
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    if (args->to == "parquet") {
      std::fprintf(stderr,
                   "kwatt export: Parquet export comes with the Python package: "
                   "kwatt.load(\"%s\").to_parquet(PATH)\n",
                   args->dir.c_str());
      return kExitUsage;
    }
    if (args->output.empty()) {
      std::fprintf(stderr, "kwatt export: give the output file: -o PATH (- for stdout)\n");
      return kExitUsage;
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
    // A file is written under a temporary name and renamed once whole, so that a damaged archive
    // never leaves a shorter file that looks finished.
    const bool to_stdout = args->output == "-";
    std::string temporary = args->output + ".tmp-" + std::to_string(::getpid());
    FILE* out = stdout;
    if (!to_stdout) {
      out = std::fopen(temporary.c_str(), "wb");
      if (out == nullptr) {
        std::fprintf(stderr, "kwatt export: cannot create %s: %s\n", temporary.c_str(),
                     std::strerror(errno));
        return kExitFailure;
      }
    }
    kwollect::CsvSink sink(out, to_stdout ? "stdout" : args->output);
    RowBatch batch;
    Status written = sink.Write("", batch, (*reader)->interner());  // the header, even if no row
    while (written.ok() && (*reader)->Next(&batch)) {
      written = sink.Write((*reader)->current_file().site, batch, (*reader)->interner());
    }
    Status flushed = sink.Flush();
    if (!to_stdout && std::fclose(out) != 0 && flushed.ok()) {
      flushed = Status::IOError("cannot write " + args->output + ": " + std::strerror(errno));
    }
    const Status* results[] = {&written, &(*reader)->status(), &flushed};
    for (const Status* s : results) {
      if (!s->ok()) {
        if (!to_stdout) std::remove(temporary.c_str());
        std::fprintf(stderr, "kwatt export: %s%s\n", s->message().c_str(),
                     to_stdout ? "" : "; nothing was written");
        return ExitCodeOf(*s);
      }
    }
    if (!to_stdout && std::rename(temporary.c_str(), args->output.c_str()) != 0) {
      std::fprintf(stderr, "kwatt export: cannot rename %s to %s: %s\n", temporary.c_str(),
                   args->output.c_str(), std::strerror(errno));
      std::remove(temporary.c_str());
      return kExitFailure;
    }
    if (!(*reader)->manifest().complete) {
      std::fprintf(stderr, "kwatt export: WARNING: %s is INCOMPLETE: wrote only the rows its "
                           "interrupted backup committed\n", args->dir.c_str());
    }
    std::fprintf(stderr, "kwatt export: %lld rows to %s\n", (long long)(*reader)->rows(),
                 to_stdout ? "stdout" : args->output.c_str());
    return kExitOk;
  };
}

}  // namespace kwatt::cli
