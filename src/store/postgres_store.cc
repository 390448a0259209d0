#include "kwatt/store/postgres_store.h"

#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/null_value.h"
#include "kwatt/core/text.h"
#include "kwatt/core/time.h"
#include "kwatt/store/open_store.h"
#include "src/store/append_rules.h"
#include "src/store/job_rules.h"

namespace kwatt::store {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kFormat = "kwatt-store-postgres";
constexpr std::string_view kVersion = "1";
// PostgreSQL's timestamps count microseconds from 2000-01-01T00:00:00Z.
constexpr int64_t kPostgresEpochMicros = 946'684'800LL * 1'000'000;
constexpr int64_t kNanosPerDay = 86'400LL * kNanosPerSecond;
// pg_advisory_xact_lock keys: creating the tables, creating partitions.
constexpr int64_t kSchemaLock = 0x6b77617474'01;
constexpr int64_t kPartitionLock = 0x6b77617474'02;

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// jsonb's text (`{"a": 1, "b": [1, 2]}`) without the spaces jsonb puts after ':' and ',' outside
// strings: the compact form Kwollect serves.
std::string CompactJsonb(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      out.push_back(c);
      if (c == '\\' && i + 1 < text.size()) {
        out.push_back(text[++i]);
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == ' ' && !out.empty() && (out.back() == ':' || out.back() == ',')) continue;
    if (c == '"') in_string = true;
    out.push_back(c);
  }
  return out;
}

// An array literal of text for a text[] parameter: {"a","b\"c"}.
std::string TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (const std::string& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : item) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// Microseconds of `t`, rounded down; and rounded up (without overflow at the ends of time).
std::string MicrosText(UnixNanos t) { return std::to_string(FloorDiv(t, kNanosPerMicro)); }
std::string CeilMicrosText(UnixNanos t) { return std::to_string(CeilDiv(t, kNanosPerMicro)); }

// Big-endian integers, as COPY's binary format and binary results have them.
void PutBig(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(char((value >> (8 * i)) & 0xff));
}
uint64_t GetBig(const char* p, int bytes) {
  uint64_t value = 0;
  for (int i = 0; i < bytes; ++i) value = (value << 8) | uint8_t(p[i]);
  return value;
}

// The first day (UTC, as days from the epoch) of the partition holding `t`.
int64_t PartitionStartDay(UnixNanos t, int partition_days) {
  int64_t day = FloorDiv(t, kNanosPerDay);
  return FloorDiv(day, partition_days) * partition_days;
}

// "2025-04-14" for a day count from the epoch.
std::string DayText(int64_t day) {
  std::string utc = FormatUtcTimestamp(day * kNanosPerDay);  // "2025-04-14T00:00:00Z"
  return utc.substr(0, utc.find('T'));
}

class PostgresStore : public Store {
 public:
  PostgresStore(PGconn* conn, std::string shown_uri, PostgresStoreOptions options)
      : conn_(conn), shown_uri_(std::move(shown_uri)), options_(std::move(options)) {}
  ~PostgresStore() override { PQfinish(conn_); }

