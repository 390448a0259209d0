// Side by side in one run: the kwatt store (kwatt/store/sqlite_store.h) against a plain SQLite
// table `rows(time, device, metric, value, labels)` with a B-tree index on (device, metric, time),
// the layout a first attempt would take.
//
// Usage: kwatt_store_bench [--dir DIR] [--nodes 20] [--hz 50] [--seconds 3600]
//                          [--query-nodes 10] [--query-seconds 600] [--head-rows N] [--runs 5]
//
// The data: NODES wattmeters at HZ values a second for SECONDS (20 x 50 x 3600 = 3.6 M rows by
// default), power values as random walks of 0.1 W steps within 95.0..250.0 W, arriving as a
// collector would write them: one batch per second of data (every node's rows of that second).
// Both sides run in WAL mode with synchronous=NORMAL and commit about once a second (the store's
// flush interval; the plain table the same rule). Ingest is timed around the write calls only
// (the data is generated outside the timing), the final commit and close included; bytes are
// the files' sizes after closing (database and WAL). The query: QUERY_NODES nodes, one metric,
// QUERY_SECONDS in the middle of the data, on a store opened afresh (the OS page cache warm),
// the best of RUNS runs. Prints a Markdown table; exit status 1 on an error.
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/store/sqlite_store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr kwatt::UnixNanos kT0 = 1'745'000'000 * kwatt::kNanosPerSecond;
constexpr const char* kMetric = "wattmetre_power_watt";

struct Config {
  fs::path dir;
  int nodes = 20;
  int hz = 50;
  int seconds = 3600;
  int query_nodes = 10;
  int query_seconds = 600;
  size_t head_rows = kwatt::store::SqliteStoreOptions().head_rows;
  int runs = 5;
};

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

std::string NodeName(int i) { return "taurus-" + std::to_string(i + 1); }

// The batches of the data, one a second, made on demand (deterministic).
class Data {
 public:
  explicit Data(const Config& config) : config_(config), watts_(size_t(config.nodes), 1500) {
    for (int n = 0; n < config.nodes; ++n) {
      devices_.push_back(interner_.Intern(NodeName(n)));
      watts_[size_t(n)] = 950 + int(random_() % 1500);
    }
    metric_ = interner_.Intern(kMetric);
    labels_ = interner_.Intern("{}");
  }
  const kwatt::StringInterner& interner() const { return interner_; }
  // The rows of second `s`.
  const kwatt::RowBatch& Second(int s) {
    batch_.Clear();
    for (int n = 0; n < config_.nodes; ++n) {
      for (int k = 0; k < config_.hz; ++k) {
        int& tenths = watts_[size_t(n)];
        tenths = std::clamp(tenths + int(random_() % 21) - 10, 950, 2500);
        batch_.time.push_back(kT0 + int64_t(s) * kwatt::kNanosPerSecond +
                              int64_t(k) * kwatt::kNanosPerSecond / config_.hz);
        batch_.utc_offset.push_back(7200);
        batch_.device.push_back(devices_[size_t(n)]);
        batch_.metric.push_back(metric_);
        batch_.value.push_back(tenths / 10.0);
        batch_.labels.push_back(labels_);
      }
    }
    return batch_;
  }

 private:
  const Config& config_;
  std::mt19937_64 random_{42};
  std::vector<int> watts_;
  kwatt::StringInterner interner_;
  std::vector<uint32_t> devices_;
  uint32_t metric_ = 0, labels_ = 0;
  kwatt::RowBatch batch_;
};

struct Measure {
  int64_t rows = 0;
  double ingest_seconds = 0;
  int64_t bytes = 0;
  int64_t query_rows = 0;
  double query_seconds = 1e300;
  // The store only: ingest with a reader querying meanwhile, and memory during queries.
  double busy_ingest_seconds = 0;
  int64_t reader_queries = 0;
  int64_t window_memory = 0;  // resident memory growth during the window query, bytes
  int64_t all_rows = 0;       // a query of every row of the store
  int64_t all_memory = 0;
};

int64_t FileBytes(const fs::path& path) {
  int64_t total = 0;
  for (const char* suffix : {"", "-wal", "-shm"}) {
    std::error_code error;
    auto size = fs::file_size(path.string() + suffix, error);
    if (!error && std::string(suffix) != "-shm") total += int64_t(size);
  }
  return total;
}

bool Fail(const std::string& what) {
  std::fprintf(stderr, "kwatt_store_bench: %s\n", what.c_str());
  return false;
}

