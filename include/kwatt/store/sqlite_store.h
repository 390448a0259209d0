// The embedded store: one SQLite file laid out for time series (doc/store.md). Per series, rows are
// kept in blocks of consecutive samples, encoded column by column and compressed with zstd, keyed
// by (series, first instant, last instant) for range reads; the rows of a series' still-open block
// are plain rows of a "head" table, visible to Query at once, sealed into a block when the head
// holds `head_rows` rows or is older than `head_max_age`.
//
// The file is in WAL mode with synchronous=NORMAL: a committed transaction survives the death of
// the process; a power loss may lose the last ones, never the file's consistency. One writer at a
// time (SQLite's lock; a second writer waits up to `busy_timeout_ms`, then gets Unavailable);
// readers in other processes see the last committed state and never block the writer.
//
// Thread safety: as Store (one thread at a time per object).
#ifndef KWATT_STORE_SQLITE_STORE_H_
#define KWATT_STORE_SQLITE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "kwatt/core/clock.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/store/store.h"

namespace kwatt::store {

struct SqliteStoreOptions {
  // Create the file (and its store tables) when it does not exist; otherwise NotFound.
  bool create_if_missing = true;
  // A series' head is sealed into a block once it holds this many rows (doc/store.md: measured).
  size_t head_rows = 1024;
  // ...or once its oldest row was appended this long ago (by `clock`), checked at Append and
  // Flush.
  int64_t head_max_age_ns = 10 * 60 * kNanosPerSecond;
  // Append commits by itself when the open transaction is this old (by `clock`), so that a crash
  // loses at most this much of the rows appended before it (as long as the writer keeps
  // appending; one that stops calls Flush).
  int64_t flush_interval_ns = kNanosPerSecond;
  // The clock of the two rules above (its wall time); null: the system's. Tests inject theirs.
  std::shared_ptr<Clock> clock;
  // How long a writer waits for another one to finish, in milliseconds.
  int busy_timeout_ms = 5000;
  // Check() stops listing problems after this many.
  size_t max_problems = 100;
};

// Opens (or creates) the store in the SQLite file `path`. Errors: NotFound (no file and
// !create_if_missing), IOError (cannot open or create), Corruption (not a SQLite file, or not a
// kwatt store, or one of a newer format).
Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteStoreOptions& options = {});

}  // namespace kwatt::store

#endif  // KWATT_STORE_SQLITE_STORE_H_
