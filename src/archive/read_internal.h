// What the readers of an archive share (LoadArchive in load.cc, VerifyArchive in verify.cc,
// ArchiveReader in stream.cc; this in reader.cc): choosing the files to read, opening and checking
// them, counting their rows against the manifest, reading files in parallel. Internal to the
// archive library.
#ifndef KWATT_SRC_ARCHIVE_READ_INTERNAL_H_
#define KWATT_SRC_ARCHIVE_READ_INTERNAL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/archive/reader.h"
#include "kwatt/core/worker_pool.h"
#include "src/archive/frames.h"

namespace kwatt::archive::internal {

inline constexpr size_t kReadChunk = 1 << 20;  // bytes read from a file at a time (streaming)

// "a, b, c", at most `max_items` of them; "none" when empty.
std::string JoinList(const std::vector<std::string>& items, size_t max_items = 12);
std::string Errno();  // strerror(errno)

// ---------------------------------------------------------------------------------------------
// Choosing what to read.

struct Selection {
  std::vector<ManifestFile> files;   // to read, in manifest order
  std::vector<std::string> metrics;  // to keep; empty: all
  std::optional<UnixNanos> start, end;
  bool filters_rows() const { return !metrics.empty() || start || end; }
};

// The files of the manifest that the options select (or the options' error: an incomplete archive
// not allowed, an unknown node or metric, start after end).
Result<Selection> Select(const Manifest& m, const LoadOptions& options);

// ---------------------------------------------------------------------------------------------
// Files and rows.

// "archive DIR is damaged: data/x.jsonl.zst: <what> (...)".
Status Damaged(const std::string& dir, const std::string& problem);

// InvalidArgument: more than a table's 4 GiB of text.
Status TooMuchText(size_t bytes);

// The rows of `src` from `from` on that pass the filters, appended to `dst` (same interner).
// `metric_ids`: the ids of the wanted metrics (empty: all). InvalidArgument if dst->raw would
// pass 4 GiB.
Status AppendFiltered(const RowBatch& src, size_t from, const std::vector<uint32_t>& metric_ids,
                      const Selection& selection, bool keep_raw, RowBatch* dst);

// What was read of one file, for the per-file checks.
struct FileTally {
  int64_t rows = 0;
  std::map<std::string, int64_t> metrics;
  std::optional<UnixNanos> first, last;  // instants of its first and last rows

  // Counts rows [from, size) of `batch`; `by_id` counts rows per metric id (grown as needed).
  void CountRows(const RowBatch& batch, size_t from, std::vector<int64_t>* by_id) {
    if (from >= batch.size()) return;
    if (!first) first = batch.time[from];
    last = batch.time.back();
    rows += int64_t(batch.size() - from);
    for (size_t i = from; i < batch.size(); ++i) {
      uint32_t id = batch.metric[i];
      if (id >= by_id->size()) by_id->resize(id + 1, 0);
      ++(*by_id)[id];
    }
  }
  void AddCounts(std::vector<int64_t>* by_id, const StringInterner& interner) {
    for (size_t id = 0; id < by_id->size(); ++id) {
      if ((*by_id)[id] > 0) metrics[std::string(interner.Get(uint32_t(id)))] += (*by_id)[id];
    }
    by_id->clear();
  }
};

// The problems of a file whose rows were all read: rows, rows per metric, and (check_bounds)
// first and last.
std::vector<std::string> CheckTally(const ManifestFile& file, const FileTally& tally,
                                    bool check_bounds);

// Opens a data file and checks its size against what the manifest (or journal) records. Sets
// *fd (-1 for a missing file that should be empty).
Status OpenDataFile(const std::string& dir, const ManifestFile& file, bool complete, int* fd,
                    int64_t* size);

Status ReadExactly(int fd, char* data, size_t size, int64_t offset, const std::string& path);

// `asked`, or the hardware's thread count when 0.
int ThreadCount(int asked);

// ---------------------------------------------------------------------------------------------
// The parallel engine of LoadArchive and VerifyArchive.

struct FileWork {
  const ManifestFile* file = nullptr;
  std::unique_ptr<char[]> data;  // the bytes read (the committed part when incomplete)
  size_t size = 0;
  std::vector<FrameSpan> frames;
  bool framed = false;                // read, and split into frames
  Status io_error;                    // the file could not be read (not a damage)
  std::vector<std::string> problems;  // damage found (verify: all of it; load: the first)
  FileTally tally;
};

// Phase 1 over every selected file, in parallel: each read, its size and XXH64 checked (a file
// whose XXH64 differs is not split: none of its frames is decoded), split into frames. Returns the
// first I/O error, or (not verifying) the first damage, in file order.
Status ReadFiles(const Manifest& m, const Selection& selection, int threads, bool verify,
                 std::vector<FileWork>* works);

}  // namespace kwatt::archive::internal

#endif  // KWATT_SRC_ARCHIVE_READ_INTERNAL_H_