// The process's resident memory now, in bytes (/proc/self/statm).
int64_t ResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long long size = 0, resident = 0;
  int n = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * int64_t(sysconf(_SC_PAGESIZE)) : 0;
}

kwatt::store::StoreQuery WindowQuery(const Config& config, int nodes, int64_t first_second,
                                     int64_t seconds) {
  kwatt::store::StoreQuery query;
  for (int n = 0; n < nodes; ++n) query.devices.push_back(NodeName(n));
  query.metrics = {kMetric};
  query.start = kT0 + first_second * kwatt::kNanosPerSecond;
  query.end = query.start + seconds * kwatt::kNanosPerSecond;
  return query;
}

// Runs `query`; sets *rows, and *peak_growth to the most resident memory grew during it.
bool TimedQuery(kwatt::store::Store& store, const kwatt::store::StoreQuery& query, int64_t* rows,
                double* seconds, int64_t* peak_growth = nullptr) {
  *rows = 0;
  double sum = 0;
  int64_t before = peak_growth ? ResidentBytes() : 0, peak = before;
  auto begin = Clock::now();
  kwatt::Status status =
      store.Query(query, [&](const kwatt::RowBatch& batch, const kwatt::StringInterner&) {
        *rows += int64_t(batch.size());
        for (double v : batch.value) sum += v;
        if (peak_growth) peak = std::max(peak, ResidentBytes());
        return kwatt::Status::OK();
      });
  *seconds = Seconds(Clock::now() - begin);
  if (peak_growth) *peak_growth = peak - before;
  if (sum < 0) std::printf("%f\n", sum);  // keeps the values read
  return status.ok() || Fail(status.ToString());
}

// Ingests the data into a new store at `path`. With `reader`, a second thread queries the last
// query_seconds of what is committed, in a loop, on its own connection, while the rows go in.
bool IngestStore(const Config& config, const fs::path& path, bool reader, double* seconds,
                 int64_t* rows, int64_t* reader_queries) {
  fs::remove(path);
  fs::remove(path.string() + "-wal");
  Data data(config);
  kwatt::store::SqliteStoreOptions options;
  options.head_rows = config.head_rows;
  auto opened = kwatt::store::OpenSqliteStore(path.string(), options);
  if (!opened.ok()) return Fail(opened.status().ToString());
  auto store = std::move(opened).value();
  std::atomic<int64_t> ingested_seconds{0};
  std::atomic<bool> stop{false}, reader_ok{true};
  *reader_queries = 0;
  std::thread reader_thread;
  if (reader) {
    reader_thread = std::thread([&] {
      auto mine = kwatt::store::OpenSqliteStore(path.string());
      if (!mine.ok()) {
        reader_ok = Fail(mine.status().ToString());
        return;
      }
      while (!stop) {
        int64_t now = ingested_seconds;
        int64_t first = std::max<int64_t>(0, now - config.query_seconds);
        int64_t n;
        double s;
        if (!TimedQuery(**mine, WindowQuery(config, config.query_nodes, first, now - first), &n,
                        &s)) {
          reader_ok = false;
          return;
        }
        ++*reader_queries;
      }
    });
  }
  Clock::duration spent{};
  *rows = 0;
  bool ok = true;
  for (int s = 0; s < config.seconds && ok; ++s) {
    const kwatt::RowBatch& batch = data.Second(s);
    auto begin = Clock::now();
    kwatt::Status status = store->Append(batch, data.interner());
    spent += Clock::now() - begin;
    ok = status.ok() || Fail(status.ToString());
    *rows += int64_t(batch.size());
    ingested_seconds = s + 1;
  }
  auto begin = Clock::now();
  kwatt::Status status = store->Flush();
  store.reset();
  spent += Clock::now() - begin;
  stop = true;
  if (reader_thread.joinable()) reader_thread.join();
  *seconds = Seconds(spent);
  return ok && reader_ok && (status.ok() || Fail(status.ToString()));
}

