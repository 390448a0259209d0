#include "src/server/store_rows.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "kwatt/store/open_store.h"
#include "src/server/pushed.h"

namespace kwatt::server::internal {
namespace {

constexpr int64_t kFirstSpan = 60 * kNanosPerSecond;
constexpr int64_t kMaxSpan = int64_t(1) << 62;

// min(t + span, hi) without overflow, for t < hi.
UnixNanos SliceEnd(UnixNanos t, int64_t span, UnixNanos hi) {
  uint64_t room = uint64_t(hi) - uint64_t(t);
  return room <= uint64_t(span) ? hi : t + span;
}

}  // namespace

Result<std::unique_ptr<StorePool>> StorePool::Open(const std::string& uri, size_t max_open) {
  Result<std::unique_ptr<store::Store>> first = store::OpenStore(uri, /*create=*/true);
  if (!first.ok()) return first.status();
  std::unique_ptr<StorePool> pool(new StorePool(uri, std::max<size_t>(max_open, 1)));
  pool->idle_.push_back(std::move(*first));
  pool->open_ = 1;
  return pool;
}

Result<StorePool::Lease> StorePool::Acquire() {
  std::unique_lock<std::mutex> lock(mutex_);
  returned_.wait(lock, [this] { return !idle_.empty() || open_ < max_open_; });
  if (!idle_.empty()) {
    std::unique_ptr<store::Store> store = std::move(idle_.back());
    idle_.pop_back();
    lock.unlock();
    if (!store->ConnectionLost()) return Lease(this, std::move(store));
    // The server closed it (PostgreSQL restarted): its place goes to a new connection.
  } else {
    ++open_;
    lock.unlock();
  }
  Result<std::unique_ptr<store::Store>> opened = store::OpenStore(uri_, /*create=*/false);
  if (!opened.ok()) {
    lock.lock();
    --open_;
    returned_.notify_one();
    return opened.status();
  }
  return Lease(this, std::move(*opened));
}

void StorePool::Return(std::unique_ptr<store::Store> store) {
  bool lost = store->ConnectionLost();
  if (lost) store.reset();  // never lent again
  std::lock_guard<std::mutex> lock(mutex_);
  if (lost) {
    --open_;
  } else {
    idle_.push_back(std::move(store));
  }
  returned_.notify_one();
}

StorePool::Lease::Lease(Lease&& other) noexcept
    : pool_(std::exchange(other.pool_, nullptr)), store_(std::move(other.store_)) {}

StorePool::Lease& StorePool::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    if (pool_ && store_) pool_->Return(std::move(store_));
    pool_ = std::exchange(other.pool_, nullptr);
    store_ = std::move(other.store_);
  }
  return *this;
}

StorePool::Lease::~Lease() {
  if (pool_ && store_) pool_->Return(std::move(store_));
}

StoreRowStream::StoreRowStream(StorePool::Lease store, std::vector<std::string> devices,
                               std::vector<std::string> metrics, UnixNanos start, UnixNanos end,
                               UnixNanos now, bool summary, size_t slice_rows, bool as_rate)
    : store_(std::move(store)),
      devices_(std::move(devices)),
      metrics_(std::move(metrics)),
      summary_(summary),
      slice_rows_(std::max<size_t>(slice_rows, 1)) {
  if (as_rate) rates_.emplace();
  if (summary_) {
    std::tie(lo_, hi_) = SummaryBuckets(start, end, now);
  } else {
    lo_ = start;
    hi_ = end == std::numeric_limits<UnixNanos>::max() ? end : end + 1;  // end is inclusive
  }
  // No device: no row (an empty list would ask the store for every device).
  cursor_.done = devices_.empty() || lo_ >= hi_;
  cursor_.t = lo_;
  cursor_.span = summary_ ? 12 * kSummaryBucketNs : kFirstSpan;
}

