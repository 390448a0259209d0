// VerifyArchive: every frame of every file decoded in parallel, rows counted (not kept), every
// problem collected.
#include <algorithm>
#include <filesystem>
#include <set>

#include "kwatt/archive/format.h"
#include "kwatt/archive/reader.h"
#include "src/archive/read_internal.h"

namespace kwatt::archive {

namespace fs = std::filesystem;
using internal::CheckTally;
using internal::FileTally;
using internal::FileWork;
using internal::FrameDecoder;
using internal::FrameSpan;
using internal::FrameWhere;
using internal::ReadFiles;
using internal::Select;
using internal::Selection;
using internal::ThreadCount;

namespace {

// Verification: every frame of every file decoded in parallel (rows counted, not kept), then
// each file's counts checked. Every problem is collected.
Status VerifyFiles(const Manifest& m, const Selection& selection, int threads,
                   std::vector<FileWork>* works) {
  KWATT_RETURN_IF_ERROR(ReadFiles(m, selection, threads, /*verify=*/true, works));
  struct Unit {
    size_t file, frame;
    int worker = -1;
    Status status;
    int64_t rows = 0;
    std::optional<UnixNanos> first, last;
    std::map<std::string, int64_t> metrics;
  };
  std::vector<Unit> units;
  for (size_t i = 0; i < works->size(); ++i) {
    for (size_t k = 0; k < (*works)[i].frames.size(); ++k) units.push_back(Unit{i, k});
  }
  struct Worker {
    FrameDecoder decoder;
    StringInterner interner;
    RowBatch rows;
    std::vector<int64_t> counts;
  };
  std::vector<std::unique_ptr<Worker>> workers;
  for (int k = 0; k < std::max(1, threads); ++k) workers.push_back(std::make_unique<Worker>());
  ParallelFor(units.size(), threads, [&](size_t u, int k) {
    Unit& unit = units[u];
    Worker& worker = *workers[k];
    const FileWork& w = (*works)[unit.file];
    const FrameSpan& span = w.frames[unit.frame];
    worker.rows.Clear();
    unit.worker = k;
    unit.status = worker.decoder.Decode(std::string_view(w.data.get() + span.offset, span.size),
                                        span.content_size, &worker.interner, &worker.rows,
                                        FrameWhere(w.file->path, unit.frame, span.offset));
    if (!unit.status.ok()) return true;
    FileTally tally;
    tally.CountRows(worker.rows, 0, &worker.counts);
    tally.AddCounts(&worker.counts, worker.interner);
    unit.rows = tally.rows;
    unit.first = tally.first;
    unit.last = tally.last;
    unit.metrics = std::move(tally.metrics);
    return true;
  });
  size_t u = 0;
  for (FileWork& w : *works) {
    bool decoded = w.framed;
    for (size_t k = 0; k < w.frames.size(); ++k, ++u) {
      Unit& unit = units[u];
      if (!unit.status.ok()) {
        if (unit.status.code() != Status::Code::kCorruption) return unit.status;
        w.problems.push_back(unit.status.message());
        decoded = false;
        continue;
      }
      w.tally.rows += unit.rows;
      if (unit.first && !w.tally.first) w.tally.first = unit.first;
      if (unit.last) w.tally.last = unit.last;
      for (const auto& [metric, rows] : unit.metrics) w.tally.metrics[metric] += rows;
    }
    if (decoded) {
      for (std::string& problem : CheckTally(*w.file, w.tally, /*check_bounds=*/true)) {
        w.problems.push_back(std::move(problem));
      }
    }
  }
  return Status::OK();
}

}  // namespace

Status VerifyArchive(const std::string& dir, VerifyReport* report) {
  *report = VerifyReport();
  Result<Manifest> manifest = ReadManifest(dir);
  if (!manifest.ok()) return manifest.status();
  report->complete = manifest->complete;
  LoadOptions options;
  options.allow_incomplete = true;
  Result<Selection> selection = Select(*manifest, options);
  if (!selection.ok()) return selection.status();

  // Files the manifest does not list (an incomplete archive's data/ may hold files of nodes with
  // nothing committed yet: only those the manifest or journal name are expected).
  std::set<std::string> listed;
  for (const ManifestFile& f : manifest->files) listed.insert(f.path);
  std::error_code error;
  std::vector<std::string> extra;
  fs::path data_dir = fs::path(dir) / kDataDir;
  if (fs::is_directory(data_dir, error)) {
    for (const auto& entry : fs::directory_iterator(data_dir, error)) {
      std::string rel = std::string(kDataDir) + "/" + entry.path().filename().string();
      if (!listed.count(rel)) extra.push_back(rel);
    }
  }
  std::sort(extra.begin(), extra.end());

  std::vector<FileWork> works;
  Status io_error = VerifyFiles(*manifest, *selection, ThreadCount(0), &works);
  for (const FileWork& w : works) {
    ++report->files;
    report->bytes += int64_t(w.size);
    report->rows += w.tally.rows;
    for (const std::string& problem : w.problems) report->problems.push_back(problem);
  }
  if (manifest->complete) {
    for (const std::string& rel : extra) {
      report->problems.push_back(rel +
                                 ": not listed in the manifest (a file that does not belong "
                                 "to the archive)");
    }
  }
  if (!io_error.ok()) return io_error;
  if (!report->problems.empty()) {
    return Status::Corruption(
        "archive " + dir + " is damaged: " + report->problems.front() +
        (report->problems.size() > 1
             ? " (and " + std::to_string(report->problems.size() - 1) + " more problem(s))"
             : std::string()));
  }
  return Status::OK();
}

}  // namespace kwatt::archive