bool RunStore(const Config& config, Measure* m) {
  fs::path path = config.dir / "kwatt_store.db";
  int64_t rows;
  if (!IngestStore(config, path, /*reader=*/true, &m->busy_ingest_seconds, &rows,
                   &m->reader_queries)) {
    return false;
  }
  int64_t ignored;
  if (!IngestStore(config, path, /*reader=*/false, &m->ingest_seconds, &m->rows, &ignored)) {
    return false;
  }
  m->bytes = FileBytes(path);
  auto opened = kwatt::store::OpenSqliteStore(path.string());
  if (!opened.ok()) return Fail(opened.status().ToString());
  auto query = WindowQuery(config, config.query_nodes, config.seconds / 2, config.query_seconds);
  for (int run = 0; run < config.runs; ++run) {
    double seconds;
    if (!TimedQuery(**opened, query, &m->query_rows, &seconds, &m->window_memory)) return false;
    m->query_seconds = std::min(m->query_seconds, seconds);
  }
  double seconds;
  return TimedQuery(**opened, WindowQuery(config, config.nodes, 0, config.seconds), &m->all_rows,
                    &seconds, &m->all_memory);
}

bool Sql(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) == SQLITE_OK) return true;
  std::string message = std::string(sql) + ": " + (error ? error : "?");
  sqlite3_free(error);
  return Fail(message);
}

bool RunPlain(const Config& config, Measure* m) {
  fs::path path = config.dir / "plain.db";
  fs::remove(path);
  Data data(config);
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return Fail("cannot open " + path.string());
  if (!Sql(db,
           "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32768;"
           "CREATE TABLE rows(time INTEGER, device TEXT, metric TEXT, value REAL, labels TEXT);"
           "CREATE INDEX rows_by_series ON rows(device, metric, time);")) {
    return false;
  }
  sqlite3_stmt* insert = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO rows VALUES(?1, ?2, ?3, ?4, ?5)", -1, &insert, nullptr);
  Clock::duration spent{};
  auto last_commit = Clock::now();
  if (!Sql(db, "BEGIN")) return false;
  const kwatt::StringInterner& in = data.interner();
  for (int s = 0; s < config.seconds; ++s) {
    const kwatt::RowBatch& batch = data.Second(s);
    auto begin = Clock::now();
    for (size_t i = 0; i < batch.size(); ++i) {
      auto device = in.Get(batch.device[i]);
      auto metric = in.Get(batch.metric[i]);
      auto labels = in.Get(batch.labels[i]);
      sqlite3_bind_int64(insert, 1, batch.time[i] / kwatt::kNanosPerMicro);
      sqlite3_bind_text(insert, 2, device.data(), int(device.size()), SQLITE_STATIC);
      sqlite3_bind_text(insert, 3, metric.data(), int(metric.size()), SQLITE_STATIC);
      sqlite3_bind_double(insert, 4, batch.value[i]);
      sqlite3_bind_text(insert, 5, labels.data(), int(labels.size()), SQLITE_STATIC);
      if (sqlite3_step(insert) != SQLITE_DONE) return Fail(sqlite3_errmsg(db));
      sqlite3_reset(insert);
    }
    auto now = Clock::now();
    if (now - last_commit >= std::chrono::seconds(1)) {
      if (!Sql(db, "COMMIT; BEGIN")) return false;
      last_commit = Clock::now();
    }
    spent += Clock::now() - begin;
    m->rows += int64_t(batch.size());
  }
  auto begin = Clock::now();
  if (!Sql(db, "COMMIT")) return false;
  sqlite3_finalize(insert);
  sqlite3_close(db);
  spent += Clock::now() - begin;
  m->ingest_seconds = Seconds(spent);
  m->bytes = FileBytes(path);

  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) return Fail("cannot open " + path.string());
  sqlite3_stmt* select = nullptr;
  sqlite3_prepare_v2(db,
                     "SELECT time, value, labels FROM rows WHERE device = ?1 AND metric = ?2 "
                     "AND time >= ?3 AND time < ?4 ORDER BY time",
                     -1, &select, nullptr);
  int64_t start_us = (kT0 / kwatt::kNanosPerMicro) + int64_t(config.seconds / 2) * 1'000'000;
  int64_t end_us = start_us + int64_t(config.query_seconds) * 1'000'000;
  for (int run = 0; run < config.runs; ++run) {
    int64_t rows = 0;
    double sum = 0;
    auto t0 = Clock::now();
    for (int n = 0; n < config.query_nodes; ++n) {
      std::string device = NodeName(n);
      sqlite3_bind_text(select, 1, device.data(), int(device.size()), SQLITE_TRANSIENT);
      sqlite3_bind_text(select, 2, kMetric, -1, SQLITE_STATIC);
      sqlite3_bind_int64(select, 3, start_us);
      sqlite3_bind_int64(select, 4, end_us);
      while (sqlite3_step(select) == SQLITE_ROW) {
        ++rows;
        sum += sqlite3_column_double(select, 1);
      }
      sqlite3_reset(select);
    }
    double seconds = Seconds(Clock::now() - t0);
    m->query_rows = rows;
    m->query_seconds = std::min(m->query_seconds, seconds);
    if (sum < 0) std::printf("%f\n", sum);
  }
  sqlite3_finalize(select);
  sqlite3_close(db);
  return true;
}

