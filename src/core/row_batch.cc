#include "kwatt/core/row_batch.h"

#include <atomic>
#include <limits>
#include <utility>

#include "kwatt/core/json_text.h"

namespace kwatt {

uint64_t StringInterner::NextSerial() {
  static std::atomic<uint64_t> next{1};  // 0: no interner
  return next.fetch_add(1, std::memory_order_relaxed);
}

StringInterner::StringInterner(StringInterner&& other) noexcept
    : serial_(std::exchange(other.serial_, NextSerial())),
      storage_(std::move(other.storage_)),
      strings_(std::move(other.strings_)),
      ids_(std::move(other.ids_)) {
  other.Clear();
}

StringInterner& StringInterner::operator=(StringInterner&& other) noexcept {
  if (this != &other) {
    serial_ = std::exchange(other.serial_, NextSerial());
    storage_ = std::move(other.storage_);
    strings_ = std::move(other.strings_);
    ids_ = std::move(other.ids_);
    other.Clear();
  }
  return *this;
}

void StringInterner::Clear() {  // what a moved-from container holds is unspecified
  storage_.clear();
  strings_.clear();
  ids_.clear();
}

uint32_t StringInterner::Intern(std::string_view text) {
  auto it = ids_.find(text);
  if (it != ids_.end()) return it->second;
  const std::string& stored = storage_.emplace_back(text);
  uint32_t id = uint32_t(strings_.size());
  strings_.push_back(&stored);
  ids_.emplace(std::string_view(stored), id);
  return id;
}

void RowBatch::Clear() {
  time.clear();
  utc_offset.clear();
  device.clear();
  metric.clear();
  value.clear();
  labels.clear();
  raw.clear();
  raw_end.clear();
}

void RowBatch::AppendRow(const RowBatch& other, size_t i) {
  time.push_back(other.time[i]);
  utc_offset.push_back(other.utc_offset[i]);
  device.push_back(other.device[i]);
  metric.push_back(other.metric[i]);
  value.push_back(other.value[i]);
  labels.push_back(other.labels[i]);
  raw.append(other.RawRow(i));
  raw_end.push_back(uint32_t(raw.size()));
}

void AppendRowText(std::string* out, const RowBatch& batch, size_t i,
                   const StringInterner& interner) {
  if (batch.raw_end.size() == batch.size()) {
    out->append(batch.RawRow(i));
    return;
  }
  char text[kMaxTimestampLength > kMaxNumberLength ? kMaxTimestampLength : kMaxNumberLength];
  out->append("{\"timestamp\":\"");
  out->append(text, FormatTimestamp(batch.time[i], batch.utc_offset[i], text));
  out->append("\",\"device_id\":");
  AppendJsonString(out, interner.Get(batch.device[i]));
  out->append(",\"metric_id\":");
  AppendJsonString(out, interner.Get(batch.metric[i]));
  out->append(",\"value\":");
  out->append(text, FormatJsonNumber(batch.value[i], text));
  out->append(",\"labels\":");
  out->append(interner.Get(batch.labels[i]));
  out->push_back('}');
}

void RowTextWriter::Reset() {
  have_second_ = false;
  quoted_.clear();
}

const std::string& RowTextWriter::Quoted(uint32_t id, const StringInterner& interner) {
  if (id >= quoted_.size()) quoted_.resize(size_t(id) + 1);
  std::string& quoted = quoted_[id];
  if (quoted.empty()) AppendJsonString(&quoted, interner.Get(id));  // never empty: at least ""
  return quoted;
}

void RowTextWriter::Append(std::string* out, const RowBatch& batch, size_t i,
                           const StringInterner& interner) {
  if (batch.raw_end.size() == batch.size()) {
    out->append(batch.RawRow(i));
    return;
  }
  int64_t second = FloorDiv(batch.time[i], kNanosPerSecond);
  if (second < std::numeric_limits<int64_t>::min() / kNanosPerSecond) {
    AppendRowText(out, batch, i, interner);  // its whole second is before int64's nanoseconds
    return;
  }
  if (!have_second_ || second != second_ || batch.utc_offset[i] != offset_) {
    // The whole second's text, then its fraction goes between the date and the "+HH:MM".
    date_length_ = FormatTimestamp(second * kNanosPerSecond, batch.utc_offset[i], second_text_) - 6;
    second_ = second;
    offset_ = batch.utc_offset[i];
    have_second_ = true;
  }
  char text[kMaxNumberLength > 10 ? kMaxNumberLength : 10];
  out->append("{\"timestamp\":\"");
  out->append(second_text_, date_length_);
  out->append(text, FormatFraction(NanosOfSecond(batch.time[i]), text));
  out->append(second_text_ + date_length_, 6);
  out->append("\",\"device_id\":");
  out->append(Quoted(batch.device[i], interner));
  out->append(",\"metric_id\":");
  out->append(Quoted(batch.metric[i], interner));
  out->append(",\"value\":");
  out->append(text, FormatJsonNumber(batch.value[i], text));
  out->append(",\"labels\":");
  out->append(interner.Get(batch.labels[i]));
  out->push_back('}');
}

}  // namespace kwatt
