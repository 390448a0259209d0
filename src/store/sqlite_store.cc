// The embedded store on SQLite (doc/store.md tells the layout and the guarantees).
#include "kwatt/store/sqlite_store.h"

#include <sqlite3.h>
#include <sys/stat.h>
#include <xxhash.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <queue>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "src/store/append_rules.h"
#include "src/store/block_codec.h"
#include "src/store/job_rules.h"

namespace kwatt::store {

namespace {

using internal::BlockDecoder;
using internal::BlockEncoder;
using internal::BlockRows;

constexpr std::string_view kFormatName = "kwatt-store";
constexpr int kFormatVersion = 1;
// Sealing splits a head's rows into separate blocks where two consecutive rows are further apart
// than this (a late row far in the past gets a block of its own), so that blocks stay short.
constexpr int64_t kSplitGapMicros = int64_t(3600) * 1'000'000;

constexpr const char* kSchema = R"sql(
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE series(
  id INTEGER PRIMARY KEY,
  device TEXT NOT NULL,
  metric TEXT NOT NULL,
  labels TEXT NOT NULL,
  max_span INTEGER NOT NULL DEFAULT 0,
  UNIQUE(device, metric, labels));
CREATE TABLE blocks(
  id INTEGER PRIMARY KEY,
  series INTEGER NOT NULL,
  start INTEGER NOT NULL,
  end INTEGER NOT NULL,
  rows INTEGER NOT NULL,
  checksum INTEGER NOT NULL,
  data BLOB NOT NULL);
CREATE INDEX blocks_by_series_start ON blocks(series, start, end);
CREATE TABLE head(
  series INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  time INTEGER NOT NULL,
  utc_offset INTEGER NOT NULL,
  value_bits INTEGER NOT NULL,
  PRIMARY KEY(series, time, seq)) WITHOUT ROWID;
CREATE TABLE jobs(
  site TEXT NOT NULL,
  id INTEGER NOT NULL,
  user TEXT NOT NULL,
  nodes TEXT NOT NULL,
  start INTEGER NOT NULL,
  stop INTEGER,
  types TEXT NOT NULL,
  PRIMARY KEY(site, id));
CREATE TABLE catalogues(
  site TEXT NOT NULL,
  cluster TEXT NOT NULL,
  metrics TEXT NOT NULL,
  PRIMARY KEY(site, cluster));
)sql";

Status SqlStatus(sqlite3* db, int rc, std::string_view what) {
  std::string message = std::string(what) + ": " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      // SQLite's text ("unable to open database file") does not say why: the system's error does.
      if (int error = db ? sqlite3_system_errno(db) : 0; error != 0) {
        message += std::string(" (") + std::strerror(error) + ")";
      }
      break;
    default:
      break;
  }
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::Corruption(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(message + " (another process writes to the store)");
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
      return Status::IOError(message);
    default:
      return Status::Internal(message);
  }
}

// A prepared statement, reset for reuse.
class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) {
    other.stmt_ = nullptr;
  }
  Statement& operator=(Statement&& other) noexcept {
    if (this != &other) {
      sqlite3_finalize(stmt_);
      db_ = other.db_;
      stmt_ = std::exchange(other.stmt_, nullptr);
    }
    return *this;
  }
  bool prepared() const { return stmt_ != nullptr; }

  Status Prepare(sqlite3* db, std::string_view sql) {
    db_ = db;
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
    int rc = sqlite3_prepare_v3(db, sql.data(), int(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt_,
                                nullptr);
    if (rc != SQLITE_OK) return SqlStatus(db, rc, "preparing `" + std::string(sql) + "`");
    return Status::OK();
  }
  Statement& Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return *this;
  }
  Statement& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Statement& Bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& BindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), int(v.size()), SQLITE_STATIC);
    return *this;
  }
  Statement& BindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // A row (*row = true), the end (*row = false), or an error.
  Status Step(bool* row) {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) {
      *row = true;
      return Status::OK();
    }
    *row = false;
    if (rc == SQLITE_DONE) return Status::OK();
    Status status = SqlStatus(db_, rc, "running `" + std::string(sqlite3_sql(stmt_)) + "`");
    sqlite3_reset(stmt_);
    return status;
  }
  // Runs a statement that returns no row.
  Status Run() {
    bool row;
    KWATT_RETURN_IF_ERROR(Step(&row));
    sqlite3_reset(stmt_);
    return Status::OK();
  }
  int64_t Int(int i) const { return sqlite3_column_int64(stmt_, i); }
  bool IsNull(int i) const { return sqlite3_column_type(stmt_, i) == SQLITE_NULL; }
  std::string_view Text(int i) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, i));
    return p ? std::string_view(p, size_t(sqlite3_column_bytes(stmt_, i))) : std::string_view();
  }
  std::string_view Blob(int i) const {
    auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, i));
    return p ? std::string_view(p, size_t(sqlite3_column_bytes(stmt_, i))) : std::string_view();
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

Status Exec(sqlite3* db, const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return Status::OK();
  std::string message = error ? error : sqlite3_errstr(rc);
  sqlite3_free(error);
  return SqlStatus(nullptr, rc, "running `" + sql + "`: " + message);
}

// The smallest microsecond count whose instant is at or after `t`.
int64_t CeilMicros(UnixNanos t) { return CeilDiv(t, kNanosPerMicro); }

// Appends the rows of a statement on the head table (time, utc_offset, value_bits), then resets
// it.
Status ReadHeadRows(Statement* statement, BlockRows* rows) {
  bool row;
  while (true) {
    KWATT_RETURN_IF_ERROR(statement->Step(&row));
    if (!row) break;
    rows->micros.push_back(statement->Int(0));
    rows->utc_offset.push_back(int32_t(statement->Int(1)));
    rows->value.push_back(std::bit_cast<double>(uint64_t(statement->Int(2))));
  }
  statement->Reset();
  return Status::OK();
}

