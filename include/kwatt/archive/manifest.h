// The manifest and the journal of a kwatt archive (doc/archive_format.md): their types, and the
// one parser of both, used by the writer (to resume a backup) and by every reader.
//
// Everything in a manifest or a journal is outside input: each field is checked for its type and
// range, names of data files are checked to stay inside data/, and the parts of a manifest are
// checked against each other (its nodes, its files and its window). Nothing here throws.
//
// Errors: NotFound (no such directory, no manifest), Corruption (a damaged or foreign manifest,
// parts that disagree, an unknown format version; the message names the file, the field and
// what to do), IOError (a file that cannot be read).
//
// Thread safety: the functions may be called from several threads at once.
#ifndef KWATT_ARCHIVE_MANIFEST_H_
#define KWATT_ARCHIVE_MANIFEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/row_sink.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::archive {

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
  std::string kwatt_version;             // of the kwatt that wrote it
  bool complete = false;                 // state "complete"; false: "incomplete"
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
  // The job of a --job backup as OAR told it (manifest "job"; absent in archives of kwatt 0.1
  // before it, and in backups of nodes and a window): its user, start and end (none while it
  // ran).
  bool has_job = false;
  std::string job_user;
  UnixNanos job_started = 0;
  std::optional<UnixNanos> job_stopped;
  std::vector<ManifestNode> nodes;
  // The metric catalogue of each cluster at backup time ("site/cluster"), in manifest order.
  ClusterCatalogues catalogue;

  // The query as the backup resolved it (nodes, window, job types, catalogues), as a fetch's
  // RowSink::Begin receives it.
  RowsReport Resolved() const;

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
// damaged, its parts disagree, or it has a format version this kwatt does not read (each naming
// the file and what to do).
//
// Checked beyond each field's type: the window's start is not after its end (and its start_ns and
// end_ns, when present, are its start and end); every node has a distinct data file; in a
// complete archive, every node's file is in `files`, every file of a node belongs to a listed
// node, every other file is an "_other.<site>" file, a file's rows per metric add up to its rows,
// a file with rows has its first and last timestamps and they lie inside the window (first not
// after last), a file without rows has neither.
Result<Manifest> ReadManifest(const std::string& dir);

// Why an incomplete archive is not read whole, and what to do: a backup writing it now (it holds
// the archive's lock: wait for its end), or one that was interrupted (run the same command
// again); either way --allow-incomplete reads what it committed so far.
std::string IncompleteArchiveMessage(const Manifest& manifest);

// The same from texts: `manifest_text` as read from DIR/manifest.json, `journal_text` that of
// DIR/journal.jsonl (nullptr when there is none). `dir` only names the archive in messages and
// in Manifest::dir.
Result<Manifest> ParseManifest(const std::string& dir, std::string_view manifest_text,
                               const std::string* journal_text);

// One record of journal.jsonl: what a backup has committed of a data file (doc/archive_format.md).
struct JournalRecord {
  std::string path;  // "data/<name>.jsonl.zst" (IsDataPath)
  int64_t rows = 0, bytes = 0, frames = 0;
  UnixNanos next = 0;       // rows of the file at or after this instant are not committed yet
  std::string first, last;  // "" when not recorded
  std::vector<std::pair<std::string, int64_t>> metrics;
};

// The journal's last valid record of each file, in order of the files' first appearance. A line
// that is not a valid record (not JSON, a field missing or of the wrong type or range, a file name
// outside data/) is skipped, and so is a last line without its '\n' (a crash may cut it; a resumed
// run then appends after it): the writer resumes and the readers read from the same records. The
// number of skipped lines (the cut last line excluded) goes to *skipped when given.
std::vector<JournalRecord> ParseJournal(std::string_view text, int* skipped = nullptr);

// True when `path` is the name of a data file: "data/<name>.jsonl.zst", <name> holding no '/'
// and no NUL, so nothing outside data/.
bool IsDataPath(std::string_view path);

}  // namespace kwatt::archive

#endif  // KWATT_ARCHIVE_MANIFEST_H_
