#include "src/server/downsample.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <tuple>

#include "kwatt/core/json_text.h"

namespace kwatt::server::internal {
namespace {

// A double as JSON; null when not finite.
void AppendNumber(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  // Fixed notation (epoch seconds as 1765000000, not 1.765e+09), the shortest that reads back.
  char text[400];
  auto [end, ec] = std::to_chars(text, text + sizeof(text), v, std::chars_format::fixed);
  out->append(text, size_t(end - text));
}

void AppendString(std::string* out, std::string_view text) { AppendJsonString(out, text); }

}  // namespace

int64_t BucketStepFor(UnixNanos start, UnixNanos end, size_t width) {
  width = std::max<size_t>(width, 1);
  int64_t span = std::max<int64_t>(end - start + 1, 1);
  return std::max<int64_t>(1, (span + int64_t(width) - 1) / int64_t(width));
}

Downsampler::Downsampler(const Options& options) : options_(options) {
  options_.step = std::max<int64_t>(options_.step, 1);
  options_.buckets = std::clamp<size_t>(options_.buckets, 1, kMaxBuckets);
}

Downsampler::Series& Downsampler::SeriesOf(uint32_t device, uint32_t metric, uint32_t labels,
                                           const StringInterner& interner) {
  bool small = device < (1u << 21) && metric < (1u << 21) && labels < (1u << 21);
  uint64_t key = uint64_t(device) | uint64_t(metric) << 21 | uint64_t(labels) << 42;
  if (small) {
    auto hit = cache_.find(key);
    if (hit != cache_.end()) return series_[hit->second];
  }
  std::string name;
  name.append(interner.Get(device)).push_back('\0');
  name.append(interner.Get(metric)).push_back('\0');
  name.append(interner.Get(labels));
  auto [it, added] = by_key_.try_emplace(std::move(name), series_.size());
  if (added) {
    Series s;
    s.device = interner.Get(device);
    s.metric = interner.Get(metric);
    s.labels = interner.Get(labels);
    s.buckets.resize(options_.buckets);
    series_.push_back(std::move(s));
  }
  if (small) cache_.emplace(key, it->second);
  return series_[it->second];
}

void Downsampler::Add(const RowBatch& batch, const StringInterner& interner) {
  if (interner.serial() != interner_) {
    cache_.clear();
    interner_ = interner.serial();
  }
  const UnixNanos start = options_.start;
  const int64_t step = options_.step;
  const int64_t buckets = int64_t(options_.buckets);
  // The previous row's series: rows of one instant often come from few series.
  uint32_t last_device = UINT32_MAX, last_metric = 0, last_labels = 0;
  Series* series = nullptr;
  bool rate = false;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (batch.device[i] != last_device || batch.metric[i] != last_metric ||
        batch.labels[i] != last_labels || !series) {
      last_device = batch.device[i];
      last_metric = batch.metric[i];
      last_labels = batch.labels[i];
      series = &SeriesOf(last_device, last_metric, last_labels, interner);
      rate = options_.counter_rates && series->metric.ends_with("_total");
    }
    UnixNanos t = batch.time[i];
    double v = batch.value[i];
    if (rate && !std::isnan(v)) {
      bool had = series->has_previous;
      double dv = v - series->previous_v;
      int64_t dt = t - series->previous_t;
      series->has_previous = true;
      series->previous_t = t;
      series->previous_v = v;
      if (!had || dt <= 0 || dv < 0) continue;
      v = dv / (double(dt) / double(kNanosPerSecond));
    }
    if (t < start) continue;
    int64_t b = (t - start) / step;
    if (b >= buckets) continue;
    ++series->rows;
    ++rows_;
    if (std::isnan(v)) {
      ++series->nans;
      continue;
    }
    Bucket& bucket = series->buckets[size_t(b)];
    if (bucket.count == 0) {
      bucket.min = bucket.max = v;
    } else {
      bucket.min = std::min(bucket.min, v);
      bucket.max = std::max(bucket.max, v);
    }
    bucket.sum += v;
    ++bucket.count;
  }
}

std::vector<const Downsampler::Series*> Downsampler::SortedSeries() const {
  std::vector<const Series*> out;
  for (const Series& s : series_) out.push_back(&s);
  std::sort(out.begin(), out.end(), [](const Series* a, const Series* b) {
    return std::tie(a->device, a->metric, a->labels) < std::tie(b->device, b->metric, b->labels);
  });
  return out;
}

std::string Downsampler::Json() const {
  std::string out;
  const double second = double(kNanosPerSecond);
  out.append("{\"start\":");
  AppendNumber(&out, double(options_.start) / second);
  out.append(",\"step\":");
  AppendNumber(&out, double(options_.step) / second);
  out.append(",\"buckets\":").append(std::to_string(options_.buckets));
  out.append(",\"rows\":").append(std::to_string(rows_));
  out.append(",\"time\":[");
  for (size_t b = 0; b < options_.buckets; ++b) {
    if (b > 0) out.push_back(',');
    AppendNumber(&out, double(options_.start + int64_t(b) * options_.step) / second);
  }
  out.append("],\"series\":[");
  bool first = true;
  for (const Series* s : SortedSeries()) {
    if (!first) out.push_back(',');
    first = false;
    out.append("{\"device\":");
    AppendString(&out, s->device);
    out.append(",\"metric\":");
    AppendString(&out, s->metric);
    out.append(",\"labels\":").append(s->labels.empty() ? "{}" : s->labels);
    out.append(",\"rows\":").append(std::to_string(s->rows));
    out.append(",\"nans\":").append(std::to_string(s->nans));
    for (int field = 0; field < 4; ++field) {
      static const char* const kNames[] = {",\"min\":[", ",\"max\":[", ",\"mean\":[",
                                           ",\"count\":["};
      out.append(kNames[field]);
      for (size_t b = 0; b < s->buckets.size(); ++b) {
        if (b > 0) out.push_back(',');
        const Bucket& bucket = s->buckets[b];
        if (field == 3) {
          out.append(std::to_string(bucket.count));
        } else if (bucket.count == 0) {
          out.append("null");
        } else {
          AppendNumber(&out, field == 0 ? bucket.min : field == 1 ? bucket.max : bucket.mean());
        }
      }
      out.push_back(']');
    }
    out.push_back('}');
  }
  out.append("]}");
  return out;
}

}  // namespace kwatt::server::internal
