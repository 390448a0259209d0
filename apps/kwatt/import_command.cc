// `kwatt import ARCHIVE --store URI`: an archive's rows, catalogues and job into a store.
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "apps/kwatt/commands.h"
#include "kwatt/archive/reader.h"
#include "kwatt/core/text.h"
#include "kwatt/jobs/job.h"
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

// What names an archive's import in a store (its mark, kwatt/store/store.h): the archive as it
// was when read (made when, complete when, or how many rows while incomplete), and its query, so
// that a rerun on the same archive finds the mark, and the same archive grown since (a backup
// resumed) is another import.
std::string ImportKey(const archive::Manifest& manifest) {
  std::string key = "archive made " + manifest.created_at;
  key += manifest.complete ? ", complete " + manifest.completed_at
                           : ", incomplete with " + std::to_string(manifest.rows()) + " rows";
  key += ", of " + manifest.query.api;
  if (!manifest.query.job_site.empty()) {
    key += " job " + manifest.query.job_site + ":" + std::to_string(manifest.query.job_id);
  } else {
    key += " " + std::to_string(manifest.nodes.size()) + " nodes " + manifest.query.start + ".." +
           manifest.query.end;
  }
  return key;
}

// Drops the first `*skip` rows of `batch` (counting them off *skip): rows an earlier run of the
// same import committed.
void SkipCommitted(RowBatch* batch, int64_t* skip) {
  if (*skip <= 0) return;
  if (int64_t(batch->size()) <= *skip) {
    *skip -= int64_t(batch->size());
    batch->Clear();
    return;
  }
  RowBatch rest;
  for (size_t i = size_t(*skip); i < batch->size(); ++i) rest.AppendRow(*batch, i);
  *skip = 0;
  *batch = std::move(rest);
}

Status Import(const std::string& dir, const std::string& uri, bool allow_incomplete, bool quiet,
              int64_t commit_rows, int64_t* imported, int64_t* earlier) {
  archive::LoadOptions options;
  options.allow_incomplete = allow_incomplete;
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<archive::ArchiveReader> reader,
                         archive::ArchiveReader::Open(dir, options));
  const archive::Manifest& manifest = reader->manifest();
  KWATT_ASSIGN_OR_RETURN(std::unique_ptr<store::Store> target, store::OpenStore(uri, true));
  const std::string key = ImportKey(manifest);
  const int64_t archive_rows = manifest.rows();
  // An earlier run of this import: done (refused: its rows would be kept twice), or cut short
  // (a kill, a full disk): the rows its mark counts are in the store, the rest follow.
  KWATT_ASSIGN_OR_RETURN(std::optional<store::ImportMark> mark, target->GetImportMark(key));
  if (mark && mark->done) {
    return Status::InvalidArgument(
        "the store " + ShownStoreUri(uri) +
        " holds this archive already: an import of it put its " + std::to_string(mark->rows) +
        " rows there; a store keeps rows as given, so importing again would keep them twice");
  }
  if (mark && mark->rows > archive_rows) {
    return Status::Corruption("the store " + ShownStoreUri(uri) +
                              " says an import of this archive put " + std::to_string(mark->rows) +
                              " rows there, more than its " + std::to_string(archive_rows) +
                              ": is it the same archive?");
  }
  if (mark) *earlier = mark->rows;
  if (mark && !quiet) {
    std::fprintf(stderr,
                 "kwatt import: an earlier import of this archive did not finish; the store "
                 "holds %lld of its %lld rows: importing the rest\n",
                 static_cast<long long>(mark->rows), static_cast<long long>(archive_rows));
  }
  // Rows of the archive's nodes already there with no mark of this import: another import (of
  // an older kwatt, of an archive that overlaps): refuse rather than guess.
  KWATT_ASSIGN_OR_RETURN(int64_t there, mark ? int64_t(0) : RowsAlreadyThere(*target, manifest));
  if (there > 0) {
    int64_t node_rows = 0;  // the archive's rows of its nodes (not of other devices)
    for (const archive::ManifestFile& file : manifest.files) {
      if (!file.node.empty()) node_rows += file.rows;
    }
    // Not this archive's own import (whose mark would say so, and which the same command
    // completes): another archive's, a collector's, or an import by a kwatt before marks.
    const std::string earlier =
        there < node_rows ? " (not put there by an import of this archive, which has " +
                                std::to_string(node_rows) +
                                " rows of its nodes: another archive that overlaps it, or a "
                                "collector)"
                          : " (imported already, by a kwatt that did not mark its imports?)";
    return Status::InvalidArgument(
        "the store " + ShownStoreUri(uri) + " already holds " + std::to_string(there) +
        " rows of the archive's nodes in its window" + earlier +
        ": a store keeps rows as given, so importing again would keep them twice; import into "
        "another store (or a new one in place of this one)");
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
  // Each batch moves the mark with it (kwatt/store/store.h): whenever the store commits, and
  // at least every commit_rows rows, the rows and the count of them are durable together.
  std::optional<store::ImportMark> at = mark;
  int64_t skip = mark ? mark->rows : 0;
  int64_t read = 0, since_commit = 0;
  RowBatch batch;
  while (reader->Next(&batch)) {
    read += int64_t(batch.size());
    SkipCommitted(&batch, &skip);
    if (batch.empty()) continue;
    store::ImportMark to{read, false};
    KWATT_RETURN_IF_ERROR(target->AppendImported(batch, reader->interner(), key, at, to));
    at = to;
    *imported += int64_t(batch.size());
    since_commit += int64_t(batch.size());
    if (since_commit >= commit_rows) {
      KWATT_RETURN_IF_ERROR(target->Flush());
      since_commit = 0;
    }
    if (progress && std::chrono::steady_clock::now() - last > std::chrono::milliseconds(200)) {
      last = std::chrono::steady_clock::now();
      std::fprintf(stderr, "\rkwatt import: %lld of %lld rows", static_cast<long long>(read),
                   static_cast<long long>(archive_rows));
    }
  }
  if (progress) std::fprintf(stderr, "\r");
  KWATT_RETURN_IF_ERROR(reader->status());
  KWATT_RETURN_IF_ERROR(target->AppendImported({}, reader->interner(), key, at, {read, true}));
  // An import is a bulk load: every row goes into its compact form now (the embedded store's
  // heads would otherwise be read row by row by every query, until rows come to seal them).
  return target->Seal();
}

}  // namespace

