// `kwatt cat DIR`: an archive's rows as JSON Lines, exactly as the API sent them.
#include <chrono>
#include <cstdio>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"
#include "kwatt/rows/text_sinks.h"

namespace kwatt::cli {

void AddArchiveFilterOptions(CLI::App* command, ArchiveFilterArgs* args) {
  command->add_option("--nodes", args->nodes,
                      "Nodes, comma-separated: nova-1.lyon.grid5000.fr or nova-1.lyon (default: "
                      "every file, other devices' included)");
  command->add_option("--metrics", args->metrics, "Metric ids, comma-separated (default: all)");
  command->add_option("--start", args->start,
                      "Rows at or after: epoch seconds, ISO 8601 (local time without offset), now");
  command->add_option("--end", args->end, "Rows at or before, same forms");
  command->add_flag("--allow-incomplete", args->allow_incomplete,
                    "Read an incomplete archive (an interrupted backup): its committed rows");
}

Status ResolveArchiveFilters(const ArchiveFilterArgs& args, archive::LoadOptions* options) {
  options->nodes = SplitCommaList(args.nodes);
  options->metrics = SplitCommaList(args.metrics);
  UnixNanos now = WallClockNow();
  for (auto [text, slot, name] : {std::tuple{&args.start, &options->start, "--start"},
                                  std::tuple{&args.end, &options->end, "--end"}}) {
    if (text->empty()) continue;
    Result<UnixNanos> t = ParseUserTime(*text, now);
    if (!t.ok()) return t.status().WithContext(name);
    *slot = *t;
  }
  options->allow_incomplete = args.allow_incomplete;
  return Status::OK();
}

Runner RegisterCat(CLI::App* app) {
  struct Args {
    std::string dir;
    ArchiveFilterArgs filters;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "cat",
      "Print an archive's rows as JSON Lines, exactly as the API sent them (node files in "
      "manifest order, each in time order), checking them as they are read");
  command->add_option("dir", args->dir, "Archive directory")->required();
  AddArchiveFilterOptions(command, &args->filters);
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    archive::LoadOptions options;
    Status status = ResolveArchiveFilters(args->filters, &options);
    if (!status.ok()) {
      std::fprintf(stderr, "kwatt cat: %s\n", status.message().c_str());
      return ExitCodeOf(status);
    }
    auto reader = archive::ArchiveReader::Open(args->dir, options);
    if (!reader.ok()) {
      std::fprintf(stderr, "kwatt cat: %s\n", reader.status().message().c_str());
      return ExitCodeOf(reader.status());
    }
    if (!(*reader)->manifest().complete) {
      std::fprintf(stderr,
                   "kwatt cat: WARNING: %s is INCOMPLETE: printing only the rows its "
                   "interrupted backup committed\n",
                   args->dir.c_str());
    }
    rows::JsonlSink sink(stdout, "stdout");
    RowBatch batch;
    Status written;
    while (written.ok() && (*reader)->Next(&batch)) {
      written = sink.Write((*reader)->current_file().site, batch, (*reader)->interner());
    }
    Status flushed = sink.Flush();
    const Status* results[] = {&written, &(*reader)->status(), &flushed};
    for (const Status* s : results) {
      if (!s->ok()) {
        std::fprintf(stderr, "kwatt cat: %s\n", s->message().c_str());
        return ExitCodeOf(*s);
      }
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