  Status Init() {
    KWATT_RETURN_IF_ERROR(Exec("SET client_min_messages = warning"));
    KWATT_ASSIGN_OR_RETURN(PgResult exists, Select("SELECT to_regclass('kwatt_meta') IS NOT NULL, "
                                                   "to_regclass('metrics') IS NOT NULL"));
    bool has_meta = Bool(exists.get(), 0, 0), has_metrics = Bool(exists.get(), 0, 1);
    if (!has_meta) {
      if (has_metrics) {
        return Status::Corruption(shown_uri_ +
                                  " has a metrics table that is not a kwatt store's: use another "
                                  "database");
      }
      if (!options_.create_if_missing) {
        return Status::NotFound(shown_uri_ + " holds no kwatt store");
      }
      KWATT_RETURN_IF_ERROR(CreateTables());
    }
    KWATT_ASSIGN_OR_RETURN(PgResult meta, Select("SELECT key, value FROM kwatt_meta"));
    std::map<std::string, std::string> values;
    for (int i = 0; i < PQntuples(meta.get()); ++i) {
      values[PQgetvalue(meta.get(), i, 0)] = PQgetvalue(meta.get(), i, 1);
    }
    if (values["format"] != kFormat || values["version"] != kVersion) {
      return Status::Corruption(shown_uri_ + " holds a store of format \"" + values["format"] +
                                "\" version \"" + values["version"] + "\", not " +
                                std::string(kFormat) + " " + std::string(kVersion) +
                                ": use the kwatt that made it");
    }
    // The store's own partitioning wins over the options (its partitions are already laid out).
    int days = std::atoi(values["partition_days"].c_str());
    if (days < 1) return Status::Corruption(shown_uri_ + ": kwatt_meta.partition_days is damaged");
    options_.partition_days = days;
    return Status::OK();
  }

  Status Append(const RowBatch& batch, const StringInterner& interner) override {
    KWATT_RETURN_IF_ERROR(internal::CheckAppendable(batch, interner));
    if (batch.empty()) return Status::OK();
    KWATT_RETURN_IF_ERROR(Exec("BEGIN"));
    Status status = AppendInTransaction(batch, interner);
    if (!status.ok()) {
      (void)Exec("ROLLBACK");
      partitions_.clear();  // those made in the transaction are gone with it
      return status;
    }
    return Exec("COMMIT");
  }

  Status AppendImported(const RowBatch& batch, const StringInterner& interner,
                        const std::string& key, const std::optional<ImportMark>& from,
                        const ImportMark& to) override {
    KWATT_RETURN_IF_ERROR(internal::CheckAppendable(batch, interner));
    KWATT_RETURN_IF_ERROR(Exec("BEGIN"));
    Status status = [&]() -> Status {
      // FOR UPDATE: a second import of the same archive waits here for the first's commit, then
      // finds the mark moved (and a second first mark fails on the key).
      KWATT_ASSIGN_OR_RETURN(PgResult got, Select("SELECT value FROM kwatt_meta WHERE key = $1 "
                                                  "FOR UPDATE",
                                                  {internal::ImportMarkKey(key)}));
      std::optional<ImportMark> now;
      if (PQntuples(got.get()) > 0) {
        KWATT_ASSIGN_OR_RETURN(now, internal::ParseImportMark(key, PQgetvalue(got.get(), 0, 0)));
      }
      KWATT_RETURN_IF_ERROR(internal::CheckImportMarkIs(key, now, from));
      if (!batch.empty()) KWATT_RETURN_IF_ERROR(AppendInTransaction(batch, interner));
      return Exec(now ? "UPDATE kwatt_meta SET value = $2 WHERE key = $1"
                      : "INSERT INTO kwatt_meta VALUES ($1, $2)",
                  {internal::ImportMarkKey(key), internal::ImportMarkText(to)});
    }();
    if (!status.ok()) {
      (void)Exec("ROLLBACK");
      partitions_.clear();  // those made in the transaction are gone with it
      return status;
    }
    return Exec("COMMIT");
  }

  Result<std::optional<ImportMark>> GetImportMark(const std::string& key) override {
    KWATT_ASSIGN_OR_RETURN(PgResult got, Select("SELECT value FROM kwatt_meta WHERE key = $1",
                                                {internal::ImportMarkKey(key)}));
    if (PQntuples(got.get()) == 0) return std::optional<ImportMark>();
    KWATT_ASSIGN_OR_RETURN(ImportMark mark,
                           internal::ParseImportMark(key, PQgetvalue(got.get(), 0, 0)));
    return std::optional<ImportMark>(mark);
  }

