// Incremental parser of Kwollect metrics response bodies into RowBatch columns, in core: the
// Kwollect client parses API answers with it, the archive its data files and the server pushed
// rows, so that none of them needs another's code.
//
// A body is one JSON array of row objects (doc/kwollect_api.md section 3):
//   [{"timestamp":"2025-04-18T18:55:33.754307+02:00","device_id":"ecotype-7",
//     "metric_id":"bmc_node_power_watt","value":98,"labels":{}}, ...]
// or, with Framing::kJsonLines (the data files of an archive, doc/archive_format.md), one row per
// line, each followed by '\n' (the last one's '\n' may be missing): no brackets, no commas, no
// blank line, nothing before a row's '{' or between its '}' and the '\n', and no '\n' inside a row
// (between its tokens either). The rows themselves are read exactly as in a JSON array.
// It arrives in pieces of any size; the parser takes them as they come and keeps in memory only
// the row in progress, so its memory is bounded by the longest row (plus fixed caches of about
// 10 KiB), never by the body. Rows that lie whole in one piece are read in place, without a copy
// other than the one into RowBatch::raw.
//
// Rows are validated as strict JSON (RFC 8259: grammar, escapes, UTF-8 in strings) and then as
// Kwollect rows:
//   timestamp  string, ISO 8601 with a UTC offset     -> time (UTC ns), utc_offset (seconds)
//   device_id  string                                 -> device (interned, unescaped)
//   metric_id  string                                 -> metric (interned, unescaped)
//   value      number, "NaN", "Infinity", "-Infinity" -> value (null and "NaN" give NaN)
//              or null
//   labels     object, as sent; absent or null: "{}"  -> labels (interned exact text)
// Keys may come in any order; other keys are accepted and ignored (they stay in the raw text).
// A known key given twice is Corruption. Each row's exact text, from its '{' to its matching '}',
// is appended to RowBatch::raw.
//
// Error messages name the byte offset in the body (counting from 0), the row index (counting from
// 0), what was expected, and a short excerpt: "...near `<before>` ^ `<at the error>`". In JSON
// Lines they name the line (counting from 1) instead of the row: "JSON Lines, line 3, byte 412:".
//
// Thread safety: none; a parser, its interner and its batches belong to one thread at a time.
#ifndef KWATT_CORE_ROW_PARSER_H_
#define KWATT_CORE_ROW_PARSER_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/time.h"

namespace kwatt::internal {

// Longest row text accepted (real rows are under 1 KiB); a longer one is Corruption, so that a
// damaged body cannot make the parser buffer without bound.
inline constexpr size_t kMaxRowBytes = 16 << 20;
// Deepest nesting of arrays and objects accepted, the row object itself being level 1.
inline constexpr int kMaxNestingDepth = 64;

// How rows are put together in the text.
enum class Framing : uint8_t {
  kJsonArray,  // '[' row ',' row ... ']', whitespace between: a metrics API body
  kJsonLines,  // row '\n' row '\n' ...: an archive data file
};

class RowStreamParser {
 public:
  // `interner` is not owned and must outlive the parser; device ids, metric ids and labels texts
  // are interned into it (only those of rows that are valid).
  explicit RowStreamParser(StringInterner* interner, Framing framing = Framing::kJsonArray);

  RowStreamParser(const RowStreamParser&) = delete;
  RowStreamParser& operator=(const RowStreamParser&) = delete;

  // Feeds the next bytes of the body. They may be split anywhere: mid-row, mid-string, mid-escape,
  // one byte at a time. Every row completed by these bytes is appended to `batch` (all columns,
  // and its exact text in raw/raw_end); a row is appended whole or not at all. `batch` may differ
  // from call to call, but its rows must refer to this parser's interner.
  // Returns Corruption on malformed input, naming the byte offset in the body, what was expected
  // and an excerpt; rows completed before the bad byte are in `batch`. After an error the parser
  // stays failed: every later Feed or Finish returns the same error.
  // REQUIRES: batch->raw stays under 4 GiB (raw_end is 32-bit); the caller drains batches.
  // Violating it returns InvalidArgument (and the parser stays failed).
  Status Feed(std::string_view bytes, RowBatch* batch);

