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
    int64_t node_rows = 0;  // the archive's rows of its nodes (not of other devices)
    for (const archive::ManifestFile& file : manifest.files) {
      if (!file.node.empty()) node_rows += file.rows;
    }
    const std::string earlier =
        there < node_rows
            ? " (an earlier import of this archive that did not finish? the archive has " +
                  std::to_string(node_rows) + " rows of its nodes)"
            : " (an earlier import?)";
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
        // Rows read are not rows kept: what the store committed before the failure (a full
        // disk loses what was not), as it says it now.
        std::string kept = "those the store committed before the failure stay in it";
        Result<std::unique_ptr<store::Store>> target = store::OpenStore(args->store, false);
        Result<std::unique_ptr<archive::ArchiveReader>> reader =
            archive::ArchiveReader::Open(args->dir, archive::LoadOptions{.allow_incomplete = true});
        if (target.ok() && reader.ok()) {
          Result<int64_t> there = RowsAlreadyThere(**target, (*reader)->manifest());
          if (there.ok()) {
            kept = "the store holds " + std::to_string(*there) + " rows of the archive's nodes";
          }
        }
        std::fprintf(stderr,
                     "kwatt import: INTERRUPTED after %lld rows read; %s; the import is not "
                     "complete: import into a new store to have it whole\n",
                     static_cast<long long>(imported), kept.c_str());
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

}  // namespace kwatt::cli
