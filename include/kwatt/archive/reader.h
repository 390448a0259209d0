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
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::archive {

// ---------------------------------------------------------------------------------------------
// The manifest.

struct ManifestNode {
  std::string node;  // FQDN: "nova-1.lyon.grid5000.fr"
  std::string uid;   // "nova-1"
  std::string site;  // "lyon"
  std::string cluster;
  std::string file;  // "data/nova-1.lyon.grid5000.fr.jsonl.zst"
};

struct ManifestFile {
  std::string path;  // relative to the archive: "data/nova-1.lyon.grid5000.fr.jsonl.zst"
  std::string node;  // FQDN; "" for the rows of other devices (data/_other.<site>.jsonl.zst)
  std::string site;  // the site of the file's rows
  int64_t rows = 0;
  int64_t bytes = 0;   // compressed size
  int64_t frames = 0;  // zstd frames
  std::string xxh64;   // XXH64 (seed 0) of the whole file, 16 lowercase hex digits; "" if unknown
  std::string first, last;  // timestamps of the first and last rows as recorded; "" when none
  std::vector<std::pair<std::string, int64_t>> metrics;  // rows per metric id, as recorded
};

struct Manifest {
  std::string dir;  // the archive's directory, as given
  int format_version = 0;
  std::string kwatt_version;  // of the kwatt that wrote it
  bool complete = false;      // state "complete"; false: "incomplete"
  std::string created_at, completed_at;  // RFC 3339 UTC texts; completed_at "" while incomplete

  // The query, as given to `kwatt backup`.
  struct Query {
    std::string api;
    std::vector<std::string> nodes;
    std::string start, end;  // epoch seconds with 6 decimals; "" when not given (a job's window)
    std::string job_site;    // "" when no job
    int64_t job_id = 0;
    std::vector<std::string> metrics;  // empty: every metric
    bool summary = false;
  } query;

  // The window fetched (inclusive bounds); unknown (has_window false) when the backup stopped
  // before resolving it.
  bool has_window = false;
  UnixNanos window_start = 0, window_end = 0;

  std::vector<std::string> sites;
  std::vector<std::string> job_types;
  std::vector<ManifestNode> nodes;
  // The metric catalogue of each cluster at backup time: "site/cluster" -> its JSON text.
  std::vector<std::pair<std::string, std::string>> catalogue;

  // The data files, in manifest order (the nodes', then the other devices'). For an incomplete
  // archive: what the journal records as committed (rows, bytes, frames, and first/last/metrics
  // when the journal has them; xxh64 ""), for every node and every file the journal names.
  std::vector<ManifestFile> files;

  // The fetch summary; absent while incomplete.
  struct Fetch {
    int64_t requests = 0, retries = 0, splits = 0;
    double seconds = 0;
  };
  std::optional<Fetch> fetch;

  // Whether journal.jsonl exists (it should exactly when the archive is incomplete).
  bool has_journal = false;

  int64_t rows() const;   // over every file
  int64_t bytes() const;  // over every file
  // Rows per metric over every file, in order of first appearance.
  std::vector<std::pair<std::string, int64_t>> MetricRows() const;
};

// Reads DIR/manifest.json (and, for an incomplete archive, DIR/journal.jsonl). NotFound when DIR
// or its manifest does not exist; Corruption when the manifest is not a kwatt archive's, is
// damaged, or has a format version this kwatt does not read (each naming the file and what to do).
Result<Manifest> ReadManifest(const std::string& dir);

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
};

// Where the rows of one data file went.
struct LoadedFile {
  std::string path, node, site;  // as in ManifestFile
  size_t begin = 0, end = 0;     // its rows in the batch: [begin, end)
};

struct LoadReport {
  bool complete = true;            // false: an incomplete archive, read as allowed
  std::vector<LoadedFile> files;   // the files read, in order (skipped ones are absent)
  int64_t rows_read = 0;           // rows decoded and checked (whole files)
  int64_t rows = 0;                // rows kept (appended to the batch)
  int64_t compressed_bytes = 0;    // read from disk
  int64_t text_bytes = 0;          // decompressed
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
  int64_t files = 0;   // data files checked
  int64_t rows = 0;    // rows read
  int64_t bytes = 0;   // compressed bytes read
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