  // The body ended. OK only if a whole JSON array was read ('[' ... ']', whitespace after it
  // allowed). Otherwise Corruption: "body ended after N rows, in the middle of a row" or "...,
  // before the closing ]" (or "... before the opening [" for an empty body), so that a cut body is
  // never taken as a complete answer. The parser then stays failed. Calling it again returns the
  // same result.
  // In JSON Lines: OK unless the text ends inside a row (an empty text is zero rows; the last
  // row's '\n' may be missing: a caller that requires it checks the last byte itself).
  Status Finish();

  // Rows appended so far.
  int64_t rows() const { return rows_; }
  // Bytes fed so far (every byte given to Feed until the parser failed, the failing call's
  // included).
  int64_t bytes() const { return bytes_; }

 private:
  enum class State : uint8_t {
    kBeforeArray,  // expecting '['
    kBeforeFirst,  // after '[': expecting '{' or ']'
    kBeforeRow,    // after ',': expecting '{'
    kInRow,        // inside a row, framing it
    kAfterRow,     // expecting ',' or ']'
    kDone,         // after ']': only whitespace
    kLineStart,    // JSON Lines: at the start of a line, expecting '{'
    kLineEnd,      // JSON Lines: after a row, expecting '\n'
  };

  // Frames the row in progress over data[*pos, size). Returns true once its closing '}' is read
  // (*pos just after it), false if the data ends first (*pos == size); sets status_ on error.
  bool FrameRow(std::string_view data, size_t* pos, int64_t data_offset);
  // Parses the row object at the start of `text` (at body offset `offset`; text may go on after
  // the row), appends it to `batch` and sets *length to its length. Returns false if the row is
  // bad or cut by the end of `text`, having set status_ if `report_errors`.
  bool ParseRow(std::string_view text, int64_t offset, bool report_errors, RowBatch* batch,
                size_t* length);
  // ParseIsoTimestamp, with a shortcut for the texts that share the cached minute.
  Result<ParsedTime> ParseTimestamp(std::string_view text);
  void CacheMinuteOf(std::string_view text);
  // interner_->Intern(text), through intern_cache_.
  uint32_t Intern(std::string_view text);
  // Records a Corruption at body offset `data_offset + pos` with an excerpt of `data` around pos.
  void Fail(std::string_view data, size_t pos, int64_t data_offset, std::string_view what);

  StringInterner* interner_;
  const bool json_lines_;
  State state_;
  Status status_;  // the error once failed
  int64_t rows_ = 0;
  int64_t bytes_ = 0;
  int64_t lines_ = 0;  // JSON Lines: '\n' read after rows

  // Framing state of the row in progress, carried across Feed calls. In JSON Lines, a '\n' ends
  // the framing (the row is then bad: ParseRow reports why).
  int depth_ = 0;            // open arrays and objects, the row itself included
  uint64_t array_bits_ = 0;  // bit d set when level d+1 is an array, clear when an object
  bool in_string_ = false;
  bool in_escape_ = false;  // just after a '\' inside a string
  int64_t row_offset_ = 0;  // body offset of the row's '{'
  std::string partial_;     // the row's bytes so far, when it spans Feed calls

  // Rows come in time order, so most share with the previous row their timestamp text up to the
  // minute and its offset: for those, the instant of the minute is reused and only the seconds and
  // fraction are read (exactly what ParseIsoTimestamp would give; see ParseTimestamp).
  struct MinuteCache {
    bool valid = false;
    char prefix[17];  // "YYYY-MM-DDTHH:MM:", hour not 24
    char suffix[8];   // the offset text, "+02:00"
    size_t suffix_length = 0;
    int offset_seconds = 0;
    UnixNanos minute_utc = 0;  // the instant of prefix + "00" + suffix
  };
  MinuteCache minute_;

  // The last text interned in each slot (a view of the interner's copy) and its id: the few
  // devices, metrics and labels of a body repeat on every row, and a hit here skips the
  // interner's hash table.
  struct InternCacheEntry {
    const char* data = nullptr;
    uint32_t size = 0;
    uint32_t id = 0;
  };
  static constexpr size_t kInternCacheSlots = 512;  // a power of two
  std::array<InternCacheEntry, kInternCacheSlots> intern_cache_{};

  // Reused by ParseRow: unescaped texts of the strings that contain escapes, one per known key
  // (timestamp, device_id, metric_id, value, labels), then one for the key being read.
  std::string scratch_[6];
};

}  // namespace kwatt::internal

#endif  // KWATT_CORE_ROW_PARSER_H_