int Usage() {
  std::fprintf(stderr,
               "usage: kwatt_store_bench [--dir DIR] [--nodes N] [--hz N] [--seconds N] "
               "[--query-nodes N] [--query-seconds N] [--head-rows N] [--runs N]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Config config;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    std::string value = argv[++i];
    if (arg == "--dir") {
      config.dir = value;
    } else if (arg == "--nodes") {
      config.nodes = std::atoi(value.c_str());
    } else if (arg == "--hz") {
      config.hz = std::atoi(value.c_str());
    } else if (arg == "--seconds") {
      config.seconds = std::atoi(value.c_str());
    } else if (arg == "--query-nodes") {
      config.query_nodes = std::atoi(value.c_str());
    } else if (arg == "--query-seconds") {
      config.query_seconds = std::atoi(value.c_str());
    } else if (arg == "--head-rows") {
      config.head_rows = size_t(std::atol(value.c_str()));
    } else if (arg == "--runs") {
      config.runs = std::atoi(value.c_str());
    } else {
      return Usage();
    }
  }
  if (config.nodes < 1 || config.hz < 1 || config.seconds < 1 || config.runs < 1 ||
      config.query_nodes > config.nodes) {
    return Usage();
  }
  bool own_dir = config.dir.empty();
  if (own_dir) {
    config.dir = fs::temp_directory_path() / ("kwatt_store_bench_" + std::to_string(::getpid()));
  }
  fs::create_directories(config.dir);
  Measure store, plain;
  bool ok = RunStore(config, &store) && RunPlain(config, &plain);
  if (own_dir) fs::remove_all(config.dir);
  if (!ok) return 1;

  auto per_s = [](double rows, double seconds) { return rows / seconds; };
  double store_in = per_s(store.rows, store.ingest_seconds);
  double plain_in = per_s(plain.rows, plain.ingest_seconds);
  double store_bpr = double(store.bytes) / store.rows, plain_bpr = double(plain.bytes) / plain.rows;
  double store_q = per_s(store.query_rows, store.query_seconds);
  double plain_q = per_s(plain.query_rows, plain.query_seconds);
  std::printf(
      "%d nodes x %d Hz x %d s = %lld rows (head_rows %zu); query: %d nodes x %d s = %lld "
      "rows\n\n",
      config.nodes, config.hz, config.seconds, static_cast<long long>(store.rows), config.head_rows,
      config.query_nodes, config.query_seconds, static_cast<long long>(store.query_rows));
  std::printf("| | kwatt store | plain SQLite table | kwatt / plain |\n");
  std::printf("|---|---:|---:|---:|\n");
  std::printf("| ingest, rows/s | %.0f | %.0f | %.1fx |\n", store_in, plain_in,
              store_in / plain_in);
  std::printf("| on disk, bytes/row | %.2f | %.2f | %.3fx |\n", store_bpr, plain_bpr,
              store_bpr / plain_bpr);
  std::printf("| range query, rows/s | %.0f | %.0f | %.1fx |\n", store_q, plain_q,
              store_q / plain_q);
  std::printf("| range query, ms | %.2f | %.2f | %.3fx |\n", store.query_seconds * 1e3,
              plain.query_seconds * 1e3, store.query_seconds / plain.query_seconds);
  std::printf(
      "\nThe kwatt store alone: ingest while another thread queries the last %d s of %d "
      "nodes in a loop (its own connection): %.0f rows/s (%lld queries meanwhile). "
      "Resident memory growth during the window query (%lld rows): %.1f MiB; during a "
      "query of every row (%lld rows): %.1f MiB.\n",
      config.query_seconds, config.query_nodes, per_s(store.rows, store.busy_ingest_seconds),
      static_cast<long long>(store.reader_queries), static_cast<long long>(store.query_rows),
      store.window_memory / 1048576.0, static_cast<long long>(store.all_rows),
      store.all_memory / 1048576.0);
  if (store.query_rows != plain.query_rows) {
    std::fprintf(stderr, "kwatt_store_bench: the two queries gave %lld and %lld rows\n",
                 static_cast<long long>(store.query_rows),
                 static_cast<long long>(plain.query_rows));
    return 1;
  }
  return 0;
}
