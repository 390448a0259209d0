// `kwatt import ARCHIVE --store URI`: an archive's rows, catalogues and job into a store.
// `kwatt store check|info|cat URI`: what a store holds, whether it is sound, its rows.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"
#include "kwatt/core/text.h"
#include "kwatt/kwollect/text_sinks.h"
#include "kwatt/store/open_store.h"

namespace kwatt::cli {
namespace {

// Rows of the archive's nodes already in the store over the archive's window.
Result<int64_t> RowsAlreadyThere(store::Store& target, const archive::Manifest& manifest) {
  store::StoreQuery query;
  for (const archive::ManifestNode& node : manifest.nodes) query.devices.push_back(node.uid);
  query.start = manifest.window_start;
  query.end = manifest.window_end == INT64_MAX ? INT64_MAX : manifest.window_end + 1;
  int64_t rows = 0;
  KWATT_RETURN_IF_ERROR(target.Query(query, [&](const RowBatch& batch, const StringInterner&) {
    rows += int64_t(batch.size());
    return Status::OK();
  }));
  return rows;
}

Status Import(const std::string& dir, const std::string& uri, bool allow_incomplete, bool quiet,
              int64_t* imported) {
  archive::LoadOptions options;
  options.allow_incomplete = allow_incomplete;
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<archive::ArchiveReader> reader,
                         archive::ArchiveReader::Open(dir, options));
  const archive::Manifest& manifest = reader->manifest();
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> target, store::OpenStore(uri, true));
  // Importing twice would keep every row twice: refuse rather than guess.
  KWATT_ASSIGN_OR_RETURN(int64_t there, RowsAlreadyThere(*target, manifest));
  if (there > 0) {
    return Status::InvalidArgument(
        "the store " + ShownStoreUri(uri) + " already holds " + std::to_string(there) +
        " rows of the archive's nodes in its window (an earlier import?): a store keeps rows "
        "as given, so importing again would keep them twice; import into another store");
  }
  for (const ClusterCatalogue& cluster : manifest.catalogue) {
    size_t slash = cluster.cluster.find('/');
    KWATT_RETURN_IF_ERROR(target->PutCatalogue(
        cluster.cluster.substr(0, slash), cluster.cluster.substr(slash + 1), cluster.catalogue));
  }
  if (!manifest.query.job_site.empty()) {
    Result<jobs::Job> known = target->GetJob(manifest.query.job_site, manifest.query.job_id);
    if (!known.ok() && known.status().code() == Status::Code::kNotFound) {
      jobs::Job job;  // as the archive tells it: the job as OAR told it, or its window
      job.site = manifest.query.job_site;
      job.uid = manifest.query.job_id;
      for (const archive::ManifestNode& node : manifest.nodes) {
        if (node.site == job.site) job.nodes.push_back(node.uid);
      }
      job.user = manifest.job_user;
      job.started_at = manifest.has_job ? manifest.job_started : manifest.window_start;
      job.stopped_at = manifest.has_job ? manifest.job_stopped : std::optional(manifest.window_end);
      job.types = manifest.job_types;
      KWATT_RETURN_IF_ERROR(target->PutJob(job));
    } else if (!known.ok()) {
      return known.status();
    }
  }
  bool progress = !quiet && isatty(STDERR_FILENO);
  auto last = std::chrono::steady_clock::now();
  RowBatch batch;
  while (reader->Next(&batch)) {
    KWATT_RETURN_IF_ERROR(target->Append(batch, reader->interner()));
    *imported += int64_t(batch.size());
    if (progress && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(200)) {
      last = std::chrono::steady_clock::now();
      std::fprintf(stderr, "\rkwatt import: %lld rows", static_cast<long long>(*imported));
    }
  }
  if (progress) std::fprintf(stderr, "\r");
  KWATT_RETURN_IF_ERROR(reader->status());
  // An import is a bulk load: every row goes into its compact form now (the embedded store's
  // heads would otherwise be read row by row by every query, until rows come to seal them).
  return target->Seal();
}

}  // namespace

Runner RegisterImport(CLI::App* app) {
  struct Args {
    std::string dir, store;
    bool allow_incomplete = false, quiet = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* command = app->add_subcommand(
      "import",
      "Import an archive (its rows as they are, its catalogues and its job) into a store, to "
      "serve it again (doc/store.md)");
  command->add_option("dir", args->dir, "Archive directory")->required();
  command
      ->add_option("--store", args->store,
                   "The store: a file (the embedded store, made when missing) or "
                   "postgresql://USER@HOST/DB")
      ->required()
      ->check(NonEmptyPath());
  command->add_flag("--allow-incomplete", args->allow_incomplete,
                    "Import an incomplete archive (an interrupted backup): its committed rows");
  command->add_flag("--quiet", args->quiet, "No summary line");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    int64_t imported = 0;
    Status status = Import(args->dir, args->store, args->allow_incomplete, args->quiet, &imported);
    if (!status.ok()) {
      if (imported > 0) {
        std::fprintf(stderr, "kwatt import: INTERRUPTED after %lld rows (they stay in the store)\n",
                     static_cast<long long>(imported));
      }
      return Fail("import", status);
    }
    if (!args->quiet) {
      std::fprintf(stderr, "kwatt import: %lld rows of %s into %s\n",
                   static_cast<long long>(imported), args->dir.c_str(),
                   ShownStoreUri(args->store).c_str());
    }
    return kExitOk;
  };
}

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
    kwollect::JsonlSink sink(stdout, "stdout");
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
