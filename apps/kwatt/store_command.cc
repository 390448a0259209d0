// `kwatt store check|info|cat URI`: what a store holds, whether it is sound, its rows.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"
#include "kwatt/core/text.h"
#include "kwatt/rows/text_sinks.h"
#include "kwatt/store/open_store.h"

namespace kwatt::cli {

Runner RegisterStore(CLI::App* app) {
  struct Args {
    std::string uri;
    bool json = false;
    ArchiveFilterArgs filters;
  };
  auto args = std::make_shared<Args>();
  CLI::App* group =
      app->add_subcommand("store", "What a store holds, whether it is sound, its rows");
  group->require_subcommand(1);
  CLI::App* check = group->add_subcommand(
      "check", "Read the whole store and check it (exit 1 naming each problem)");
  CLI::App* info = group->add_subcommand("info", "Series, rows, time span, size, jobs");
  CLI::App* cat = group->add_subcommand(
      "cat", "Print a store's rows as JSON Lines, as Kwollect renders them (device by device)");
  for (CLI::App* command : {check, info, cat}) {
    command->add_option("uri", args->uri, "The store: a file, or postgresql://USER@HOST/DB")
        ->required();
  }
  info->add_flag("--json", args->json, "As JSON");
  cat->add_option("--nodes", args->filters.nodes,
                  "Devices, comma-separated: nova-1 (a node's uid), wattmetre1-port7 (default: "
                  "every device)");
  cat->add_option("--metrics", args->filters.metrics, "Metric ids, comma-separated (default: all)");
  cat->add_option("--start", args->filters.start,
                  "Rows at or after: epoch seconds, ISO 8601 (local time without offset), now");
  cat->add_option("--end", args->filters.end, "Rows at or before, same forms");
  return [group, check, info, args]() -> int {
    if (!group->parsed()) return -1;
    auto opened = store::OpenStore(args->uri, /*create=*/false);
    if (!opened.ok()) {
      const char* name = check->parsed()  ? "store check"
                         : info->parsed() ? "store info"
                                          : "store cat";
      if (check->parsed() && opened.status().code() == Status::Code::kCorruption) {
        std::printf("%s: DAMAGED\n", ShownStoreUri(args->uri).c_str());
      }
      return Fail(name, opened.status());
    }
    store::Store& s = **opened;
    if (check->parsed()) {
      auto report = s.Check();
      if (!report.ok()) return Fail("store check", report.status());
      for (const std::string& problem : report->problems) {
        std::fprintf(stderr, "kwatt store check: %s\n", problem.c_str());
      }
      std::printf("%s: %s (%lld blocks, %lld rows checked)\n", ShownStoreUri(args->uri).c_str(),
                  report->ok() ? "OK" : "DAMAGED", static_cast<long long>(report->blocks_checked),
                  static_cast<long long>(report->rows_checked));
      return report->ok() ? kExitOk : kExitFailure;
    }
    if (info->parsed()) {
      auto i = s.Info();
      if (!i.ok()) return Fail("store info", i.status());
      std::string first = i->rows ? FormatUtcTimestamp(i->first) : "",
                  last = i->rows ? FormatUtcTimestamp(i->last) : "";
      if (args->json) {
        nlohmann::ordered_json out = {
            {"store", ShownStoreUri(args->uri)},
            {"engine", store::IsPostgresUri(args->uri) ? "postgresql" : "sqlite"},
            {"series", i->series},
            {"rows", i->rows},
            {"blocks", i->blocks},
            {"head_rows", i->head_rows},
            {"bytes", i->bytes},
            {"first", first},
            {"last", last},
            {"jobs", i->jobs},
            {"catalogues", i->catalogues}};
        std::printf("%s\n", out.dump(2).c_str());
      } else {
        std::printf(
            "store      %s\nseries     %lld\nrows       %lld (%lld not yet in blocks)\nblocks     "
            "%lld\nsize       %s (%.1f bytes a row)\nspan       %s .. %s\njobs       %lld\n"
            "catalogues %lld\n",
            ShownStoreUri(args->uri).c_str(), static_cast<long long>(i->series),
            static_cast<long long>(i->rows), static_cast<long long>(i->head_rows),
            static_cast<long long>(i->blocks), HumanBytes(double(i->bytes)).c_str(),
            i->rows ? double(i->bytes) / double(i->rows) : 0.0, first.empty() ? "-" : first.c_str(),
            last.empty() ? "-" : last.c_str(), static_cast<long long>(i->jobs),
            static_cast<long long>(i->catalogues));
      }
      return kExitOk;
    }
    // cat
    store::StoreQuery query;
    for (const std::string& node : SplitCommaList(args->filters.nodes)) {
      query.devices.push_back(node.substr(0, node.find('.')));  // as the metrics API cuts ids
    }
    query.metrics = SplitCommaList(args->filters.metrics);
    query.start = INT64_MIN;
    query.end = INT64_MAX;
    UnixNanos now = WallClockNow();
    if (!args->filters.start.empty()) {
      Result<UnixNanos> t = ParseUserTime(args->filters.start, now);
      if (!t.ok()) return Fail("store cat", t.status().WithContext("--start"));
      query.start = *t;
    }
    if (!args->filters.end.empty()) {
      Result<UnixNanos> t = ParseUserTime(args->filters.end, now);
      if (!t.ok()) return Fail("store cat", t.status().WithContext("--end"));
      query.end = *t == INT64_MAX ? *t : *t + 1;  // --end is inclusive
    }
    rows::JsonlSink sink(stdout, "stdout");
    Status status = s.Query(query, [&](const RowBatch& batch, const StringInterner& interner) {
      return sink.Write("", batch, interner);
    });
    Status flushed = sink.Flush();
    if (!status.ok()) return Fail("store cat", status);
    if (!flushed.ok()) return Fail("store cat", flushed);
    return kExitOk;
  };
}

}  // namespace kwatt::cli
