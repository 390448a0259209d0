// `kwatt serve --store`: the rows of a store served as a metrics answer (the same text, order and
// summaries as the simulated answer, src/server/row_stream.h), and the store connections the
// server's threads borrow. Internal to the server.
//
// Thread safety: StorePool is safe to use from several threads; a StoreRowStream belongs to one
// request (one thread at a time).
#ifndef KWATT_SRC_SERVER_STORE_ROWS_H_
#define KWATT_SRC_SERVER_STORE_ROWS_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"
#include "kwatt/store/store.h"
#include "src/server/row_stream.h"

namespace kwatt::server::internal {

// Open stores for the server's threads: a Store object serves one thread at a time, so each
// request borrows one, and gives it back when done. At most `max_open` are open at once (a
// borrower waits for one to come back); they are opened as needed and kept.
class StorePool {
 public:
  // Opens the store at `uri` once (created when missing: kwatt/store/open_store.h), to fail early.
  static Result<std::unique_ptr<StorePool>> Open(const std::string& uri, size_t max_open);

  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& other) noexcept;
    Lease& operator=(Lease&& other) noexcept;
    ~Lease();
    store::Store* operator->() const { return store_.get(); }
    store::Store& operator*() const { return *store_; }

   private:
    friend class StorePool;
    Lease(StorePool* pool, std::unique_ptr<store::Store> store)
        : pool_(pool), store_(std::move(store)) {}
    StorePool* pool_ = nullptr;
    std::unique_ptr<store::Store> store_;
  };

  // A store of the pool; an error when a new one cannot be opened. A store whose connection was
  // lost (store::Store::ConnectionLost: PostgreSQL restarted) is never lent: it is closed, and
  // another opened in its place, so that the server goes on after its database comes back.
  Result<Lease> Acquire();

 private:
  StorePool(std::string uri, size_t max_open) : uri_(std::move(uri)), max_open_(max_open) {}
  void Return(std::unique_ptr<store::Store> store);

  const std::string uri_;
  const size_t max_open_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::vector<std::unique_ptr<store::Store>> idle_;
  size_t open_ = 0;
};

// The rows of `devices` (the request's order: it orders rows of one instant) whose metric is in
// `metrics` (all when empty), with start <= timestamp <= end, as the store holds them, in time
// order; in summary mode one row per series and 5-minute bucket, as RowStream. The store is read
// in slices of time sized to hold about `slice_rows` rows, so memory stays bounded whatever the
// window; a slice's rows are ordered by (time, device) and each device's rows of one instant keep
// the store's order.
inline constexpr size_t kStoreSliceRows = 65536;

class StoreRowStream : public MetricsAnswer {
 public:
  // `as_rate`: each value as Kwollect's as_rate gives it (SeriesRates), summaries included.
  StoreRowStream(StorePool::Lease store, std::vector<std::string> devices,
                 std::vector<std::string> metrics, UnixNanos start, UnixNanos end, UnixNanos now,
                 bool summary, size_t slice_rows = kStoreSliceRows, bool as_rate = false);

  // Reads the store until the first rows to write (or the end of the window): called before the
  // answer's status is sent, so that a store that fails (PostgreSQL gone) is a 500 before any row
  // instead of an answer cut after its '['. Returns status().
  Status Begin();
  // Reads the whole window once (only the row limit needs it).
  Result<int64_t> CountRows() override;
  bool Next(std::string* out, size_t target_bytes) override;
  int64_t rows_written() const override { return rows_written_; }
  bool finished() const override { return finished_; }
  Status status() const override { return status_; }
  bool NextRows(RowBatch* batch, const StringInterner** interner, size_t max_rows) override;

 private:
  // Where the reading of the window is.
  struct Cursor {
    UnixNanos t = 0;        // the next slice starts here
    int64_t span = 0;       // and lasts about this long
    bool done = false;      // the whole window was read
    int64_t rows_read = 0;  // rows read from the store so far
  };
  // The rows of one slice, ready to be written in `order`.
  struct Slice {
    std::unique_ptr<StringInterner> interner;
    RowBatch rows;
    std::vector<uint32_t> order;
    size_t next = 0;  // the next index of `order` to write
  };
  // Reads slices from `cursor` until one has rows to write, or the window is read.
  Status Fill(Cursor* cursor, Slice* slice);
  // The rows of [lo, hi) into `slice` (summary mode: the buckets of the rows), in order.
  Status Read(UnixNanos lo, UnixNanos hi, Slice* slice, int64_t* rows_read);

  StorePool::Lease store_;
  std::vector<std::string> devices_;
  std::vector<std::string> metrics_;
  UnixNanos lo_ = 0, hi_ = 0;  // [lo, hi): the window, or the summary's buckets
  bool summary_ = false;
  size_t slice_rows_;
  std::optional<SeriesRates> rates_;  // as_rate
  Cursor cursor_;
  Slice slice_;
  RowTextWriter writer_;  // of slice_'s rows, bound to its interner
  bool started_ = false, finished_ = false;
  int64_t rows_written_ = 0;
  Status status_;
};

}  // namespace kwatt::server::internal

#endif  // KWATT_SRC_SERVER_STORE_ROWS_H_
