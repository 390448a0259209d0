// A metrics store: rows that kwatt keeps itself (collected, imported, pushed), their jobs and the
// metric catalogue of each cluster, behind one interface with several engines: the embedded one
// on SQLite (kwatt/store/sqlite_store.h, doc/store.md) and, later, PostgreSQL (Kwollect's table).
//
// Rows are Kwollect's: (instant, UTC offset, device, metric, value, labels). A store keeps the
// instant to the microsecond (as Kwollect does), the UTC offset it was written with, the value's
// exact bits (NaN payloads, negative zero) and the labels text exactly as given. A series is a
// (device, metric, labels) triple.
//
// Thread safety: a Store object is used by one thread at a time (it is not synchronised). Other
// processes or Store objects may read the same store while one writes (see the engine).
#ifndef KWATT_STORE_STORE_H_
#define KWATT_STORE_STORE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/catalogue.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/jobs/job.h"

namespace kwatt::store {

// Which rows a Query streams.
struct StoreQuery {
  // Devices, in any order (duplicates are ignored); empty: every device of the store.
  std::vector<std::string> devices;
  // Metrics; empty: every metric.
  std::vector<std::string> metrics;
  // The window [start, end): UTC nanoseconds, start inclusive, end exclusive.
  UnixNanos start = 0;
  UnixNanos end = 0;
  // Rows per batch handed to the callback (at most); the last batch may hold fewer.
  size_t batch_rows = 8192;
};

// Receives a Query's rows. `interner` is the query's own: the ids of every batch refer to it and
// stay valid for the whole query. `batch.raw` is empty (a store keeps fields, not text). A non-OK
// status stops the query, which returns it.
using QueryCallback = std::function<Status(const RowBatch& batch, const StringInterner& interner)>;

// What a store holds.
struct StoreInfo {
  int64_t series = 0;
  int64_t rows = 0;       // sealed and open
  int64_t blocks = 0;     // sealed blocks
  int64_t head_rows = 0;  // rows not sealed into a block yet
  int64_t bytes = 0;      // on disk, the write-ahead log included
  UnixNanos first = 0;    // the earliest and the latest instant stored (0, 0 when empty)
  UnixNanos last = 0;
  int64_t jobs = 0;
  int64_t catalogues = 0;
};

// Whether a store is sound.
struct CheckReport {
  int64_t blocks_checked = 0;
  int64_t rows_checked = 0;
  // What is wrong, each naming the place ("block 12 (series 3: nova-1 wattmetre_power_watt {},
  // 2025-04-18T16:55:33Z..): its checksum is ..."); at most max_problems of them.
  std::vector<std::string> problems;

  bool ok() const { return problems.empty(); }
};

// How far an import of an archive has got in a store (kwatt import): how many of the archive's
// rows, in the archive's order, the store holds, and whether that is all of them.
struct ImportMark {
  int64_t rows = 0;
  bool done = false;

  bool operator==(const ImportMark&) const = default;
};

class Store {
 public:
  virtual ~Store() = default;

  // Adds the rows of `batch` (ids referring to `interner`; `raw` is not read). Rows may come in
  // any order, for any series, before or after rows already stored. Either every row of the batch
  // is appended or none is: a time with a fraction finer than the microsecond is refused
  // (InvalidArgument naming the row), as is a device or metric id that is empty.
  // Appended rows are seen by Query on this object at once; they are durable once a Flush()
  // returns OK (the engine may flush by itself too: see its options).
  [[nodiscard]] virtual Status Append(const RowBatch& batch, const StringInterner& interner) = 0;

  // Append(batch), and in the same transaction the mark of import `key` moved from `from`
  // (std::nullopt: no mark yet) to `to`: rows and mark are durable together (at the next Flush),
  // so that an import killed at any point leaves a mark that says how many of its rows the store
  // holds. Unavailable, and nothing appended, when the mark is not at `from` (another import of the
  // same archive writes to the store). An empty batch moves the mark alone.
  [[nodiscard]] virtual Status AppendImported(const RowBatch& batch, const StringInterner& interner,
                                              const std::string& key,
                                              const std::optional<ImportMark>& from,
                                              const ImportMark& to) = 0;

  // The mark of import `key` (std::nullopt when no import of it has put rows in this store).
  [[nodiscard]] virtual Result<std::optional<ImportMark>> GetImportMark(const std::string& key) = 0;

  // Makes every row appended so far durable: after it returns OK, a crash of the process (kill -9)
  // loses none of them.
  [[nodiscard]] virtual Status Flush() = 0;

  // Flush(), and the rows that an engine keeps in plain form while they may still grow (the
  // embedded engine's heads: see doc/store.md) put into their compact form whatever their size or
  // age: for the end of a bulk load (kwatt import), after which queries read compact rows only.
  [[nodiscard]] virtual Status Seal() = 0;

  // Streams the rows of `query` to `callback`, in batches: device after device in byte order of
  // their ids; each device's rows in time order; rows of one device at the same instant by metric
  // id, then labels text (byte order), then in the order they were appended. Memory stays bounded
  // whatever the size of the store or of the window.
  [[nodiscard]] virtual Status Query(const StoreQuery& query, const QueryCallback& callback) = 0;

  // Jobs: one per (site, uid); PutJob replaces an earlier one. A store keeps a job's first seven
  // fields (site to types, kwatt/jobs/job.h); a job read back has the others' defaults.
  [[nodiscard]] virtual Status PutJob(const jobs::Job& job) = 0;
  // Adds a job that the site does not have yet, in one transaction, so that processes adding jobs
  // at once each get their own id and keep their job. With `next_id`, job.uid is ignored and the
  // job gets one more than the site's highest id (1 on a site without jobs); InvalidArgument when
  // that highest id is INT64_MAX (no id wraps). Without, InvalidArgument when the site has a job
  // of job.uid already (PutJob is what replaces one). Returns the id the job was stored under.
  [[nodiscard]] virtual Result<int64_t> AddJob(const jobs::Job& job, bool next_id) = 0;
  // NotFound when the store has no such job.
  [[nodiscard]] virtual Result<jobs::Job> GetJob(const std::string& site, int64_t id) = 0;
  // The jobs of `site` that overlap [start, end), by start then id.
  [[nodiscard]] virtual Result<std::vector<jobs::Job>> Jobs(const std::string& site,
                                                            UnixNanos start, UnixNanos end) = 0;

  // The metric catalogue of a cluster (kept as its `metrics` array's JSON, Catalogue::json()).
  [[nodiscard]] virtual Status PutCatalogue(const std::string& site, const std::string& cluster,
                                            const Catalogue& catalogue) = 0;
  // NotFound when the store has none for that cluster; Corruption naming the cluster when the
  // stored text is not a catalogue (parsed here, where it enters).
  [[nodiscard]] virtual Result<Catalogue> GetCatalogue(const std::string& site,
                                                       const std::string& cluster) = 0;

  // Checks the whole store (reads every byte of it): the engine's own structure, then every block
  // of rows. A store that cannot be read at all is an error status; a damaged one is a report
  // with problems.
  [[nodiscard]] virtual Result<CheckReport> Check() = 0;
  [[nodiscard]] virtual Result<StoreInfo> Info() = 0;

  // True when this object can no longer reach its store: an engine with a server (PostgreSQL)
  // whose connection broke, or that the server closed (a restart), seen without a round trip
  // (what the server already sent is read). Such an object only fails: open the store again.
  // An embedded store is never lost.
  virtual bool ConnectionLost() { return false; }
};

}  // namespace kwatt::store

#endif  // KWATT_STORE_STORE_H_
