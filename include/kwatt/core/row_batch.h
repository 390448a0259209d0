// Columnar batches of Kwollect rows, and the string interner they share.
//
// A row is (time, UTC offset, device, metric, value, labels), plus the exact text the API sent,
// so that the row can be written back byte for byte (JSON Lines output, archives). Strings are
// interned: each distinct device id, metric id and labels text is stored once and referred to by
// a 32-bit id.
//
// Thread safety: neither class is synchronised; a batch and its interner belong to one thread at a
// time.
#ifndef KWATT_CORE_ROW_BATCH_H_
#define KWATT_CORE_ROW_BATCH_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kwatt/core/time.h"

namespace kwatt {

// Maps strings to dense ids 0, 1, 2... in order of first appearance. Ids and the views returned by
// Get() stay valid for the interner's life.
class StringInterner {
 public:
  StringInterner() : serial_(NextSerial()) {}
  // Moved, the ids go with the strings (and the serial); the emptied one is a new interner.
  StringInterner(StringInterner&& other) noexcept;
  StringInterner& operator=(StringInterner&& other) noexcept;
  StringInterner(const StringInterner&) = delete;  // views into its own storage
  StringInterner& operator=(const StringInterner&) = delete;

  uint32_t Intern(std::string_view text);
  std::string_view Get(uint32_t id) const { return *strings_[id]; }
  size_t size() const { return strings_.size(); }
  // Unique to this interner in the process, never reused: what a cache of what its ids mean is
  // keyed on. Its address is not enough: readers made one after the other (another archive's,
  // another file's) often get the freed one's, with other ids.
  uint64_t serial() const { return serial_; }

 private:
  static uint64_t NextSerial();
  void Clear();

  uint64_t serial_;
  std::deque<std::string> storage_;          // stable addresses
  std::vector<const std::string*> strings_;  // id -> text
  std::unordered_map<std::string_view, uint32_t> ids_;
};

struct RowBatch {
  std::vector<UnixNanos> time;      // instant, UTC
  std::vector<int32_t> utc_offset;  // seconds, as written in the timestamp (+7200, +3600)
  std::vector<uint32_t> device;     // interned device_id
  std::vector<uint32_t> metric;     // interned metric_id
  std::vector<double> value;        // NaN for "NaN" and null values
  std::vector<uint32_t> labels;     // interned labels object text, as sent ("{}" when none)
  std::string raw;                  // every row's text, concatenated
  std::vector<uint32_t> raw_end;    // row i's text is raw[raw_end[i-1] (or 0), raw_end[i])

  size_t size() const { return time.size(); }
  bool empty() const { return time.empty(); }
  std::string_view RawRow(size_t i) const {
    size_t begin = i == 0 ? 0 : raw_end[i - 1];
    return std::string_view(raw).substr(begin, raw_end[i] - begin);
  }
  void Clear();
  // Appends row `i` of `other` (which uses the same interner).
  void AppendRow(const RowBatch& other, size_t i);
};

// Appends row `i`'s JSON text: the text the API sent when the batch has it (`raw`), else the row
// as Kwollect renders it from its fields: {"timestamp":"2025-04-18T14:00:00.02+02:00",
// "device_id":"nova-1","metric_id":"wattmetre_power_watt","value":98.5,"labels":{}} (timestamp in
// the row's UTC offset, value as PostgreSQL writes a float8, labels as kept).
void AppendRowText(std::string* out, const RowBatch& batch, size_t i,
                   const StringInterner& interner);

// Appends rows' text as AppendRowText does, byte for byte, faster where rows share seconds and
// ids (a store's answer: 3.6 M rows of 20 wattmeters): it keeps the text of the last second's
// timestamp and the JSON string of each id it wrote. Bound to one interner: Reset() before rows
// whose ids refer to another one. Not thread-safe.
class RowTextWriter {
 public:
  void Append(std::string* out, const RowBatch& batch, size_t i, const StringInterner& interner);
  void Reset();

 private:
  const std::string& Quoted(uint32_t id, const StringInterner& interner);

  int64_t second_ = 0;
  int32_t offset_ = 0;
  bool have_second_ = false;
  char second_text_[kMaxTimestampLength];
  size_t date_length_ = 0;           // of second_text_ without its "+HH:MM"
  std::vector<std::string> quoted_;  // by id: `"text"` as JSON ("" until written once)
};

}  // namespace kwatt

#endif  // KWATT_CORE_ROW_BATCH_H_
