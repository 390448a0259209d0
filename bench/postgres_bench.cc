// The PostgreSQL engine of the store (kwatt/store/postgres_store.h), in one run on a PostgreSQL 15
// cluster of its own (src/testing/postgres.h; fsync on, as in production):
//
//  1. ingest, side by side: the same rows (NODES wattmeters at HZ values a second for SECONDS,
//     power as random walks of 0.1 W steps in 95.0..250.0 W, one batch per second of data as a
//     collector writes them) through the kwatt engine (binary COPY into the partitioned table, a
//     transaction per batch) and into Kwollect's plain table with its index as a client would
//     write them (a prepared INSERT per row, a transaction per batch);
//  2. volume: the partitioned table filled to VOLUME rows inside the server (INSERT ... SELECT
//     from generate_series: VOLUME_NODES devices x 5 metrics at 1 Hz, as many seconds as needed),
//     its indexes maintained as it fills, then VACUUM ANALYZE (what autovacuum does on a live
//     store);
//  3. queries at that volume: QUERIES windows of 10 nodes x 1 metric x 10 minutes at random
//     places, through the engine's Query (every row decoded into batches), the first one cold
//     (just after the fill), then the median and the slowest of the others.
//
// Usage: kwatt_postgres_bench [--nodes 20] [--hz 50] [--seconds 3600] [--volume 100000000]
//                             [--volume-nodes 200] [--queries 20]
// Prints a Markdown table; exit status 1 on an error.
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/store/postgres_store.h"
#include "src/testing/postgres.h"

namespace {

using Clock = std::chrono::steady_clock;
using kwatt::kNanosPerSecond;
using kwatt::UnixNanos;

constexpr UnixNanos kT0 = 1'745'000'000 * kNanosPerSecond;
constexpr const char* kMetric = "wattmetre_power_watt";

struct Config {
  int nodes = 20;
  int hz = 50;
  int seconds = 3600;
  int64_t volume = 100'000'000;
  int volume_nodes = 200;
  int queries = 20;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "kwatt_postgres_bench: %s\n", message.c_str());
  std::exit(1);
}

void Check(const kwatt::Status& status, const char* what) {
  if (!status.ok()) Die(std::string(what) + ": " + status.ToString());
}

// Every batch of the ingest data, one per second (deterministic).
std::vector<kwatt::RowBatch> MakeBatches(const Config& c, kwatt::StringInterner* interner) {
  std::mt19937_64 random(42);
  std::vector<int> tenths(size_t(c.nodes), 1200);
  std::vector<kwatt::RowBatch> batches(size_t(c.seconds));
  uint32_t metric = interner->Intern(kMetric);
  std::vector<uint32_t> devices, labels;
  for (int n = 0; n < c.nodes; ++n) {
    devices.push_back(interner->Intern("taurus-" + std::to_string(n + 1)));
    labels.push_back(
        interner->Intern(R"({"_device_orig":["wattmetre1-port)" + std::to_string(n) + R"("]})"));
  }
  for (int s = 0; s < c.seconds; ++s) {
    kwatt::RowBatch& b = batches[size_t(s)];
    for (int k = 0; k < c.hz; ++k) {
      for (int n = 0; n < c.nodes; ++n) {
        int& v = tenths[size_t(n)];
        v = std::clamp(v + int(random() % 21) - 10, 950, 2500);
        b.time.push_back(kT0 + s * kNanosPerSecond + k * (kNanosPerSecond / c.hz));
        b.utc_offset.push_back(7200);
        b.device.push_back(devices[size_t(n)]);
        b.metric.push_back(metric);
        b.value.push_back(v / 10.0);
        b.labels.push_back(labels[size_t(n)]);
      }
    }
  }
  return batches;
}

struct Connection {
  explicit Connection(const std::string& uri) : conn(PQconnectdb(uri.c_str())) {
    if (PQstatus(conn) != CONNECTION_OK) Die(PQerrorMessage(conn));
  }
  ~Connection() { PQfinish(conn); }
  void Exec(const std::string& sql) {
    PGresult* r = PQexec(conn, sql.c_str());
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) Die(sql + ": " + PQresultErrorMessage(r));
    PQclear(r);
  }
  std::string Value(const std::string& sql) {
    PGresult* r = PQexec(conn, sql.c_str());
    if (PQresultStatus(r) != PGRES_TUPLES_OK) Die(sql + ": " + PQresultErrorMessage(r));
    std::string out = PQgetvalue(r, 0, 0);
    PQclear(r);
    return out;
  }
  PGconn* conn;
};