  // Every Append commits: nothing is left to make durable.
  Status Flush() override { return Status::OK(); }
  Status Seal() override { return Status::OK(); }  // rows are in their table once appended

  Status Query(const StoreQuery& query, const QueryCallback& callback) override {
    std::string sql =
        "DECLARE kwatt_rows NO SCROLL CURSOR FOR "
        "SELECT timestamp, device_id, metric_id, value, labels::text FROM metrics "
        "WHERE timestamp >= to_timestamp(0) + $1::bigint * interval '1 microsecond' "
        "AND timestamp < to_timestamp(0) + $2::bigint * interval '1 microsecond'";
    // Times are whole microseconds: t >= start and t < end as microseconds, rounded up.
    std::vector<std::string> params = {CeilMicrosText(query.start), CeilMicrosText(query.end)};
    if (query.end <= query.start) return Status::OK();
    if (!query.devices.empty()) {
      params.push_back(TextArray(query.devices));
      sql += " AND device_id = ANY($" + std::to_string(params.size()) + "::text[])";
    }
    if (!query.metrics.empty()) {
      params.push_back(TextArray(query.metrics));
      sql += " AND metric_id = ANY($" + std::to_string(params.size()) + "::text[])";
    }
    sql += " ORDER BY device_id, timestamp, metric_id, labels::text COLLATE \"C\", value";
    KWATT_RETURN_IF_ERROR(Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"));
    Status status = QueryInTransaction(sql, params, query, callback);
    Status end = Exec(status.ok() ? "COMMIT" : "ROLLBACK");
    return status.ok() ? end : status;
  }

  Status PutJob(const jobs::Job& job) override {
    KWATT_RETURN_IF_ERROR(internal::CheckStorableJob(job));
    return Exec(std::string(kInsertJob) +
                    " ON CONFLICT (site, id) DO UPDATE SET \"user\" = excluded.\"user\", nodes = "
                    "excluded.nodes, start_time = excluded.start_time, stop_time = "
                    "excluded.stop_time, types = excluded.types",
                JobParams(job, job.uid));
  }

  Result<int64_t> AddJob(const jobs::Job& job, bool next_id) override {
    KWATT_RETURN_IF_ERROR(internal::CheckStorableJob(job));
    KWATT_RETURN_IF_ERROR(Exec("BEGIN"));
    Result<int64_t> id = AddJobInTransaction(job, next_id);
    Status end = Exec(id.ok() ? "COMMIT" : "ROLLBACK");
    KWATT_RETURN_IF_ERROR(id.status());
    KWATT_RETURN_IF_ERROR(end);
    return id;
  }

  Result<jobs::Job> GetJob(const std::string& site, int64_t id) override {
    KWATT_ASSIGN_OR_RETURN(
        std::vector<jobs::Job> jobs,
        SelectJobs("WHERE site = $1 AND id = $2::bigint", {site, std::to_string(id)}));
    if (jobs.empty()) {
      return Status::NotFound("the store has no job " + std::to_string(id) + " on site " + site);
    }
    return std::move(jobs.front());
  }

  Result<std::vector<jobs::Job>> Jobs(const std::string& site, UnixNanos start,
                                      UnixNanos end) override {
    return SelectJobs(
        "WHERE site = $1 AND start_time < to_timestamp(0) + $2::bigint * interval '1 microsecond' "
        "AND (stop_time IS NULL OR stop_time > to_timestamp(0) + $3::bigint * "
        "interval '1 microsecond') ORDER BY start_time, id",
        {site, CeilMicrosText(end), MicrosText(start)});
  }

  Status PutCatalogue(const std::string& site, const std::string& cluster,
                      const Catalogue& catalogue) override {
    return Exec(
        "INSERT INTO kwatt_catalogues(site, cluster, metrics) VALUES ($1, $2, $3) "
        "ON CONFLICT (site, cluster) DO UPDATE SET metrics = excluded.metrics",
        {site, cluster, catalogue.json()});
  }

  Result<Catalogue> GetCatalogue(const std::string& site, const std::string& cluster) override {
    KWATT_ASSIGN_OR_RETURN(PgResult r,
                           Select("SELECT metrics FROM kwatt_catalogues WHERE site = $1 AND "
                                  "cluster = $2",
                                  {site, cluster}));
    if (PQntuples(r.get()) == 0) {
      return Status::NotFound("the store has no catalogue for cluster " + cluster + " of site " +
                              site);
    }
    return internal::ParseStoredCatalogue(
        site, cluster,
        std::string_view(PQgetvalue(r.get(), 0, 0), size_t(PQgetlength(r.get(), 0, 0))));
  }

  Result<CheckReport> Check() override {
    CheckReport report;
    auto problem = [&](const std::string& text) {
      if (report.problems.size() < options_.max_problems) report.problems.push_back(text);
    };
    // Every partition of metrics has its range and its index.
    KWATT_ASSIGN_OR_RETURN(
        PgResult parts,
        Select("SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), "
               "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisvalid) "
               "FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid "
               "WHERE h.inhparent = 'metrics'::regclass ORDER BY c.relname"));
    for (int i = 0; i < PQntuples(parts.get()); ++i) {
      std::string name = PQgetvalue(parts.get(), i, 0);
      std::string bound = PQgetvalue(parts.get(), i, 1);
      if (bound.rfind("FOR VALUES FROM", 0) != 0) {
        problem("partition " + name + " of metrics has no time range (" + bound + ")");
      }
      if (!Bool(parts.get(), i, 2)) {
        problem("partition " + name +
                " of metrics has no valid index on (device_id, timestamp): REINDEX TABLE " + name);
      }
      ++report.blocks_checked;
    }
    // Every row read whole, partition by partition (a damaged page is an error naming it).
    for (int i = 0; i < PQntuples(parts.get()); ++i) {
      std::string name = PQgetvalue(parts.get(), i, 0);
      char* quoted = PQescapeIdentifier(conn_, name.c_str(), name.size());
      if (!quoted) return ConnectionError("quoting " + name);
      std::string table = quoted;
      PQfreemem(quoted);
      Result<PgResult> rows = Select(
          "SELECT count(*), coalesce(sum(octet_length(device_id) + octet_length(metric_id) "
          "+ octet_length(labels::text)), 0) FROM " +
          table);
      if (!rows.ok()) {
        problem("partition " + name + " cannot be read: " + rows.status().message());
        continue;
      }
      report.rows_checked += std::atoll(PQgetvalue(rows->get(), 0, 0));
    }
    return report;
  }

  Result<StoreInfo> Info() override {
    KWATT_ASSIGN_OR_RETURN(
        PgResult r,
        Select("SELECT (SELECT count(*) FROM (SELECT DISTINCT device_id, metric_id, labels "
               "FROM metrics) s), count(*), "
               "coalesce((extract(epoch FROM min(timestamp)) * 1000000)::bigint, 0), "
               "coalesce((extract(epoch FROM max(timestamp)) * 1000000)::bigint, 0), "
               "(SELECT count(*) FROM pg_inherits WHERE inhparent = 'metrics'::regclass), "
               "(SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits "
               "WHERE inhparent = 'metrics'::regclass), "
               "(SELECT count(*) FROM kwatt_jobs), (SELECT count(*) FROM kwatt_catalogues) "
               "FROM metrics"));
    auto at = [&](int column) { return std::atoll(PQgetvalue(r.get(), 0, column)); };
    StoreInfo info;
    info.series = at(0);
    info.rows = at(1);
    info.first = at(1) ? at(2) * kNanosPerMicro : 0;
    info.last = at(1) ? at(3) * kNanosPerMicro : 0;
    info.blocks = at(4);  // partitions
    info.bytes = at(5);
    info.jobs = at(6);
    info.catalogues = at(7);
    return info;
  }

 private:
  Status CreateTables() {
    KWATT_RETURN_IF_ERROR(Exec("BEGIN"));
    Status status = Exec("SELECT pg_advisory_xact_lock(" + std::to_string(kSchemaLock) + ")");
    if (status.ok()) {
      status = Exec(
          "CREATE TABLE IF NOT EXISTS kwatt_meta (key text PRIMARY KEY, value text NOT NULL);"
          "INSERT INTO kwatt_meta VALUES ('format', '" +
          std::string(kFormat) + "'), ('version', '" + std::string(kVersion) +
          "'), ('partition_days', '" + std::to_string(std::max(1, options_.partition_days)) +
          "') ON CONFLICT DO NOTHING;"
          // Kwollect's table, partitioned by time; ids compared byte by byte.
          "CREATE TABLE IF NOT EXISTS metrics (timestamp timestamptz NOT NULL, "
          "device_id text COLLATE \"C\" NOT NULL, metric_id text COLLATE \"C\" NOT NULL, "
          "value double precision, labels jsonb NOT NULL DEFAULT '{}') "
          "PARTITION BY RANGE (timestamp);"
          "CREATE INDEX IF NOT EXISTS metrics_device_id_timestamp_idx "
          "ON metrics (device_id, timestamp);"
          "CREATE TABLE IF NOT EXISTS kwatt_jobs (site text NOT NULL, id bigint NOT NULL, "
          "\"user\" text NOT NULL, nodes text[] NOT NULL, start_time timestamptz NOT NULL, "
          "stop_time timestamptz, types text[] NOT NULL, PRIMARY KEY (site, id));"
          "CREATE TABLE IF NOT EXISTS kwatt_catalogues (site text NOT NULL, cluster text NOT "
          "NULL, metrics text NOT NULL, PRIMARY KEY (site, cluster));");
    }
    if (!status.ok()) {
      (void)Exec("ROLLBACK");
      return status;
    }
    return Exec("COMMIT");
  }

  // Makes the partitions `batch` needs (in the caller's transaction).
  Status EnsurePartitions(const RowBatch& batch) {
    std::set<int64_t> needed;
    int64_t last = INT64_MIN;
    for (UnixNanos t : batch.time) {
      int64_t day = PartitionStartDay(t, options_.partition_days);
      if (day != last && !partitions_.count(day)) needed.insert(day);
      last = day;
    }
    if (needed.empty()) return Status::OK();
    KWATT_RETURN_IF_ERROR(
        Exec("SELECT pg_advisory_xact_lock(" + std::to_string(kPartitionLock) + ")"));
    for (int64_t day : needed) {
      std::string from = DayText(day), to = DayText(day + options_.partition_days);
      std::string name = "metrics_p" + from.substr(0, 4) + from.substr(5, 2) + from.substr(8, 2);
      if (day < 0) name = "metrics_m" + std::to_string(-day);  // before 1970: no '-' in names
      KWATT_RETURN_IF_ERROR(Exec("CREATE TABLE IF NOT EXISTS " + name +
                                 " PARTITION OF metrics FOR VALUES FROM ('" + from +
                                 " 00:00:00+00') TO ('" + to + " 00:00:00+00')"));
      partitions_.insert(day);
    }
    return Status::OK();
  }

  Status AppendInTransaction(const RowBatch& batch, const StringInterner& interner) {
    KWATT_RETURN_IF_ERROR(EnsurePartitions(batch));
    PgResult start(PQexec(conn_,
                          "COPY metrics (timestamp, device_id, metric_id, value, labels) "
                          "FROM STDIN (FORMAT binary)"));
    if (PQresultStatus(start.get()) != PGRES_COPY_IN) return Error("COPY", start.get());
    std::string buffer;
    buffer.append("PGCOPY\n\377\r\n\0", 11);
    PutBig(&buffer, 0, 4);  // flags
    PutBig(&buffer, 0, 4);  // header extension
    for (size_t i = 0; i < batch.size(); ++i) {
      PutBig(&buffer, 5, 2);
      PutBig(&buffer, 8, 4);
      PutBig(&buffer, uint64_t(batch.time[i] / kNanosPerMicro - kPostgresEpochMicros), 8);
      for (uint32_t id : {batch.device[i], batch.metric[i]}) {
        std::string_view text = interner.Get(id);
        PutBig(&buffer, text.size(), 4);
        buffer.append(text);
      }
      if (IsNullValue(batch.value[i])) {
        PutBig(&buffer, 0xffffffff, 4);  // SQL NULL, as Kwollect keeps a value that is null
      } else {
        PutBig(&buffer, 8, 4);
        PutBig(&buffer, std::bit_cast<uint64_t>(batch.value[i]), 8);
      }
      std::string_view labels = interner.Get(batch.labels[i]);
      PutBig(&buffer, labels.size() + 1, 4);
      buffer.push_back('\1');  // jsonb's binary format: version 1, then the text
      buffer.append(labels);
      if (buffer.size() >= (1 << 20)) {
        if (PQputCopyData(conn_, buffer.data(), int(buffer.size())) != 1) {
          return ConnectionError("COPY");
        }
        buffer.clear();
      }
    }
    PutBig(&buffer, 0xffff, 2);  // end of data
    if (PQputCopyData(conn_, buffer.data(), int(buffer.size())) != 1 ||
        PQputCopyEnd(conn_, nullptr) != 1) {
      return ConnectionError("COPY");
    }
    PgResult done(PQgetResult(conn_));
    Status status = PQresultStatus(done.get()) == PGRES_COMMAND_OK
                        ? Status::OK()
                        : Error("COPY of " + std::to_string(batch.size()) + " rows", done.get());
    while (PGresult* more = PQgetResult(conn_)) PQclear(more);
    return status;
  }

  Status QueryInTransaction(const std::string& declare, const std::vector<std::string>& params,
                            const StoreQuery& query, const QueryCallback& callback) {
    std::vector<std::optional<std::string>> values(params.begin(), params.end());
    KWATT_RETURN_IF_ERROR(Exec(declare, values));
    std::string fetch = "FETCH FORWARD " + std::to_string(std::max<size_t>(1, query.batch_rows)) +
                        " FROM kwatt_rows";
    StringInterner interner;
    std::map<std::string, std::string, std::less<>> compact;  // jsonb text -> compact text
    RowBatch batch;
    while (true) {
      PgResult r(PQexecParams(conn_, fetch.c_str(), 0, nullptr, nullptr, nullptr, nullptr,
                              /*resultFormat=*/1));
      if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error("FETCH", r.get());
      int n = PQntuples(r.get());
      if (n == 0) break;
      batch.Clear();
      for (int i = 0; i < n; ++i) {
        int64_t micros = int64_t(GetBig(PQgetvalue(r.get(), i, 0), 8)) + kPostgresEpochMicros;
        UnixNanos t = micros * kNanosPerMicro;
        batch.time.push_back(t);
        batch.utc_offset.push_back(ParisUtcOffsetSeconds(FloorDiv(t, kNanosPerSecond)));
        batch.device.push_back(interner.Intern(
            std::string_view(PQgetvalue(r.get(), i, 1), size_t(PQgetlength(r.get(), i, 1)))));
        batch.metric.push_back(interner.Intern(
            std::string_view(PQgetvalue(r.get(), i, 2), size_t(PQgetlength(r.get(), i, 2)))));
        batch.value.push_back(PQgetisnull(r.get(), i, 3)
                                  ? NullValue()
                                  : std::bit_cast<double>(GetBig(PQgetvalue(r.get(), i, 3), 8)));
        std::string_view labels(PQgetvalue(r.get(), i, 4), size_t(PQgetlength(r.get(), i, 4)));
        auto it = compact.find(labels);
        if (it == compact.end()) it = compact.emplace(labels, CompactJsonb(labels)).first;
        batch.labels.push_back(interner.Intern(it->second));
      }
      KWATT_RETURN_IF_ERROR(callback(batch, interner));
      if (compact.size() > 100'000) compact.clear();  // bounded memory
    }
    return Exec("CLOSE kwatt_rows");
  }

  static constexpr const char* kInsertJob =
      "INSERT INTO kwatt_jobs(site, id, \"user\", nodes, start_time, stop_time, types) "
      "VALUES ($1, $2::bigint, $3, $4::text[], "
      "to_timestamp(0) + $5::bigint * interval '1 microsecond', "
      "to_timestamp(0) + $6::bigint * interval '1 microsecond', $7::text[])";

  static std::vector<std::optional<std::string>> JobParams(const jobs::Job& job, int64_t id) {
    return {job.site,
            std::to_string(id),
            job.user,
            TextArray(job.nodes),
            MicrosText(job.started_at),
            job.stopped_at ? std::optional<std::string>(MicrosText(*job.stopped_at)) : std::nullopt,
            TextArray(job.types)};
  }

  // AddJob's work, in its transaction: the lock makes concurrent adds wait for each other (it
  // conflicts with itself and with every insert, not with readers), so that the highest id read
  // is still the highest when the job is inserted.
  Result<int64_t> AddJobInTransaction(const jobs::Job& job, bool next_id) {
    KWATT_RETURN_IF_ERROR(Exec("LOCK TABLE kwatt_jobs IN SHARE ROW EXCLUSIVE MODE"));
    int64_t id = job.uid;
    if (next_id) {
      KWATT_ASSIGN_OR_RETURN(PgResult r,
                             Select("SELECT max(id) FROM kwatt_jobs WHERE site = $1", {job.site}));
      std::optional<int64_t> highest;
      if (PQntuples(r.get()) > 0 && !PQgetisnull(r.get(), 0, 0)) {
        highest = std::atoll(PQgetvalue(r.get(), 0, 0));
      }
      KWATT_ASSIGN_OR_RETURN(id, internal::NextJobId(job.site, highest));
    } else {
      KWATT_ASSIGN_OR_RETURN(PgResult r,
                             Select("SELECT 1 FROM kwatt_jobs WHERE site = $1 AND id = $2::bigint",
                                    {job.site, std::to_string(job.uid)}));
      if (PQntuples(r.get()) > 0) return internal::JobExists(job.site, job.uid);
    }
    KWATT_RETURN_IF_ERROR(Exec(kInsertJob, JobParams(job, id)));
    return id;
  }

  Result<std::vector<jobs::Job>> SelectJobs(const std::string& where,
                                            const std::vector<std::string>& params) {
    KWATT_ASSIGN_OR_RETURN(
        PgResult r,
        Select("SELECT site, id, \"user\", array_to_json(nodes)::text, "
               "(extract(epoch FROM start_time) * 1000000)::bigint, "
               "(extract(epoch FROM stop_time) * 1000000)::bigint, array_to_json(types)::text "
               "FROM kwatt_jobs " +
                   where,
               params));
    std::vector<jobs::Job> jobs;
    for (int i = 0; i < PQntuples(r.get()); ++i) {
      jobs::Job job;
      job.site = PQgetvalue(r.get(), i, 0);
      job.uid = std::atoll(PQgetvalue(r.get(), i, 1));
      job.user = PQgetvalue(r.get(), i, 2);
      job.nodes = Json::parse(PQgetvalue(r.get(), i, 3)).get<std::vector<std::string>>();
      job.started_at = std::atoll(PQgetvalue(r.get(), i, 4)) * kNanosPerMicro;
      if (!PQgetisnull(r.get(), i, 5)) {
        job.stopped_at = std::atoll(PQgetvalue(r.get(), i, 5)) * kNanosPerMicro;
      }
      job.types = Json::parse(PQgetvalue(r.get(), i, 6)).get<std::vector<std::string>>();
      jobs.push_back(std::move(job));
    }
    return jobs;
  }

  static bool Bool(const PGresult* r, int row, int column) {
    return std::string_view(PQgetvalue(r, row, column)) == "t";
  }

  // Runs `sql` (no rows expected); params as text, null for std::nullopt.
  Status Exec(const std::string& sql, const std::vector<std::optional<std::string>>& params = {}) {
    PgResult r = Run(sql, params);
    ExecStatusType status = PQresultStatus(r.get());
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Error(sql, r.get());
    return Status::OK();
  }

  Result<PgResult> Select(const std::string& sql, const std::vector<std::string>& params = {}) {
    std::vector<std::optional<std::string>> values(params.begin(), params.end());
    PgResult r = Run(sql, values);
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return Error(sql, r.get());
    return r;
  }

  PgResult Run(const std::string& sql, const std::vector<std::optional<std::string>>& params) {
    if (params.empty()) return PgResult(PQexec(conn_, sql.c_str()));
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    return PgResult(PQexecParams(conn_, sql.c_str(), int(values.size()), nullptr, values.data(),
                                 nullptr, nullptr, 0));
  }

  bool ConnectionLost() override {
    // A server that closed the connection (a restart, an administrator) left its goodbye and an
    // end of file on the socket: reading what is there, without blocking, marks the connection
    // bad. Only between statements: a query's results are not ours to read here.
    // libpq sees the end of file only on a read after the goodbye's, hence the loop (bounded: a
    // server that keeps talking is not a closed one).
    for (int i = 0;
         i < 8 && PQstatus(conn_) == CONNECTION_OK && PQtransactionStatus(conn_) == PQTRANS_IDLE;
         ++i) {
      pollfd socket{PQsocket(conn_), POLLIN, 0};
      if (::poll(&socket, 1, /*timeout=*/0) <= 0 || !PQconsumeInput(conn_)) break;
    }
    return PQstatus(conn_) == CONNECTION_BAD;
  }

  Status ConnectionError(const std::string& what) {
    return Status::Unavailable(shown_uri_ + ": " + what + ": " + PQerrorMessage(conn_));
  }

  // A failed statement, by its SQLSTATE: bad data is InvalidArgument, a lost connection or a full
  // disk Unavailable, anything else IOError; the message is PostgreSQL's, first line.
  Status Error(const std::string& what, const PGresult* r) {
    if (PQstatus(conn_) != CONNECTION_OK) return ConnectionError(what.substr(0, 40));
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    std::string message = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    std::string text = shown_uri_ + ": " + message;
    std::string_view code = state ? state : "";
    if (code.substr(0, 2) == "22" || code.substr(0, 2) == "23") {
      return Status::InvalidArgument(text + "; nothing of the batch was stored");
    }
    if (code.substr(0, 2) == "08" || code.substr(0, 2) == "53" || code.substr(0, 2) == "57") {
      return Status::Unavailable(text);
    }
    return Status::IOError(text);
  }

  PGconn* conn_;
  std::string shown_uri_;
  PostgresStoreOptions options_;
  std::set<int64_t> partitions_;  // first days of the partitions known to exist
};

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& uri,
                                                 const PostgresStoreOptions& options) {
  PGconn* conn = PQconnectdb(uri.c_str());
  std::string shown = ShownStoreUri(uri);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string message = PQerrorMessage(conn);
    PQfinish(conn);
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return Status::Unavailable("cannot connect to the PostgreSQL store " + shown + ": " + message);
  }
  auto store = std::make_unique<PostgresStore>(conn, shown, options);
  KWATT_RETURN_IF_ERROR(store->Init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace kwatt::store
