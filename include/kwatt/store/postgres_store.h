// The PostgreSQL engine of the store: Kwollect's own table, for a site that outgrows one process
// or wants SQL (doc/store.md). Rows go to
//
//   metrics(timestamp timestamptz, device_id text, metric_id text, value double precision,
//           labels jsonb)
//
// partitioned by time with PostgreSQL's native range partitioning (a partition per `partition_days`
// days, made on first use), indexed on (device_id, timestamp), so that SQL users and Grafana's
// PostgreSQL data source read it as they read Kwollect's. Rows are appended with binary COPY, one
// transaction per Append: a batch is stored whole or not at all, and is durable once Append
// returns (Flush has nothing left to do). Jobs and catalogues are in kwatt_jobs and
// kwatt_catalogues.
//
// What the table cannot keep, and how rows come back: the instant to the microsecond (as
// Kwollect); the value's bits (binary COPY keeps NaN payloads and negative zero); the labels as
// jsonb, read back in jsonb's own compact text (keys by length then bytes, as Kwollect serves
// them: labels that came from Kwollect come back byte for byte, others in that canonical form);
// the UTC offset is not stored: rows come back with Europe/Paris's offset at their instant, which
// is what Grid'5000 serves.
//
// Thread safety: as Store (one thread at a time per object; one connection each). Several
// processes may write one database at once.
#ifndef KWATT_STORE_POSTGRES_STORE_H_
#define KWATT_STORE_POSTGRES_STORE_H_

#include <cstddef>
#include <memory>
#include <string>

#include "kwatt/core/status.h"
#include "kwatt/store/store.h"

namespace kwatt::store {

struct PostgresStoreOptions {
  // Create the tables when the database has none (an empty database); otherwise NotFound.
  bool create_if_missing = true;
  // Days of rows per partition of `metrics` (from the epoch, in UTC).
  int partition_days = 7;
  // Check() stops listing problems after this many.
  size_t max_problems = 100;
};

// Connects to `uri` (libpq's connection URI, postgresql://USER@HOST:PORT/DB?host=SOCKETDIR, or
// its key=value form) and opens the store there. Errors: Unavailable (cannot connect; the message
// names the URI without its password), NotFound (no store tables and !create_if_missing),
// Corruption (tables of another format).
Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& uri,
                                                 const PostgresStoreOptions& options = {});

}  // namespace kwatt::store

#endif  // KWATT_STORE_POSTGRES_STORE_H_