// Decodes a block read from the blocks table, checking it against what the table records of it:
// the XXH64 of its bytes, then (once decoded) its row count. Corruption after `where` otherwise.
Status DecodeStoredBlock(BlockDecoder* decoder, std::string_view data, int64_t checksum,
                         int64_t rows, const std::string& where, BlockRows* out) {
  auto actual = int64_t(XXH64(data.data(), data.size(), 0));
  if (actual != checksum) {
    return Status::Corruption(where + ": its checksum is " + std::to_string(actual) +
                              ", the table records " + std::to_string(checksum) +
                              " (its bytes changed)");
  }
  KWATT_RETURN_IF_ERROR(decoder->Decode(data, where, out));
  if (int64_t(out->size()) != rows) {
    return Status::Corruption(where + ": it holds " + std::to_string(out->size()) +
                              " rows, the table records " + std::to_string(rows));
  }
  return Status::OK();
}

// Lists are kept one item a line (device ids and job types hold no newline: checked).
std::string JoinLines(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += '\n';
    out += items[i];
  }
  return out;
}

std::vector<std::string> SplitLines(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) return out;
  size_t begin = 0;
  while (true) {
    size_t end = text.find('\n', begin);
    out.emplace_back(text.substr(begin, end == std::string_view::npos ? text.npos : end - begin));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  return out;
}

// What the store keeps in memory of a series (the rest is in the file).
struct SeriesState {
  int64_t id = 0;
  int64_t head_rows = 0;
  int64_t next_seq = 0;
  UnixNanos head_since = 0;  // the clock's wall time when the head's oldest row was appended
  int64_t max_span = 0;      // the longest end - start of its blocks, microseconds
};

// One source of a series' rows during a query: a decoded block, or the head.
struct Source {
  BlockRows rows;
  size_t next = 0;    // the next row to give
  size_t end = 0;     // one past the last row in the window
  int64_t order = 0;  // block id (the head: after every block), for ties
};

// The rows of one series in the window, in time order, ties by source order then position.
class SeriesCursor {
 public:
  SeriesCursor(size_t rank, uint32_t metric, uint32_t labels)
      : rank_(rank), metric_(metric), labels_(labels) {}

  size_t rank() const { return rank_; }
  uint32_t metric() const { return metric_; }
  uint32_t labels() const { return labels_; }

  // `blocks` is a prepared kBlockQuery statement, the cursor's until TakeStatement(); `decoder`
  // is shared by the cursors of a query (blocks are decoded one at a time) and outlives them.
  Status Start(Statement blocks, BlockDecoder* decoder, Statement* head_query, int64_t series,
               int64_t max_span, int64_t start_us, int64_t end_us, std::string where) {
    start_us_ = start_us;
    end_us_ = end_us;
    where_ = std::move(where);
    blocks_ = std::move(blocks);
    decoder_ = decoder;
    // start >= start_us - max_span bounds the index range: no block is longer than max_span.
    int64_t low;
    if (__builtin_sub_overflow(start_us, max_span, &low)) low = INT64_MIN;
    blocks_.Reset().Bind(1, series).Bind(2, low).Bind(3, end_us).Bind(4, start_us);
    KWATT_RETURN_IF_ERROR(NextPending());
    // The head: at most head_rows rows, in the order they were appended.
    auto head = std::make_unique<Source>();
    head_query->Reset().Bind(1, series).Bind(2, start_us).Bind(3, end_us);
    KWATT_RETURN_IF_ERROR(ReadHeadRows(head_query, &head->rows));
    if (head->rows.size() > 0) {
      internal::SortByTime(&head->rows);
      head->end = head->rows.size();
      head->order = INT64_MAX;
      Push(std::move(head));
    }
    return Advance();
  }

  bool done() const { return done_; }
  // The block statement, reset, for another cursor.
  Statement TakeStatement() {
    blocks_.Reset();
    return std::move(blocks_);
  }
  int64_t micros() const { return current_->rows.micros[current_->next]; }
  int32_t utc_offset() const { return current_->rows.utc_offset[current_->next]; }
  double value() const { return current_->rows.value[current_->next]; }

  // Moves to the next row.
  Status Next() {
    ++current_->next;
    if (current_->next < current_->end) Push(std::move(current_));
    current_.reset();
    return Advance();
  }

 private:
  // Reads the next block's key (not its data) from the statement.
  Status NextPending() {
    bool row;
    KWATT_RETURN_IF_ERROR(blocks_.Step(&row));
    has_pending_ = row;
    if (row) pending_start_ = blocks_.Int(1);
    return Status::OK();
  }

  // Decodes the pending block into a source.
  Status OpenPending() {
    auto source = std::make_unique<Source>();
    source->order = blocks_.Int(0);
    KWATT_RETURN_IF_ERROR(
        DecodeStoredBlock(decoder_, blocks_.Blob(3), blocks_.Int(4), blocks_.Int(5),
                          where_ + ": block " + std::to_string(source->order), &source->rows));
    const auto& t = source->rows.micros;
    source->next = size_t(std::lower_bound(t.begin(), t.end(), start_us_) - t.begin());
    source->end = size_t(std::lower_bound(t.begin(), t.end(), end_us_) - t.begin());
    if (source->next < source->end) Push(std::move(source));
    return NextPending();
  }

  void Push(std::unique_ptr<Source> source) {
    open_.push_back(std::move(source));
    std::push_heap(open_.begin(), open_.end(), Later);
  }

  // Chooses the source of the next row: blocks are opened in order of their first instant, so
  // once every block that starts at or before the earliest open row is open, that row is next.
  Status Advance() {
    while (has_pending_ && (open_.empty() || pending_start_ <= Key(*open_.front()).first)) {
      KWATT_RETURN_IF_ERROR(OpenPending());
    }
    if (open_.empty()) {
      done_ = true;
      return Status::OK();
    }
    std::pop_heap(open_.begin(), open_.end(), Later);
    current_ = std::move(open_.back());
    open_.pop_back();
    return Status::OK();
  }

