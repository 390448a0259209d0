// Reading kwatt archives (doc/archive_format.md): the manifest, the rows, and a full verification.
//
// Rows can be read two ways: streamed (ArchiveReader: file after file, one zstd frame at a time, in
// bounded memory; what `kwatt cat` and `kwatt export` use) or loaded whole into one RowBatch
// (LoadArchive: files read and frames decompressed by several threads, parsed straight into the
// table; about 6 million rows per second on 2 cores; what the Python package's kwatt.load uses).
// Both give the same rows in the same order: the data files in manifest order, each file's rows in
// its order, every row with its exact text.
//
// Everything read is verified as it is read, so that a damaged archive is never taken for a
// smaller one: each data file has the size the manifest records (a shorter file is "truncated"),
// each zstd frame is whole, carries a content size and a checksum that zstd checks, and holds
// whole rows; every row is strict JSON and a valid Kwollect row; each file holds exactly the rows
// the manifest counts, per metric too. LoadArchive and ArchiveReader also check the file's XXH64
// before decoding it. A file skipped by the filters (its nodes, metrics or time range cannot match,
// from the manifest) is not read, so not verified: VerifyArchive checks everything.
//
// An incomplete archive (a backup that stopped before its end) is refused unless
// LoadOptions::allow_incomplete: then the part of each file that the journal records as committed
// is read (exactly what a resumed backup keeps), and the result says it is incomplete.
//
// Errors: NotFound (no such directory, no manifest, an unknown node or metric in the options),
// Corruption (a damaged or foreign manifest, an unknown format version, a damaged data file; the
// message names the file and what differs), Incomplete (an incomplete archive, not allowed),
// InvalidArgument (bad options), IOError (a file that cannot be read).
//
// Thread safety: the functions may be called from several threads at once; an ArchiveReader
// belongs to one thread at a time.
#ifndef KWATT_ARCHIVE_READER_H_
#define KWATT_ARCHIVE_READER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/archive/manifest.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::archive {

// The manifest (Manifest, ManifestFile, ReadManifest): kwatt/archive/manifest.h.

// ---------------------------------------------------------------------------------------------
// Reading rows.

struct LoadOptions {
  // Nodes whose files to read, as FQDN or uid.site (KaVLAN names too); empty: every file, those of
  // other devices included. A node that is not in the archive is NotFound.
  std::vector<std::string> nodes;
  // Metric ids to keep; empty: every metric. A metric that is in no file of the archive, nor in
  // its query or catalogue, is NotFound.
  std::vector<std::string> metrics;
  // Rows whose instant is in [start, end] (each bound optional) are kept.
  std::optional<UnixNanos> start, end;
  // Read an incomplete archive (its committed part) instead of refusing it.
  bool allow_incomplete = false;

  // LoadArchive only: threads reading files and decompressing frames, the calling one parsing
  // (0: as many as the hardware has), and whether to keep each row's text (RowBatch::raw; without
  // it, raw and raw_end stay as they were: about 160 of the 200 bytes a wattmeter row takes).
  int threads = 0;
  bool keep_raw = true;
  // LoadArchive only: asked between frames; true stops the load (Incomplete "interrupted",
  // nothing appended): Ctrl-C in Python.
  std::function<bool()> cancelled;
};

// The most threads LoadArchive takes (LoadOptions::threads beyond it: InvalidArgument): more than
// a machine has cores only costs memory, and a thread per file of a huge number would exhaust it.
inline constexpr int kMaxLoadThreads = 256;

// Where the rows of one data file went.
struct LoadedFile {
  std::string path, node, site;  // as in ManifestFile
  size_t begin = 0, end = 0;     // its rows in the batch: [begin, end)
};

struct LoadReport {
  bool complete = true;           // false: an incomplete archive, read as allowed
  std::vector<LoadedFile> files;  // the files read, in order (skipped ones are absent)
  int64_t rows_read = 0;          // rows decoded and checked (whole files)
  int64_t rows = 0;               // rows kept (appended to the batch)
  int64_t compressed_bytes = 0;   // read from disk
  int64_t text_bytes = 0;         // decompressed
};

// Appends the selected rows of the archive in DIR to `out`, whose ids refer to `interner` (it may
// already hold rows). On error, `out` and `interner` are left as they were, except that the
// interner may hold new strings.
// REQUIRES: `out` uses `interner`; every load into one batch has the same keep_raw; with
// keep_raw, out->raw stays under 4 GiB (InvalidArgument otherwise, naming the filters to use).
Status LoadArchive(const std::string& dir, const LoadOptions& options, StringInterner* interner,
                   RowBatch* out, LoadReport* report = nullptr);

// Streams the selected rows of an archive, one zstd frame of one file at a time.
//
//   Result<std::unique_ptr<ArchiveReader>> reader = ArchiveReader::Open(dir, options);
//   RowBatch batch;
//   while ((*reader)->Next(&batch)) Use((*reader)->current_file(), batch, (*reader)->interner());
//   if (!(*reader)->status().ok()) ...
//
// A frame's rows are handed out once the frame was checked whole; a file's XXH64 and size are
// checked before any of its rows; its row counts once its last frame was read (so a file whose
// counts differ from the manifest has had its rows handed out before the error). Memory: one
// frame (about 1 MiB of text, per the format) and a read buffer.
class ArchiveReader {
 public:
  // Reads the manifest and checks the options (see LoadArchive's errors).
  static Result<std::unique_ptr<ArchiveReader>> Open(const std::string& dir,
                                                     const LoadOptions& options);
  ~ArchiveReader();
  ArchiveReader(const ArchiveReader&) = delete;
  ArchiveReader& operator=(const ArchiveReader&) = delete;

  const Manifest& manifest() const;
  // The files that will be read, in order (the filters applied to the manifest).
  const std::vector<ManifestFile>& files() const;

  // Replaces `batch`'s rows with the next ones (at least one row). Returns false at the end or on
  // an error; status() then tells which. Ids refer to interner().
  bool Next(RowBatch* batch);
  // The file of the rows Next() returned last.
  const ManifestFile& current_file() const;
  const StringInterner& interner() const;
  // OK, or the error that ended Next().
  const Status& status() const;
  // Rows handed out so far.
  int64_t rows() const;

 private:
  ArchiveReader();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---------------------------------------------------------------------------------------------
// Verifying.

struct VerifyReport {
  bool complete = false;  // the manifest's state
  // One line per damage, naming the file and what differs: "data/x.jsonl.zst: xxh64 is ...,
  // the manifest records ...". Empty when intact.
  std::vector<std::string> problems;
  int64_t files = 0;  // data files checked
  int64_t rows = 0;   // rows read
  int64_t bytes = 0;  // compressed bytes read
};

// Checks the whole archive in DIR: every file the manifest lists exists and has its recorded
// size, XXH64, frame count, rows and rows per metric, first and last timestamps; every frame and
// row is valid; data/ holds no other file. An incomplete archive is checked up to what its journal
// records as committed. Returns OK when nothing is damaged (report->complete tells whether the
// archive is complete), Corruption naming the first damage and how many there are (all of them
// in report->problems), or ReadManifest's errors.
Status VerifyArchive(const std::string& dir, VerifyReport* report);

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_READER_H_