Runner RegisterImport(CLI::App* app) {
  struct Args {
    std::string dir, store;
    bool allow_incomplete = false, quiet = false;
    int64_t commit_rows = 1'000'000;
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
  command
      ->add_option("--commit-rows", args->commit_rows,
                   "Rows between two commits at most: an interrupted import is completed by the "
                   "same command from the last commit")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 40))
      ->capture_default_str();
  command->add_flag("--quiet", args->quiet, "No summary line");
  return [command, args]() -> int {
    if (!command->parsed()) return -1;
    int64_t imported = 0, earlier = 0;
    Status status = Import(args->dir, args->store, args->allow_incomplete, args->quiet,
                           args->commit_rows, &imported, &earlier);
    if (!status.ok()) {
      if (imported > 0) {
        // Rows read are not rows kept: what the store committed before the failure (a full
        // disk loses what was not), as it says it now.
        // (its mark says how many of the archive's rows that is).
        std::string kept = "those the store committed before the failure stay in it";
        Result<std::unique_ptr<store::Store>> target = store::OpenStore(args->store, false);
        Result<std::unique_ptr<archive::ArchiveReader>> reader = archive::ArchiveReader::Open(
            args->dir, archive::LoadOptions{.allow_incomplete = args->allow_incomplete});
        if (target.ok() && reader.ok()) {
          const archive::Manifest& manifest = (*reader)->manifest();
          Result<std::optional<store::ImportMark>> mark =
              (*target)->GetImportMark(ImportKey(manifest));
          if (mark.ok()) {
            kept = "the store holds " + std::to_string(*mark ? (*mark)->rows : 0) + " of its " +
                   std::to_string(manifest.rows()) + " rows";
          }
        }
        std::fprintf(stderr,
                     "kwatt import: INTERRUPTED after %lld rows written; %s; the import is not "
                     "complete: the same command completes it\n",
                     static_cast<long long>(imported), kept.c_str());
      }
      return Fail("import", status);
    }
    if (!args->quiet) {
      std::fprintf(stderr, "kwatt import: %lld rows of %s into %s%s\n",
                   static_cast<long long>(imported), args->dir.c_str(),
                   ShownStoreUri(args->store).c_str(),
                   earlier > 0 ? (" (the rest: an earlier import put the first " +
                                  std::to_string(earlier) + "; complete now)")
                                     .c_str()
                               : "");
    }
    return kExitOk;
  };
}

}  // namespace kwatt::cli