  static std::pair<int64_t, int64_t> Key(const Source& s) {
    return {s.rows.micros[s.next], s.order};
  }
  static bool Later(const std::unique_ptr<Source>& a, const std::unique_ptr<Source>& b) {
    return Key(*a) > Key(*b);
  }

  size_t rank_;
  uint32_t metric_, labels_;
  int64_t start_us_ = 0, end_us_ = 0;
  std::string where_;
  Statement blocks_;
  bool has_pending_ = false;
  int64_t pending_start_ = 0;
  BlockDecoder* decoder_ = nullptr;
  std::vector<std::unique_ptr<Source>> open_;  // a heap, earliest row first
  std::unique_ptr<Source> current_;
  bool done_ = false;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(std::string path, SqliteStoreOptions options)
      : path_(std::move(path)), options_(std::move(options)) {
    if (!options_.clock) options_.clock = SystemClock();
  }

  ~SqliteStore() override {
    if (db_ != nullptr) {
      if (in_transaction_) (void)Flush();  // a failure here has nobody to tell: rows not durable
      statements_.clear();
      spare_block_queries_.clear();
      sqlite3_close_v2(db_);
    }
  }

  Status Open() {
    struct stat st;
    bool exists = ::stat(path_.c_str(), &st) == 0;
    if (!exists && !options_.create_if_missing) {
      return Status::NotFound("no store at " + path_);
    }
    if (exists && S_ISREG(st.st_mode) && st.st_size == 0 && !options_.create_if_missing) {
      // An empty file (a `touch`, a copy cut short) is not made a store by a command that only
      // reads one: the file stays as it is.
      return Status::NotFound(path_ +
                              " is an empty file, not a store (kwatt import and kwatt serve "
                              "--store make one)");
    }
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                (options_.create_if_missing ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path_.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) return SqlStatus(db_, rc, "opening the store " + path_);
    sqlite3_busy_timeout(db_, options_.busy_timeout_ms);
    std::string journal_mode;
    // Switching a new file to WAL takes an exclusive lock, for which SQLite does not wait (its
    // busy handler is not called there): while another process creates the same store, try
    // again for up to busy_timeout_ms.
    auto give_up =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.busy_timeout_ms);
    while (true) {
      Statement wal;
      bool row = false;
      Status status = wal.Prepare(db_, "PRAGMA journal_mode=WAL");
      if (status.ok()) status = wal.Step(&row);
      if (status.code() == Status::Code::kUnavailable &&
          std::chrono::steady_clock::now() < give_up) {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        continue;
      }
      if (!status.ok()) return status.WithContext(path_ + ": not a store");
      if (row) journal_mode = wal.Text(0);
      break;
    }
    if (journal_mode != "wal") {
      return Status::IOError(path_ + ": SQLite cannot use WAL mode on this file (journal mode '" +
                             journal_mode + "'); the store needs it (a local file system)");
    }
    KWATT_RETURN_IF_ERROR(Exec(db_, "PRAGMA synchronous=NORMAL; PRAGMA cache_size=-32768"));
    KWATT_RETURN_IF_ERROR(CreateOrCheckSchema());
    KWATT_RETURN_IF_ERROR(PrepareStatements());
    return LoadState();
  }

  Status Append(const RowBatch& batch, const StringInterner& interner) override {
    return AppendAnd(batch, interner, nullptr);
  }

  Status AppendImported(const RowBatch& batch, const StringInterner& interner,
                        const std::string& key, const std::optional<ImportMark>& from,
                        const ImportMark& to) override {
    return AppendAnd(batch, interner, [&]() -> Status {
      KWATT_ASSIGN_OR_RETURN(std::optional<ImportMark> now, GetImportMark(key));
      KWATT_RETURN_IF_ERROR(internal::CheckImportMarkIs(key, now, from));
      Statement put;
      KWATT_RETURN_IF_ERROR(put.Prepare(db_, "INSERT OR REPLACE INTO meta VALUES(?, ?)"));
      return put.Bind(1, internal::ImportMarkKey(key)).Bind(2, internal::ImportMarkText(to)).Run();
    });
  }

  Result<std::optional<ImportMark>> GetImportMark(const std::string& key) override {
    Statement get;
    KWATT_RETURN_IF_ERROR(get.Prepare(db_, "SELECT value FROM meta WHERE key = ?"));
    get.Bind(1, internal::ImportMarkKey(key));
    bool row;
    KWATT_RETURN_IF_ERROR(get.Step(&row));
    if (!row) return std::optional<ImportMark>();
    KWATT_ASSIGN_OR_RETURN(ImportMark mark, internal::ParseImportMark(key, get.Text(0)));
    return std::optional<ImportMark>(mark);
  }

  // Appends `batch` and runs `also` (may be null) in one savepoint: both or neither.
  Status AppendAnd(const RowBatch& batch, const StringInterner& interner,
                   const std::function<Status()>& also) {
    KWATT_RETURN_IF_ERROR(internal::CheckAppendable(batch, interner));
    if (batch.empty() && !also) return Status::OK();
    KWATT_RETURN_IF_ERROR(BeginIfNeeded());
    KWATT_RETURN_IF_ERROR(Exec(db_, "SAVEPOINT append"));
    Status status = batch.empty() ? Status::OK() : AppendRows(batch, interner);
    if (status.ok() && also) status = also();
    if (!status.ok()) {
      // The batch is undone as a whole; what the memory knew is read again from the file.
      (void)Exec(db_, "ROLLBACK TO append; RELEASE append");
      Status reload = LoadState();
      return reload.ok() ? status : reload;
    }
    KWATT_RETURN_IF_ERROR(Exec(db_, "RELEASE append"));
    UnixNanos now = options_.clock->WallNanos();
    if (now - transaction_began_ >= options_.flush_interval_ns) return Flush();
    return Status::OK();
  }

  Status Flush() override {
    KWATT_RETURN_IF_ERROR(SealAged());
    if (!in_transaction_) return Status::OK();
    KWATT_RETURN_IF_ERROR(Exec(db_, "COMMIT"));
    in_transaction_ = false;
    return Status::OK();
  }

  Status Seal() override {
    for (SeriesState& state : states_) {
      if (state.head_rows == 0) continue;
      KWATT_RETURN_IF_ERROR(BeginIfNeeded());
      KWATT_RETURN_IF_ERROR(Seal(&state));
    }
    return Flush();
  }

  Status Query(const StoreQuery& query, const QueryCallback& callback) override {
    if (query.batch_rows == 0) return Status::InvalidArgument("batch_rows must be at least 1");
    int64_t start_us = CeilMicros(query.start), end_us = CeilMicros(query.end);
    std::vector<std::string> devices = query.devices;
    if (devices.empty()) {
      Statement all;
      KWATT_RETURN_IF_ERROR(all.Prepare(db_, "SELECT DISTINCT device FROM series"));
      bool row;
      while (true) {
        KWATT_RETURN_IF_ERROR(all.Step(&row));
        if (!row) break;
        devices.emplace_back(all.Text(0));
      }
    }
    std::sort(devices.begin(), devices.end());
    devices.erase(std::unique(devices.begin(), devices.end()), devices.end());
    std::vector<std::string> metrics = query.metrics;
    std::sort(metrics.begin(), metrics.end());

    StringInterner interner;
    RowBatch batch;
    auto emit = [&]() -> Status {
      if (batch.empty()) return Status::OK();
      Status status = callback(batch, interner);
      batch.Clear();
      return status;
    };
    if (start_us >= end_us) return Status::OK();
    for (const std::string& device : devices) {
      KWATT_RETURN_IF_ERROR(QueryDevice(device, metrics, start_us, end_us, query.batch_rows,
                                        &interner, &batch, emit));
    }
    return emit();
  }

  Status PutJob(const jobs::Job& job) override {
    KWATT_RETURN_IF_ERROR(internal::CheckStorableJob(job));
    Statement& put = Get(kPutJob);
    BindJob(put, job, job.uid);
    return WriteNow(put);
  }

  Result<int64_t> AddJob(const jobs::Job& job, bool next_id) override {
    KWATT_RETURN_IF_ERROR(internal::CheckStorableJob(job));
    // BEGIN IMMEDIATE takes the write lock: no other process reads the highest id or inserts
    // until this transaction ends.
    KWATT_RETURN_IF_ERROR(BeginIfNeeded());
    Result<int64_t> id = job.uid;
    bool row = false;
    if (next_id) {
      Statement& highest = Get(kHighestJobId);
      highest.Reset().Bind(1, job.site);
      Status read = highest.Step(&row);
      id = !read.ok() ? Result<int64_t>(read)
                      : internal::NextJobId(job.site, row && !highest.IsNull(0)
                                                          ? std::optional<int64_t>(highest.Int(0))
                                                          : std::nullopt);
      highest.Reset();
    } else {
      Statement& existing = Get(kGetJob);
      existing.Reset().Bind(1, job.site).Bind(2, job.uid);
      Status read = existing.Step(&row);
      existing.Reset();
      if (!read.ok()) id = read;
      if (read.ok() && row) id = internal::JobExists(job.site, job.uid);
    }
    Status inserted = id.status();
    if (inserted.ok()) {
      Statement& insert = Get(kInsertJob);
      BindJob(insert, job, *id);
      inserted = insert.Run();
    }
    Status flushed = Flush();  // ends the transaction (rows appended before are kept)
    KWATT_RETURN_IF_ERROR(inserted);
    KWATT_RETURN_IF_ERROR(flushed);
    return *id;
  }

  Result<jobs::Job> GetJob(const std::string& site, int64_t id) override {
    Statement& get = Get(kGetJob);
    get.Reset().Bind(1, site).Bind(2, id);
    bool row;
    KWATT_RETURN_IF_ERROR(get.Step(&row));
    if (!row)
      return Status::NotFound("no job " + site + "/" + std::to_string(id) + " in the store");
    jobs::Job job = ReadJob(get);
    get.Reset();
    return job;
  }

  Result<std::vector<jobs::Job>> Jobs(const std::string& site, UnixNanos start,
                                      UnixNanos end) override {
    Statement& list = Get(kListJobs);
    list.Reset().Bind(1, site).Bind(2, end).Bind(3, start);
    std::vector<jobs::Job> jobs;
    bool row;
    while (true) {
      KWATT_RETURN_IF_ERROR(list.Step(&row));
      if (!row) break;
      jobs.push_back(ReadJob(list));
    }
    list.Reset();
    return jobs;
  }

  Status PutCatalogue(const std::string& site, const std::string& cluster,
                      const Catalogue& catalogue) override {
    Statement& put = Get(kPutCatalogue);
    put.Reset().Bind(1, site).Bind(2, cluster).Bind(3, catalogue.json());
    return WriteNow(put);
  }

  Result<Catalogue> GetCatalogue(const std::string& site, const std::string& cluster) override {
    Statement& get = Get(kGetCatalogue);
    get.Reset().Bind(1, site).Bind(2, cluster);
    bool row;
    KWATT_RETURN_IF_ERROR(get.Step(&row));
    if (!row) return Status::NotFound("no catalogue for " + site + "/" + cluster + " in the store");
    std::string text(get.Text(0));
    get.Reset();
    return internal::ParseStoredCatalogue(site, cluster, text);
  }

  Result<CheckReport> Check() override;
  Result<StoreInfo> Info() override;

 private:
  enum StatementId {
    kInsertSeries,
    kInsertHead,
    kReadHead,
    kDeleteHead,
    kInsertBlock,
    kUpdateSpan,
    kQueryHead,
    kPutJob,
    kGetJob,
    kListJobs,
    kHighestJobId,
    kInsertJob,
    kPutCatalogue,
    kGetCatalogue,
    kStatementCount,
  };

  Statement& Get(StatementId id) { return statements_[id]; }

  // A prepared statement over a series' blocks in a window, for a query's cursor: a spare one
  // (every series of a device has its cursor open at once; preparing one for each, and each
  // query, was most of a short query's time).
  Result<Statement> TakeBlockQuery() {
    if (!spare_block_queries_.empty()) {
      Statement statement = std::move(spare_block_queries_.back());
      spare_block_queries_.pop_back();
      return statement;
    }
    Statement statement;
    KWATT_RETURN_IF_ERROR(statement.Prepare(
        db_,
        "SELECT id, start, end, data, checksum, rows FROM blocks WHERE series = ?1 AND start >= ?2 "
        "AND start < ?3 AND end >= ?4 ORDER BY start, id"));
    return statement;
  }

  Status PrepareStatements() {
    static constexpr const char* kSql[kStatementCount] = {
        "INSERT INTO series(device, metric, labels) VALUES(?1, ?2, ?3) ON CONFLICT DO NOTHING",
        "INSERT INTO head(series, seq, time, utc_offset, value_bits) VALUES(?1, ?2, ?3, ?4, ?5)",
        "SELECT time, utc_offset, value_bits FROM head WHERE series = ?1 ORDER BY time, seq",
        "DELETE FROM head WHERE series = ?1",
        "INSERT INTO blocks(series, start, end, rows, checksum, data) VALUES(?1, ?2, ?3, ?4, ?5, "
        "?6)",
        // The largest any connection saw: a smaller one would hide blocks another one sealed.
        "UPDATE series SET max_span = max(max_span, ?2) WHERE id = ?1",
        "SELECT time, utc_offset, value_bits FROM head WHERE series = ?1 AND time >= ?2 AND "
        "time < ?3 ORDER BY time, seq",
        "INSERT OR REPLACE INTO jobs(site, id, user, nodes, start, stop, types) "
        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        "SELECT site, id, user, nodes, start, stop, types FROM jobs WHERE site = ?1 AND id = ?2",
        "SELECT site, id, user, nodes, start, stop, types FROM jobs WHERE site = ?1 AND start < ?2 "
        "AND (stop IS NULL OR stop > ?3) ORDER BY start, id",
        "SELECT max(id) FROM jobs WHERE site = ?1",
        "INSERT INTO jobs(site, id, user, nodes, start, stop, types) VALUES(?1, ?2, ?3, ?4, ?5, "
        "?6, "
        "?7)",
        "INSERT OR REPLACE INTO catalogues(site, cluster, metrics) VALUES(?1, ?2, ?3)",
        "SELECT metrics FROM catalogues WHERE site = ?1 AND cluster = ?2",
    };
    statements_.resize(kStatementCount);
    for (int i = 0; i < kStatementCount; ++i) {
      KWATT_RETURN_IF_ERROR(statements_[i].Prepare(db_, kSql[i]));
    }
    return Status::OK();
  }

  Status CreateOrCheckSchema() {
    Statement tables;
    KWATT_RETURN_IF_ERROR(tables.Prepare(db_, "SELECT count(*) FROM sqlite_master"));
    bool row;
    KWATT_RETURN_IF_ERROR(tables.Step(&row));
    int64_t count = tables.Int(0);
    // Done with it: a statement left stepping holds a read transaction, and a connection that
    // reads cannot wait for the write lock (SQLite answers "database is locked" at once instead
    // of waiting busy_timeout_ms, which two processes creating one store at once both hit).
    tables.Reset();
    if (count == 0) {
      // Another process may be creating it too: count again under the write lock.
      KWATT_RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
      tables.Reset();
      Status status = tables.Step(&row);
      if (status.ok() && tables.Int(0) == 0) {
        status = Exec(db_, kSchema);
        if (status.ok()) {
          status = Exec(db_, "INSERT INTO meta VALUES('format', '" + std::string(kFormatName) +
                                 "'), ('version', '" + std::to_string(kFormatVersion) + "')");
        }
      }
      tables.Reset();
      if (!status.ok()) {
        (void)Exec(db_, "ROLLBACK");
        return status;
      }
      KWATT_RETURN_IF_ERROR(Exec(db_, "COMMIT"));
    }
    Statement meta;
    if (!meta.Prepare(db_, "SELECT key, value FROM meta").ok()) {
      return Status::Corruption(path_ + ": a SQLite file, but not a kwatt store (no meta table)");
    }
    std::map<std::string, std::string, std::less<>> values;
    while (true) {
      KWATT_RETURN_IF_ERROR(meta.Step(&row));
      if (!row) break;
      values[std::string(meta.Text(0))] = std::string(meta.Text(1));
    }
    if (values["format"] != kFormatName) {
      return Status::Corruption(path_ + ": a SQLite file, but not a kwatt store");
    }
    if (values["version"] != std::to_string(kFormatVersion)) {
      return Status::Corruption(path_ + ": a kwatt store of format version " + values["version"] +
                                ", this kwatt reads version " + std::to_string(kFormatVersion));
    }
    return Status::OK();
  }

  // The series and the heads' sizes, from the file.
  Status LoadState() {
    series_.clear();
    states_.clear();
    Statement read;
    KWATT_RETURN_IF_ERROR(read.Prepare(
        db_,
        "SELECT s.id, s.device, s.metric, s.labels, s.max_span, count(h.seq), "
        "coalesce(max(h.seq) + 1, 0) FROM series s LEFT JOIN head h ON h.series = s.id "
        "GROUP BY s.id"));
    bool row;
    UnixNanos now = options_.clock->WallNanos();
    while (true) {
      KWATT_RETURN_IF_ERROR(read.Step(&row));
      if (!row) break;
      SeriesState state;
      state.id = read.Int(0);
      state.max_span = read.Int(4);
      state.head_rows = read.Int(5);
      state.next_seq = read.Int(6);
      state.head_since = now;  // the age of a head read again starts now
      series_.emplace(SeriesKey(read.Text(1), read.Text(2), read.Text(3)), states_.size());
      states_.push_back(state);
    }
    return Status::OK();
  }

  static std::string SeriesKey(std::string_view device, std::string_view metric,
                               std::string_view labels) {
    std::string key;
    key.reserve(device.size() + metric.size() + labels.size() + 2);
    key.append(device).push_back('\0');
    key.append(metric).push_back('\0');
    key.append(labels);
    return key;
  }

  Status BeginIfNeeded() {
    if (in_transaction_) return Status::OK();
    KWATT_RETURN_IF_ERROR(Exec(db_, "BEGIN IMMEDIATE"));
    in_transaction_ = true;
    transaction_began_ = options_.clock->WallNanos();
    return Status::OK();
  }

  // A small write outside the row stream (a job, a catalogue): durable when this returns, with
  // the rows appended so far.
  Status WriteNow(Statement& statement) {
    KWATT_RETURN_IF_ERROR(BeginIfNeeded());
    KWATT_RETURN_IF_ERROR(statement.Run());
    return Flush();
  }

  // The index in states_ of the batch's series (device, metric, labels ids), created if new.
  Status ResolveSeries(const RowBatch& batch, const StringInterner& interner, size_t i,
                       size_t* index) {
    uint64_t ids[3] = {batch.device[i], batch.metric[i], batch.labels[i]};
    auto cached = cache_.find(CacheKey{ids[0], ids[1], ids[2]});
    if (cached != cache_.end()) {
      *index = cached->second;
      return Status::OK();
    }
    std::string_view device = interner.Get(batch.device[i]);
    std::string_view metric = interner.Get(batch.metric[i]);
    std::string_view labels = interner.Get(batch.labels[i]);
    std::string key = SeriesKey(device, metric, labels);
    auto it = series_.find(key);
    if (it == series_.end()) {
      Statement& insert = Get(kInsertSeries);
      insert.Reset().Bind(1, device).Bind(2, metric).Bind(3, labels);
      KWATT_RETURN_IF_ERROR(insert.Run());
      SeriesState state;
      if (sqlite3_changes(db_) > 0) {
        state.id = sqlite3_last_insert_rowid(db_);
      } else {
        // Another connection (a server's other one, another process) made it since this one
        // read the store: its state as the file has it.
        Statement read;
        KWATT_RETURN_IF_ERROR(read.Prepare(
            db_,
            "SELECT s.id, s.max_span, count(h.seq), coalesce(max(h.seq) + 1, 0) FROM series s "
            "LEFT JOIN head h ON h.series = s.id WHERE s.device = ?1 AND s.metric = ?2 AND "
            "s.labels = ?3 GROUP BY s.id"));
        read.Bind(1, device).Bind(2, metric).Bind(3, labels);
        bool row = false;
        KWATT_RETURN_IF_ERROR(read.Step(&row));
        if (!row) return Status::Internal("the series of " + std::string(device) + " vanished");
        state.id = read.Int(0);
        state.max_span = read.Int(1);
        state.head_rows = read.Int(2);
        state.next_seq = read.Int(3);
        state.head_since = options_.clock->WallNanos();
      }
      it = series_.emplace(std::move(key), states_.size()).first;
      states_.push_back(state);
    }
    cache_.emplace(CacheKey{ids[0], ids[1], ids[2]}, it->second);
    *index = it->second;
    return Status::OK();
  }

  Status AppendRows(const RowBatch& batch, const StringInterner& interner) {
    cache_.clear();  // its keys are ids of this batch's interner
    Statement& insert = Get(kInsertHead);
    UnixNanos now = options_.clock->WallNanos();
    for (size_t i = 0; i < batch.size(); ++i) {
      size_t index = 0;
      KWATT_RETURN_IF_ERROR(ResolveSeries(batch, interner, i, &index));
      SeriesState& state = states_[index];
      insert.Reset()
          .Bind(1, state.id)
          .Bind(2, state.next_seq)
          .Bind(3, batch.time[i] / kNanosPerMicro)
          .Bind(4, batch.utc_offset[i])
          .Bind(5, int64_t(std::bit_cast<uint64_t>(batch.value[i])));
      KWATT_RETURN_IF_ERROR(insert.Run());
      if (state.head_rows == 0) state.head_since = now;
      ++state.next_seq;
      if (++state.head_rows >= int64_t(options_.head_rows)) {
        KWATT_RETURN_IF_ERROR(Seal(&state));
      }
    }
    return Status::OK();
  }

  // Seals the heads older than head_max_age (at most once a second).
  Status SealAged() {
    UnixNanos now = options_.clock->WallNanos();
    if (now - last_age_check_ < kNanosPerSecond && last_age_check_ != 0) return Status::OK();
    last_age_check_ = now;
    for (SeriesState& state : states_) {
      if (state.head_rows > 0 && now - state.head_since >= options_.head_max_age_ns) {
        KWATT_RETURN_IF_ERROR(BeginIfNeeded());
        KWATT_RETURN_IF_ERROR(Seal(&state));
      }
    }
    return Status::OK();
  }

  // Turns a series' head into blocks, in the open transaction.
  Status Seal(SeriesState* state) {
    Statement& read = Get(kReadHead);
    read.Reset().Bind(1, state->id);
    head_.Clear();
    KWATT_RETURN_IF_ERROR(ReadHeadRows(&read, &head_));
    internal::SortByTime(&head_);
    for (size_t begin = 0; begin < head_.size();) {
      size_t end = begin + 1;
      while (end < head_.size() && head_.micros[end] - head_.micros[end - 1] <= kSplitGapMicros) {
        ++end;
      }
      block_rows_.Clear();
      block_rows_.micros.assign(head_.micros.begin() + begin, head_.micros.begin() + end);
      block_rows_.utc_offset.assign(head_.utc_offset.begin() + begin,
                                    head_.utc_offset.begin() + end);
      block_rows_.value.assign(head_.value.begin() + begin, head_.value.begin() + end);
      KWATT_RETURN_IF_ERROR(encoder_.Encode(block_rows_, &block_));
      int64_t first = block_rows_.micros.front(), last = block_rows_.micros.back();
      Statement& insert = Get(kInsertBlock);
      insert.Reset()
          .Bind(1, state->id)
          .Bind(2, first)
          .Bind(3, last)
          .Bind(4, int64_t(block_rows_.size()))
          .Bind(5, int64_t(XXH64(block_.data(), block_.size(), 0)))
          .BindBlob(6, block_);
      KWATT_RETURN_IF_ERROR(insert.Run());
      if (last - first > state->max_span) {
        state->max_span = last - first;
        Statement& span = Get(kUpdateSpan);
        span.Reset().Bind(1, state->id).Bind(2, state->max_span);
        KWATT_RETURN_IF_ERROR(span.Run());
      }
      begin = end;
    }
    Statement& clear = Get(kDeleteHead);
    clear.Reset().Bind(1, state->id);
    KWATT_RETURN_IF_ERROR(clear.Run());
    state->head_rows = 0;
    return Status::OK();
  }

  template <typename Emit>
  Status QueryDevice(const std::string& device, const std::vector<std::string>& metrics,
                     int64_t start_us, int64_t end_us, size_t batch_rows, StringInterner* interner,
                     RowBatch* batch, Emit& emit) {
    Statement list;
    KWATT_RETURN_IF_ERROR(list.Prepare(
        db_,
        "SELECT id, metric, labels, max_span FROM series WHERE device = ?1 ORDER BY metric, "
        "labels"));
    list.Bind(1, device);
    std::vector<std::unique_ptr<SeriesCursor>> cursors;
    // A cursor's statement goes back to spare_block_queries_ when it is done (or on an error).
    auto give_back = [this](SeriesCursor& cursor) {
      spare_block_queries_.push_back(cursor.TakeStatement());
    };
    struct GiveBackAll {
      std::vector<std::unique_ptr<SeriesCursor>>& cursors;
      decltype(give_back)& back;
      ~GiveBackAll() {
        for (auto& c : cursors) back(*c);
      }
    } give_back_all{cursors, give_back};
    uint32_t device_id = interner->Intern(device);
    bool row;
    while (true) {
      KWATT_RETURN_IF_ERROR(list.Step(&row));
      if (!row) break;
      std::string_view metric = list.Text(1);
      if (!metrics.empty() && !std::binary_search(metrics.begin(), metrics.end(), metric)) continue;
      auto cursor = std::make_unique<SeriesCursor>(cursors.size(), interner->Intern(metric),
                                                   interner->Intern(list.Text(2)));
      std::string where = path_ + ": series " + std::to_string(list.Int(0)) + " (" + device + " " +
                          std::string(metric) + " " + std::string(list.Text(2)) + ")";
      KWATT_ASSIGN_OR_RETURN(Statement blocks, TakeBlockQuery());
      Status started = cursor->Start(std::move(blocks), &decoder_, &Get(kQueryHead), list.Int(0),
                                     list.Int(3), start_us, end_us, std::move(where));
      if (!started.ok() || cursor->done()) {
        give_back(*cursor);
        KWATT_RETURN_IF_ERROR(started);
        continue;
      }
      cursors.push_back(std::move(cursor));
    }
    // Across the device's series: the earliest row first, ties by series rank (metric, labels).
    auto later = [](const std::unique_ptr<SeriesCursor>& a,
                    const std::unique_ptr<SeriesCursor>& b) {
      return std::make_pair(a->micros(), a->rank()) > std::make_pair(b->micros(), b->rank());
    };
    std::make_heap(cursors.begin(), cursors.end(), later);
    while (!cursors.empty()) {
      std::pop_heap(cursors.begin(), cursors.end(), later);
      SeriesCursor& c = *cursors.back();
      batch->time.push_back(c.micros() * kNanosPerMicro);
      batch->utc_offset.push_back(c.utc_offset());
      batch->device.push_back(device_id);
      batch->metric.push_back(c.metric());
      batch->value.push_back(c.value());
      batch->labels.push_back(c.labels());
      if (batch->size() >= batch_rows) KWATT_RETURN_IF_ERROR(emit());
      KWATT_RETURN_IF_ERROR(c.Next());
      if (c.done()) {
        give_back(c);
        cursors.pop_back();
      } else {
        std::push_heap(cursors.begin(), cursors.end(), later);
      }
    }
    return Status::OK();
  }

  static void BindJob(Statement& put, const jobs::Job& job, int64_t id) {
    put.Reset().Bind(1, job.site).Bind(2, id).Bind(3, job.user).Bind(4, JoinLines(job.nodes));
    put.Bind(5, job.started_at).Bind(7, JoinLines(job.types));
    if (job.stopped_at) put.Bind(6, *job.stopped_at);
  }

  static jobs::Job ReadJob(const Statement& s) {
    jobs::Job job;
    job.site = std::string(s.Text(0));
    job.uid = s.Int(1);
    job.user = std::string(s.Text(2));
    job.nodes = SplitLines(s.Text(3));
    job.started_at = s.Int(4);
    if (!s.IsNull(5)) job.stopped_at = s.Int(5);
    job.types = SplitLines(s.Text(6));
    return job;
  }

  struct CacheKey {
    uint64_t device, metric, labels;
    bool operator==(const CacheKey&) const = default;
  };
  struct CacheHash {
    size_t operator()(const CacheKey& k) const {
      return std::hash<uint64_t>()((k.device * 0x9E3779B97F4A7C15ULL) ^ (k.metric << 21) ^
                                   (k.labels << 42) ^ k.labels);
    }
  };

  std::string path_;
  SqliteStoreOptions options_;
  sqlite3* db_ = nullptr;
  std::vector<Statement> statements_;
  std::vector<Statement> spare_block_queries_;  // see TakeBlockQuery()
  BlockDecoder decoder_;                        // of queries' blocks
  bool in_transaction_ = false;
  UnixNanos transaction_began_ = 0;
  UnixNanos last_age_check_ = 0;
  std::unordered_map<std::string, size_t> series_;  // SeriesKey -> index in states_
  std::vector<SeriesState> states_;
  std::unordered_map<CacheKey, size_t, CacheHash> cache_;  // the batch's ids -> index in states_
  BlockEncoder encoder_;
  BlockRows head_, block_rows_;
  std::string block_;
};

