#include "src/server/row_stream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <tuple>

#include "kwatt/core/json_text.h"

namespace kwatt::server::internal {
namespace {

constexpr std::string_view kRowStart = "{\"timestamp\":\"";

struct HeapGreater {
  bool operator()(const std::pair<UnixNanos, uint32_t>& a,
                  const std::pair<UnixNanos, uint32_t>& b) const {
    return a > b;
  }
};

}  // namespace

std::pair<UnixNanos, UnixNanos> SummaryBuckets(UnixNanos start, UnixNanos end, UnixNanos now) {
  UnixNanos first = FloorDiv(start + kSummaryBucketNs - 1, kSummaryBucketNs) * kSummaryBucketNs;
  UnixNanos last = FloorDiv(end, kSummaryBucketNs) * kSummaryBucketNs;
  UnixNanos newest =
      FloorDiv(now - kSummaryLagNs, kSummaryBucketNs) * kSummaryBucketNs - kSummaryBucketNs;
  return {first, std::min(last, newest) + kSummaryBucketNs};
}

RowStream::RowStream(std::vector<simulate::OutputSeries> series, UnixNanos start, UnixNanos end,
                     UnixNanos now, bool summary, bool as_rate)
    : series_(std::move(series)), lo_(start), summary_(summary) {
  if (as_rate) rates_.emplace();
  if (summary_) {
    std::tie(bucket_, bucket_end_) = SummaryBuckets(start, end, now);
    hi_ = bucket_end_;
    return;
  }
  hi_ = std::min(end, now) + 1;
  cursors_.resize(series_.size());
  for (size_t i = 0; i < series_.size(); ++i) {
    cursors_[i].segment = 0;
    cursors_[i].k = cursors_[i].k_end = 0;
    if (Advance(i)) heap_.emplace_back(cursors_[i].t, uint32_t(i));
  }
  std::make_heap(heap_.begin(), heap_.end(), HeapGreater());
}

bool RowStream::Advance(size_t index) {
  const simulate::OutputSeries& s = series_[index];
  Cursor& c = cursors_[index];
  if (s.recorded) {  // k indexes the samples; one "segment", entered on the first call
    if (c.segment == 0) {
      c.segment = 1;
      auto [first, last] = s.RecordedIn(lo_, hi_);
      c.k = int64_t(first);
      c.k_end = int64_t(last);
    }
    if (c.k >= c.k_end) return false;
    c.t = (*s.recorded)[size_t(c.k++)].t;
    return true;
  }
  while (true) {
    if (c.k < c.k_end) {
      c.t = s.grid.TimeOf(c.k, s.segments[c.segment - 1].period);
      ++c.k;
      return true;
    }
    // Enter the next segment that overlaps [lo, hi).
    while (c.segment < s.segments.size()) {
      const simulate::Segment& seg = s.segments[c.segment++];
      UnixNanos a = std::max(lo_, seg.begin), b = std::min(hi_, seg.end);
      if (a >= b) continue;
      c.k = s.grid.FirstIndexAtOrAfter(a, seg.period);
      c.k_end = s.grid.FirstIndexAtOrAfter(b, seg.period);
      if (c.k < c.k_end) break;
    }
    if (c.k >= c.k_end) return false;
  }
}

Result<int64_t> RowStream::CountRows() {
  int64_t rows = 0;
  if (!summary_) {
    for (const simulate::OutputSeries& s : series_) rows += s.CountIn(lo_, hi_);
    return rows;
  }
  for (UnixNanos b = bucket_; b < bucket_end_; b += kSummaryBucketNs) {
    for (const simulate::OutputSeries& s : series_) rows += s.CountIn(b, b + kSummaryBucketNs) > 0;
  }
  return rows;
}

void RowStream::WriteRow(std::string* out, const simulate::OutputSeries& series, UnixNanos t,
                         double value) {
  int64_t second = FloorDiv(t, kNanosPerSecond);
  if (second != cached_second_) {
    size_t n = FormatParisTimestamp(second * kNanosPerSecond, cached_text_);
    cached_date_length_ = n - 6;
    std::memcpy(cached_offset_, cached_text_ + cached_date_length_, 6);
    cached_second_ = second;
  }
  if (rows_written_ > 0) out->append(kRowSeparator);
  out->append(kRowStart);
  out->append(cached_text_, cached_date_length_);
  char fraction[10];
  out->append(fraction, FormatFraction(NanosOfSecond(t), fraction));
  out->append(cached_offset_, 6);
  out->append(series.row_middle);
  if (rates_) value = rates_->Next(series.row_middle + series.row_end, t, value);
  char number[kMaxNumberLength];
  out->append(number, FormatJsonNumber(value, number));
  out->append(series.row_end);
  ++rows_written_;
}

bool RowStream::Next(std::string* out, size_t target_bytes) {
  if (finished_) return false;
  if (!started_) {
    out->push_back('[');
    started_ = true;
  }
  size_t limit = out->size() + target_bytes;
  if (summary_) return NextSummary(out, limit);
  while (!heap_.empty() && out->size() < limit) {
    std::pop_heap(heap_.begin(), heap_.end(), HeapGreater());
    auto [t, index] = heap_.back();
    const simulate::OutputSeries& s = series_[index];
    WriteRow(out, s, t,
             s.recorded ? (*s.recorded)[size_t(cursors_[index].k - 1)].value : s.ValueAt(t));
    if (Advance(index)) {
      heap_.back() = {cursors_[index].t, index};
      std::push_heap(heap_.begin(), heap_.end(), HeapGreater());
    } else {
      heap_.pop_back();
    }
  }
  if (heap_.empty()) {
    out->push_back(']');
    finished_ = true;
  }
  return true;
}

bool RowStream::NextRows(RowBatch* batch, const StringInterner** interner, size_t max_rows) {
  batch->Clear();
  *interner = &interner_;
  if (summary_) {
    status_ = Status::InvalidArgument("a summary answer is read as text only");
    return false;
  }
  if (!status_.ok() || finished_) return false;
  if (ids_.empty()) {
    for (const simulate::OutputSeries& s : series_) {
      ids_.push_back({interner_.Intern(s.device_id), interner_.Intern(s.metric_id),
                      interner_.Intern(s.labels_json)});
    }
  }
  max_rows = std::max<size_t>(max_rows, 1);
  while (!heap_.empty() && batch->size() < max_rows) {
    std::pop_heap(heap_.begin(), heap_.end(), HeapGreater());
    auto [t, index] = heap_.back();
    const simulate::OutputSeries& s = series_[index];
    int64_t second = FloorDiv(t, kNanosPerSecond);
    if (second != offset_second_) {
      offset_ = ParisUtcOffsetSeconds(second);
      offset_second_ = second;
    }
    batch->time.push_back(t);
    batch->utc_offset.push_back(offset_);
    batch->device.push_back(ids_[index][0]);
    batch->metric.push_back(ids_[index][1]);
    batch->labels.push_back(ids_[index][2]);
    batch->value.push_back(s.recorded ? (*s.recorded)[size_t(cursors_[index].k - 1)].value
                                      : s.ValueAt(t));
    ++rows_written_;
    if (Advance(index)) {
      heap_.back() = {cursors_[index].t, index};
      std::push_heap(heap_.begin(), heap_.end(), HeapGreater());
    } else {
      heap_.pop_back();
    }
  }
  if (heap_.empty()) finished_ = true;
  return !batch->empty();
}

bool RowStream::NextSummary(std::string* out, size_t limit) {
  while (bucket_ < bucket_end_ && out->size() < limit) {
    UnixNanos b = bucket_, e = bucket_ + kSummaryBucketNs;
    for (const simulate::OutputSeries& s : series_) {
      SummaryAccumulator summary;
      if (s.recorded) {
        auto [first, last] = s.RecordedIn(b, e);
        for (size_t i = first; i < last; ++i) summary.Add((*s.recorded)[i].value);
      }
      for (const simulate::Segment& seg : s.segments) {  // none for a recorded series
        UnixNanos a = std::max(b, seg.begin), z = std::min(e, seg.end);
        if (a >= z) continue;
        int64_t k_end = s.grid.FirstIndexAtOrAfter(z, seg.period);
        for (int64_t k = s.grid.FirstIndexAtOrAfter(a, seg.period); k < k_end; ++k) {
          summary.Add(s.ValueAt(s.grid.TimeOf(k, seg.period)));
        }
      }
      if (summary.count() > 0) WriteRow(out, s, b, summary.Value(s.counter));
    }
    bucket_ = e;
  }
  if (bucket_ >= bucket_end_) {
    out->push_back(']');
    finished_ = true;
  }
  return true;
}

}  // namespace kwatt::server::internal