Status StoreRowStream::Read(UnixNanos lo, UnixNanos hi, Slice* slice, int64_t* rows_read) {
  slice->interner = std::make_unique<StringInterner>();
  if (slice == &slice_) writer_.Reset();  // the slice's ids are a new interner's
  slice->rows.Clear();
  slice->order.clear();
  slice->next = 0;
  StringInterner& interner = *slice->interner;
  // The request's order of the devices, by id in the slice's interner.
  std::vector<uint32_t> rank;
  for (size_t i = 0; i < devices_.size(); ++i) {
    uint32_t id = interner.Intern(devices_[i]);
    if (id >= rank.size()) rank.resize(id + 1, uint32_t(i));
  }
  // Summary mode: one accumulator per (series, bucket), series by (device, metric, labels) ids.
  struct Series {
    uint32_t device, metric, labels;
    std::vector<SummaryAccumulator> buckets;
  };
  std::vector<Series> series;
  std::unordered_map<uint64_t, std::vector<size_t>> series_by_hash;
  const size_t buckets = summary_ ? size_t((hi - lo) / kSummaryBucketNs) : 0;

  store::StoreQuery query;
  query.devices = devices_;
  query.metrics = metrics_;
  query.start = lo;
  query.end = hi;
  std::vector<uint32_t> remap;      // the query's interner ids to the slice's
  std::vector<uint32_t> unscraped;  // labels' ids to those of the labels without a scrape time
  auto without_scrape_time = [&](uint32_t id) {
    if (id >= unscraped.size()) unscraped.resize(id + 1, UINT32_MAX);
    if (unscraped[id] == UINT32_MAX) {
      const std::string without = LabelsWithout(interner.Get(id), "_metric_scrape_time");
      unscraped[id] = interner.Intern(without);
    }
    return unscraped[id];
  };
  int64_t read = 0;
  Status status = store_->Query(query, [&](const RowBatch& batch, const StringInterner& from) {
    auto id_of = [&](uint32_t id) {
      if (id >= remap.size()) remap.resize(id + 1, UINT32_MAX);
      if (remap[id] == UINT32_MAX) remap[id] = interner.Intern(from.Get(id));
      return remap[id];
    };
    read += int64_t(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      uint32_t device = id_of(batch.device[i]), metric = id_of(batch.metric[i]),
               labels = id_of(batch.labels[i]);
      // Kwollect's aggregate groups on `labels - '_metric_scrape_time'`, and shows them so.
      if (summary_) labels = without_scrape_time(labels);
      if (!summary_) {
        slice->rows.time.push_back(batch.time[i]);
        slice->rows.utc_offset.push_back(batch.utc_offset[i]);
        slice->rows.device.push_back(device);
        slice->rows.metric.push_back(metric);
        slice->rows.value.push_back(batch.value[i]);
        slice->rows.labels.push_back(labels);
        continue;
      }
      uint64_t hash = (uint64_t(device) * 0x9E3779B97F4A7C15ull) ^
                      (uint64_t(metric) * 0xC2B2AE3D27D4EB4Full) ^ uint64_t(labels);
      std::vector<size_t>& candidates = series_by_hash[hash];
      size_t s = SIZE_MAX;
      for (size_t c : candidates) {
        if (series[c].device == device && series[c].metric == metric &&
            series[c].labels == labels) {
          s = c;
          break;
        }
      }
      if (s == SIZE_MAX) {
        s = series.size();
        candidates.push_back(s);
        series.push_back({device, metric, labels, std::vector<SummaryAccumulator>(buckets)});
      }
      series[s].buckets[size_t((batch.time[i] - lo) / kSummaryBucketNs)].Add(batch.value[i]);
    }
    return Status::OK();
  });
  *rows_read += read;
  if (!status.ok()) return status;
  auto rank_of = [&](uint32_t device) {
    return device < rank.size() ? rank[device] : uint32_t(devices_.size());
  };
  if (!summary_) {
    slice->order.resize(slice->rows.size());
    std::iota(slice->order.begin(), slice->order.end(), 0u);
    const RowBatch& rows = slice->rows;
    std::stable_sort(slice->order.begin(), slice->order.end(), [&](uint32_t a, uint32_t b) {
      if (rows.time[a] != rows.time[b]) return rows.time[a] < rows.time[b];
      return rank_of(rows.device[a]) < rank_of(rows.device[b]);
    });
    return Status::OK();
  }
  // Summary rows: bucket after bucket, series in the request's device order, then as the store
  // orders a device's rows (metric id, then labels text).
  std::vector<size_t> order(series.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Series &x = series[a], &y = series[b];
    if (rank_of(x.device) != rank_of(y.device)) return rank_of(x.device) < rank_of(y.device);
    if (x.metric != y.metric) return interner.Get(x.metric) < interner.Get(y.metric);
    return interner.Get(x.labels) < interner.Get(y.labels);
  });
  for (size_t b = 0; b < buckets; ++b) {
    UnixNanos t = lo + int64_t(b) * kSummaryBucketNs;
    int32_t offset = ParisUtcOffsetSeconds(FloorDiv(t, kNanosPerSecond));
    for (size_t s : order) {
      const SummaryAccumulator& summary = series[s].buckets[b];
      if (summary.count() == 0) continue;
      slice->order.push_back(uint32_t(slice->rows.size()));
      slice->rows.time.push_back(t);
      slice->rows.utc_offset.push_back(offset);
      slice->rows.device.push_back(series[s].device);
      slice->rows.metric.push_back(series[s].metric);
      slice->rows.value.push_back(
          summary.Value(simulate::IsCounterMetric(interner.Get(series[s].metric))));
      slice->rows.labels.push_back(series[s].labels);
    }
  }
  return Status::OK();
}