Result<CheckReport> SqliteStore::Check() {
  CheckReport report;
  auto problem = [&](std::string text) {
    if (report.problems.size() < options_.max_problems) report.problems.push_back(std::move(text));
  };
  Statement integrity;
  KWATT_RETURN_IF_ERROR(integrity.Prepare(db_, "PRAGMA integrity_check"));
  bool row;
  while (true) {
    Status status = integrity.Step(&row);
    if (!status.ok()) {
      problem(path_ + ": SQLite's integrity check: " + status.message());
      break;
    }
    if (!row) break;
    if (integrity.Text(0) != "ok")
      problem(path_ + ": SQLite's integrity check: " + std::string(integrity.Text(0)));
  }
  Statement blocks;
  KWATT_RETURN_IF_ERROR(blocks.Prepare(
      db_,
      "SELECT b.id, b.series, b.start, b.end, b.rows, b.checksum, b.data, s.device, s.metric, "
      "s.labels, s.max_span FROM blocks b LEFT JOIN series s ON s.id = b.series ORDER BY b.id"));
  BlockDecoder decoder;
  BlockRows rows;
  while (true) {
    Status status = blocks.Step(&row);
    if (!status.ok()) {
      problem(path_ + ": reading the blocks: " + status.message());
      break;
    }
    if (!row) break;
    ++report.blocks_checked;
    std::string where = path_ + ": block " + std::to_string(blocks.Int(0)) + " (series " +
                        std::to_string(blocks.Int(1)) + ": " + std::string(blocks.Text(7)) + " " +
                        std::string(blocks.Text(8)) + " " + std::string(blocks.Text(9)) +
                        ", from " + FormatUtcTimestamp(blocks.Int(2) * kNanosPerMicro) + ")";
    if (blocks.IsNull(7)) {
      problem(where + ": its series is not in the series table");
      continue;
    }
    status =
        DecodeStoredBlock(&decoder, blocks.Blob(6), blocks.Int(5), blocks.Int(4), where, &rows);
    if (!status.ok()) {
      problem(status.message());
      continue;
    }
    report.rows_checked += int64_t(rows.size());
    if (rows.micros.front() != blocks.Int(2) || rows.micros.back() != blocks.Int(3)) {
      problem(where + ": its rows span other instants than its key says");
    } else if (rows.micros.back() - rows.micros.front() > blocks.Int(10)) {
      problem(where + ": it is longer than its series' max_span (queries would miss rows)");
    }
  }
  Statement orphans;
  KWATT_RETURN_IF_ERROR(orphans.Prepare(
      db_, "SELECT count(*) FROM head WHERE series NOT IN (SELECT id FROM series)"));
  Status status = orphans.Step(&row);
  if (!status.ok()) {
    problem(path_ + ": reading the head: " + status.message());
  } else if (orphans.Int(0) > 0) {
    problem(path_ + ": " + std::to_string(orphans.Int(0)) +
            " head rows belong to no series of the series table");
  }
  return report;
}