std::string Thousands(double v) {
  std::string digits = std::to_string(int64_t(v + 0.5));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    int64_t value = std::atoll(argv[i + 1]);
    if (flag == "--nodes")
      c.nodes = int(value);
    else if (flag == "--hz")
      c.hz = int(value);
    else if (flag == "--seconds")
      c.seconds = int(value);
    else if (flag == "--volume")
      c.volume = value;
    else if (flag == "--volume-nodes")
      c.volume_nodes = int(value);
    else if (flag == "--queries")
      c.queries = int(value);
    else
      Die("unknown option " + flag);
  }
  auto cluster = kwatt::testing::TestPostgres::Start(/*durable=*/true);
  if (!cluster.ok()) Die(cluster.status().ToString());
  auto uri = (*cluster)->NewDatabase();
  if (!uri.ok()) Die(uri.status().ToString());

  kwatt::StringInterner interner;
  std::vector<kwatt::RowBatch> batches = MakeBatches(c, &interner);
  int64_t rows = int64_t(c.nodes) * c.hz * c.seconds;

  // 1a. The kwatt engine.
  auto opened = kwatt::store::OpenPostgresStore(*uri);
  if (!opened.ok()) Die(opened.status().ToString());
  std::unique_ptr<kwatt::store::Store> store = std::move(opened).value();
  auto begin = Clock::now();
  for (const kwatt::RowBatch& b : batches) Check(store->Append(b, interner), "Append");
  Check(store->Flush(), "Flush");
  double kwatt_s = Seconds(Clock::now() - begin);
  Connection sql(*uri);
  int64_t kwatt_bytes =
      std::atoll(sql.Value("SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
                           "WHERE inhparent = 'metrics'::regclass")
                     .c_str());

  // 1b. Kwollect's plain table and index, a prepared INSERT per row.
  sql.Exec(
      "CREATE TABLE plain (timestamp timestamptz NOT NULL, device_id text NOT NULL, "
      "metric_id text NOT NULL, value double precision, labels jsonb NOT NULL DEFAULT '{}');"
      "CREATE INDEX ON plain (device_id, timestamp)");
  PGresult* prepared = PQprepare(sql.conn, "insert",
                                 "INSERT INTO plain VALUES (to_timestamp($1::double precision), "
                                 "$2, $3, $4::double precision, $5::jsonb)",
                                 5, nullptr);
  if (PQresultStatus(prepared) != PGRES_COMMAND_OK) Die(PQresultErrorMessage(prepared));
  PQclear(prepared);
  begin = Clock::now();
  for (const kwatt::RowBatch& b : batches) {
    sql.Exec("BEGIN");
    for (size_t i = 0; i < b.size(); ++i) {
      char time[32], value[32];
      std::snprintf(time, sizeof time, "%.6f", double(b.time[i]) / kNanosPerSecond);
      std::snprintf(value, sizeof value, "%.17g", b.value[i]);
      std::string device(interner.Get(b.device[i])), labels(interner.Get(b.labels[i]));
      const char* values[5] = {time, device.c_str(), kMetric, value, labels.c_str()};
      PGresult* r = PQexecPrepared(sql.conn, "insert", 5, values, nullptr, nullptr, 0);
      if (PQresultStatus(r) != PGRES_COMMAND_OK) Die(PQresultErrorMessage(r));
      PQclear(r);
    }
    sql.Exec("COMMIT");
  }
  double plain_s = Seconds(Clock::now() - begin);
  int64_t plain_bytes = std::atoll(sql.Value("SELECT pg_total_relation_size('plain')").c_str());
  sql.Exec("DROP TABLE plain");

  // 2. Volume: the partitioned table filled inside the server.
  int64_t have = rows;
  int64_t per_second = int64_t(c.volume_nodes) * 5;
  int64_t volume_seconds = std::max<int64_t>(1, (c.volume - have + per_second - 1) / per_second);
  UnixNanos v0 = kT0 + int64_t(c.seconds) * kNanosPerSecond;
  begin = Clock::now();
  // Partitions first (the engine makes them on Append; a row at each partition's time does).
  for (int64_t s = 0; s <= volume_seconds; s += 86'400) {
    kwatt::RowBatch one;
    one.time.push_back(v0 + s * kNanosPerSecond);
    one.utc_offset.push_back(7200);
    one.device.push_back(interner.Intern("partition-maker"));
    one.metric.push_back(interner.Intern(kMetric));
    one.value.push_back(0);
    one.labels.push_back(interner.Intern("{}"));
    Check(store->Append(one, interner), "Append");
    ++have;
  }
  const int64_t chunk = 3600;  // seconds per INSERT ... SELECT (a transaction each)
  for (int64_t s = 0; s < volume_seconds; s += chunk) {
    int64_t to = std::min(volume_seconds, s + chunk) - 1;
    sql.Exec("INSERT INTO metrics SELECT to_timestamp(" + std::to_string(v0 / kNanosPerSecond) +
             " + s), 'node-' || n, m, 100 + (s * 7 + n * 13) % 1500 / 10.0, '{}'::jsonb "
             "FROM generate_series(" +
             std::to_string(s) + ", " + std::to_string(to) + ") s, generate_series(1, " +
             std::to_string(c.volume_nodes) +
             ") n, unnest(ARRAY['wattmetre_power_watt', 'bmc_node_power_watt', "
             "'prom_node_load1', 'bmc_temp_celsius', 'pdu_outlet_power_watt']) m");
    have += (to - s + 1) * per_second;
    std::fprintf(stderr, "\rvolume: %s rows", Thousands(double(have)).c_str());
  }
  std::fprintf(stderr, "\n");
  double fill_s = Seconds(Clock::now() - begin);
  // What autovacuum does on a live store: hint bits and the visibility map set, statistics.
  sql.Exec("VACUUM ANALYZE metrics");
  int64_t volume_bytes =
      std::atoll(sql.Value("SELECT sum(pg_total_relation_size(inhrelid)) FROM pg_inherits "
                           "WHERE inhparent = 'metrics'::regclass")
                     .c_str());

  // 3. Queries: 10 nodes x 1 metric x 10 minutes.
  std::mt19937_64 random(7);
  std::vector<double> ms;
  int64_t rows_per_query = 0;
  for (int q = 0; q < c.queries; ++q) {
    kwatt::store::StoreQuery query;
    int first = int(random() % uint64_t(std::max(1, c.volume_nodes - 10)));
    for (int n = 0; n < 10; ++n) query.devices.push_back("node-" + std::to_string(first + n + 1));
    query.metrics = {"bmc_node_power_watt"};
    int64_t at = int64_t(random() % uint64_t(std::max<int64_t>(1, volume_seconds - 600)));
    query.start = v0 + at * kNanosPerSecond;
    query.end = query.start + 600 * kNanosPerSecond;
    int64_t got = 0;
    auto t = Clock::now();
    Check(store->Query(query,
                       [&](const kwatt::RowBatch& b, const kwatt::StringInterner&) {
                         got += int64_t(b.size());
                         return kwatt::Status::OK();
                       }),
          "Query");
    ms.push_back(Seconds(Clock::now() - t) * 1000);
    if (got != 6000) Die("a query gave " + std::to_string(got) + " rows, not 6000");
    rows_per_query = got;
  }
  double cold = ms.front();
  std::vector<double> warm(ms.begin() + 1, ms.end());
  std::sort(warm.begin(), warm.end());
  double median = warm.empty() ? cold : warm[warm.size() / 2];
  double slowest = warm.empty() ? cold : warm.back();

  std::printf("| case | rows | time (s) | rows/s | bytes a row |\n|---|---:|---:|---:|---:|\n");
  std::printf("| kwatt engine: binary COPY, partitioned | %s | %.2f | %s | %.1f |\n",
              Thousands(double(rows)).c_str(), kwatt_s, Thousands(rows / kwatt_s).c_str(),
              double(kwatt_bytes) / double(rows));
  std::printf("| plain table + index: prepared INSERT per row | %s | %.2f | %s | %.1f |\n",
              Thousands(double(rows)).c_str(), plain_s, Thousands(rows / plain_s).c_str(),
              double(plain_bytes) / double(rows));
  std::printf("| volume fill (INSERT ... SELECT in the server) | %s | %.1f | %s | %.1f |\n\n",
              Thousands(double(have - rows)).c_str(), fill_s,
              Thousands(double(have - rows) / fill_s).c_str(), double(volume_bytes) / double(have));
  std::printf("| query at %s rows: 10 nodes x 1 metric x 10 min (%s rows) | ms |\n|---|---:|\n",
              Thousands(double(have)).c_str(), Thousands(double(rows_per_query)).c_str());
  std::printf("| first (cold) | %.1f |\n| median of %zu others | %.1f |\n| slowest | %.1f |\n\n",
              cold, warm.size(), median, slowest);
  std::printf("ingest ratio (kwatt / plain INSERT): %.1fx\n", plain_s / kwatt_s);
  return 0;
}