Status StoreRowStream::Fill(Cursor* cursor, Slice* slice) {
  while (!cursor->done) {
    UnixNanos lo = cursor->t, hi = SliceEnd(cursor->t, cursor->span, hi_);
    int64_t before = cursor->rows_read;
    KWATT_RETURN_IF_ERROR(Read(lo, hi, slice, &cursor->rows_read));
    int64_t read = cursor->rows_read - before;
    cursor->t = hi;
    cursor->done = hi >= hi_;
    // The next slice: sized to hold about slice_rows_ rows at the rate of this one.
    double scale = read == 0 ? 4.0 : double(slice_rows_) / double(read);
    scale = std::clamp(scale, 0.125, 4.0);
    double span = std::min(double(cursor->span) * scale, double(kMaxSpan));
    if (summary_) {
      cursor->span =
          std::max<int64_t>(1, int64_t(span / double(kSummaryBucketNs))) * kSummaryBucketNs;
    } else {
      cursor->span = std::max<int64_t>(kNanosPerMicro, int64_t(span));
    }
    if (!slice->order.empty()) break;
  }
  return Status::OK();
}

Status StoreRowStream::Begin() {
  status_ = Fill(&cursor_, &slice_);
  return status_;
}

Result<int64_t> StoreRowStream::CountRows() {
  Cursor cursor;
  cursor.t = lo_;
  cursor.span = cursor_.span;
  cursor.done = cursor_.done;
  Slice slice;
  int64_t rows = 0;
  while (!cursor.done) {
    KWATT_RETURN_IF_ERROR(Fill(&cursor, &slice));
    rows += int64_t(slice.order.size());
  }
  return rows;
}

bool StoreRowStream::Next(std::string* out, size_t target_bytes) {
  if (finished_ || !status_.ok()) return false;
  if (!started_) {
    out->push_back('[');
    started_ = true;
  }
  size_t limit = out->size() + target_bytes;
  while (out->size() < limit) {
    if (slice_.next < slice_.order.size()) {
      if (rows_written_ > 0) out->append(kRowSeparator);
      const uint32_t i = slice_.order[slice_.next++];
      if (rates_) slice_.rows.value[i] = rates_->NextRow(slice_.rows, i, *slice_.interner);
      writer_.Append(out, slice_.rows, i, *slice_.interner);
      ++rows_written_;
      continue;
    }
    if (cursor_.done) {
      out->push_back(']');
      finished_ = true;
      break;
    }
    status_ = Fill(&cursor_, &slice_);
    if (!status_.ok()) return false;
  }
  return true;
}

bool StoreRowStream::NextRows(RowBatch* batch, const StringInterner** interner, size_t max_rows) {
  batch->Clear();
  if (finished_ || !status_.ok()) return false;
  started_ = true;
  while (slice_.next >= slice_.order.size()) {
    if (cursor_.done) {
      finished_ = true;
      return false;
    }
    status_ = Fill(&cursor_, &slice_);
    if (!status_.ok()) return false;
  }
  *interner = slice_.interner.get();
  max_rows = std::max<size_t>(max_rows, 1);
  const RowBatch& rows = slice_.rows;
  while (slice_.next < slice_.order.size() && batch->size() < max_rows) {
    uint32_t i = slice_.order[slice_.next++];
    batch->time.push_back(rows.time[i]);
    batch->utc_offset.push_back(rows.utc_offset[i]);
    batch->device.push_back(rows.device[i]);
    batch->metric.push_back(rows.metric[i]);
    batch->value.push_back(rows.value[i]);
    batch->labels.push_back(rows.labels[i]);
    ++rows_written_;
  }
  if (slice_.next >= slice_.order.size() && cursor_.done) finished_ = true;
  return true;
}

}  // namespace kwatt::server::internal