Result<StoreInfo> SqliteStore::Info() {
  StoreInfo info;
  Statement s;
  bool row;
  KWATT_RETURN_IF_ERROR(s.Prepare(
      db_,
      "SELECT (SELECT count(*) FROM series), (SELECT count(*) FROM blocks), "
      "(SELECT coalesce(sum(rows), 0) FROM blocks), (SELECT min(start) FROM blocks), "
      "(SELECT max(end) FROM blocks), (SELECT count(*) FROM head), (SELECT min(time) FROM head), "
      "(SELECT max(time) FROM head), (SELECT count(*) FROM jobs), "
      "(SELECT count(*) FROM catalogues), (SELECT page_count * page_size FROM "
      "pragma_page_count(), pragma_page_size())"));
  KWATT_RETURN_IF_ERROR(s.Step(&row));
  info.series = s.Int(0);
  info.blocks = s.Int(1);
  info.head_rows = s.Int(5);
  info.rows = s.Int(2) + info.head_rows;
  std::optional<int64_t> first, last;
  for (int i : {3, 6}) {
    if (!s.IsNull(i)) first = std::min(first.value_or(INT64_MAX), s.Int(i));
  }
  for (int i : {4, 7}) {
    if (!s.IsNull(i)) last = std::max(last.value_or(INT64_MIN), s.Int(i));
  }
  info.first = first.value_or(0) * kNanosPerMicro;
  info.last = last.value_or(0) * kNanosPerMicro;
  info.jobs = s.Int(8);
  info.catalogues = s.Int(9);
  info.bytes = s.Int(10);
  struct stat st;
  if (::stat((path_ + "-wal").c_str(), &st) == 0) info.bytes += int64_t(st.st_size);
  return info;
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path,
                                               const SqliteStoreOptions& options) {
  if (options.head_rows == 0 || options.head_rows > internal::kMaxBlockRows) {
    return Status::InvalidArgument("head_rows must be 1 to " +
                                   std::to_string(internal::kMaxBlockRows));
  }
  auto store = std::make_unique<SqliteStore>(path, options);
  Status opened = store->Open();
  if (opened.code() == Status::Code::kCorruption &&
      opened.message().find(path) == std::string::npos) {
    // SQLite found damaged pages while opening: name the file and what to do.
    return Status::Corruption("the store " + path + " is damaged (" + opened.message() +
                              "): restore it from a backup (doc/store.md)");
  }
  KWATT_RETURN_IF_ERROR(opened);
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace kwatt::store
