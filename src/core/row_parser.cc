#include "kwatt/core/row_parser.h"

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstring>
#include <limits>

#include "kwatt/core/null_value.h"
#include "kwatt/core/time.h"

// How rows are read, and why no JSON library.
//
// A row that lies whole in the bytes of one Feed call (nearly all of them, the pieces being
// kilobytes) is read in place by RowReader, a small strict recursive-descent reader that checks
// the whole RFC 8259 grammar, the escapes and UTF-8, finds the row's end, and extracts the columns
// in the same pass (std::from_chars converts the numbers). A row cut by the end of the piece (or a
// bad one) is instead framed by FrameRow, a byte state machine (strings, escapes, bracket nesting)
// resumable at any byte, buffered in partial_ until its matching '}', then read by RowReader; bad
// rows report their error from there.
//
// simdjson's On-Demand API (3.0.1) was the planned reader, and was not used because:
//   - it validates only what is read: a skipped value (an unknown key, the labels object whose
//     text we keep) is only checked for structure, so `"labels":{"a":tru}` would pass unless we
//     walked every labels value ourselves, which is most of RowReader's work anyway;
//   - 3.0.1 has no raw_json() for a value, so the labels text needs our own framing anyway;
//   - it needs each row copied into a padded buffer and a set-up per document, which dominate for
//     150-byte rows; RowReader reads rows where they are and allocates nothing per row.
// Rows come in Kwollect's key order, so RowReader first tries the expected `"key":` with one
// memcmp, and falls back to reading any key. Two caches spare the work that repeats from row to
// row: the instant of the timestamp's minute (ParseTimestamp) and recently interned strings
// (Intern). Measured on a 2-core AMD EPYC VM: about 6 million 150-byte rows per second.

namespace kwatt::internal {
namespace {

constexpr std::string_view kKeyNames[] = {"timestamp", "device_id", "metric_id", "value", "labels"};
enum Key { kTimestamp = 0, kDeviceId, kMetricId, kValue, kLabels, kKeyCount, kUnknownKey };
constexpr std::string_view kQuotedKeys[] = {
    "\"timestamp\":", "\"device_id\":", "\"metric_id\":", "\"value\":", "\"labels\":"};
// RowStreamParser::scratch_ holds one unescaped text per key, then the unescaped key itself.
constexpr int kKeyScratch = kKeyCount;

bool IsWhitespace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Bytes that end the fast scan inside a string: '"', '\\', control characters, non-ASCII.
struct StringStopTable {
  bool stop[256];
  constexpr StringStopTable() : stop() {
    for (int c = 0; c < 256; ++c) stop[c] = c < 0x20 || c >= 0x80 || c == '"' || c == '\\';
  }
};
constexpr StringStopTable kStringStop;

// Bytes that end the framer's fast scan inside a string: '"' and '\\' only (the reader checks the
// rest once the row is complete).
struct FrameStopTable {
  bool stop[256];
  constexpr FrameStopTable() : stop() {
    stop[uint8_t('"')] = true;
    stop[uint8_t('\\')] = true;
  }
};
constexpr FrameStopTable kFrameStop;

// The same for JSON Lines, where a '\n' ends the framing even inside a string.
struct LineFrameStopTable {
  bool stop[256];
  constexpr LineFrameStopTable() : stop() {
    stop[uint8_t('"')] = true;
    stop[uint8_t('\\')] = true;
    stop[uint8_t('\n')] = true;
  }
};
constexpr LineFrameStopTable kLineFrameStop;

void AppendPrintable(std::string* out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    auto u = uint8_t(c);
    if (c == '\n') {
      *out += "\\n";
    } else if (c == '\t') {
      *out += "\\t";
    } else if (c == '\r') {
      *out += "\\r";
    } else if (u < 0x20 || u >= 0x7f) {
      *out += "\\x";
      *out += kHex[u >> 4];
      *out += kHex[u & 15];
    } else {
      *out += c;
    }
  }
}

// "'x'", or "'\x0a'" for a byte that is not printable ASCII.
std::string DescribeByte(char c) {
  std::string out = "'";
  AppendPrintable(&out, std::string_view(&c, 1));
  out += "'";
  return out;
}

// Length of the valid UTF-8 sequence at p (first byte >= 0x80), or 0 if invalid (overlong,
// surrogate, above U+10FFFF, truncated).
size_t Utf8SequenceLength(const char* p, const char* end) {
  auto b0 = uint8_t(p[0]);
  auto continuation = [&](size_t i) { return p + i < end && (uint8_t(p[i]) & 0xc0) == 0x80; };
  if (b0 >= 0xc2 && b0 <= 0xdf) return continuation(1) ? 2 : 0;
  if (b0 >= 0xe0 && b0 <= 0xef) {
    if (!continuation(1) || !continuation(2)) return 0;
    auto b1 = uint8_t(p[1]);
    if (b0 == 0xe0 && b1 < 0xa0) return 0;   // overlong
    if (b0 == 0xed && b1 >= 0xa0) return 0;  // surrogate
    return 3;
  }
  if (b0 >= 0xf0 && b0 <= 0xf4) {
    if (!continuation(1) || !continuation(2) || !continuation(3)) return 0;
    auto b1 = uint8_t(p[1]);
    if (b0 == 0xf0 && b1 < 0x90) return 0;   // overlong
    if (b0 == 0xf4 && b1 >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads the four hex digits after "\u" at p (bounds already checked by the caller).
int ReadHex4(const char* p) {
  int value = 0;
  for (int i = 0; i < 4; ++i) {
    int digit = HexValue(p[i]);
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

void AppendUtf8(std::string* out, uint32_t code_point) {
  if (code_point < 0x80) {
    *out += char(code_point);
  } else if (code_point < 0x800) {
    *out += char(0xc0 | (code_point >> 6));
    *out += char(0x80 | (code_point & 0x3f));
  } else if (code_point < 0x10000) {
    *out += char(0xe0 | (code_point >> 12));
    *out += char(0x80 | ((code_point >> 6) & 0x3f));
    *out += char(0x80 | (code_point & 0x3f));
  } else {
    *out += char(0xf0 | (code_point >> 18));
    *out += char(0x80 | ((code_point >> 12) & 0x3f));
    *out += char(0x80 | ((code_point >> 6) & 0x3f));
    *out += char(0x80 | (code_point & 0x3f));
  }
}

// Decodes the content of a string already validated by RowReader::ReadString.
void Unescape(std::string_view content, std::string* out) {
  out->clear();
  const char* p = content.data();
  const char* end = p + content.size();
  while (p < end) {
    const char* backslash = static_cast<const char*>(std::memchr(p, '\\', size_t(end - p)));
    if (backslash == nullptr) backslash = end;
    out->append(p, backslash);
    p = backslash;
    if (p == end) break;
    char e = p[1];
    p += 2;
    switch (e) {
      case 'b':
        *out += '\b';
        break;
      case 'f':
        *out += '\f';
        break;
      case 'n':
        *out += '\n';
        break;
      case 'r':
        *out += '\r';
        break;
      case 't':
        *out += '\t';
        break;
      case 'u': {
        uint32_t code_point = uint32_t(ReadHex4(p));
        p += 4;
        if (code_point >= 0xd800 && code_point <= 0xdbff) {  // a pair, checked by ReadString
          uint32_t low = uint32_t(ReadHex4(p + 2));
          p += 6;
          code_point = 0x10000 + ((code_point - 0xd800) << 10) + (low - 0xdc00);
        }
        AppendUtf8(out, code_point);
        break;
      }
      default:
        *out += e;
        break;  // '"', '\\', '/'
    }
  }
}

// Whether a valid JSON number that is not zero is below 1 in magnitude (from its digits and
// exponent; the exponent saturates, so that any length of digits is handled).
bool IsBelowOne(std::string_view number) {
  size_t i = number[0] == '-' ? 1 : 0;
  size_t e = number.find_first_of("eE");
  int64_t exponent = 0;
  if (e != std::string_view::npos) {
    size_t j = e + 1;
    bool negative = number[j] == '-';
    if (number[j] == '-' || number[j] == '+') ++j;
    for (; j < number.size(); ++j) {
      exponent = std::min<int64_t>(exponent * 10 + (number[j] - '0'), 1 << 30);
    }
    if (negative) exponent = -exponent;
  } else {
    e = number.size();
  }
  std::string_view mantissa = number.substr(i, e - i);
  size_t dot = mantissa.find('.');
  std::string_view integer = mantissa.substr(0, dot);
  if (integer != "0") return int64_t(integer.size()) - 1 + exponent < 0;
  std::string_view fraction = dot == std::string_view::npos ? "" : mantissa.substr(dot + 1);
  size_t zeros = fraction.find_first_not_of('0');  // not npos: the number is not zero
  return -int64_t(zeros) - 1 + exponent < 0;
}

// A strict JSON reader over a row's text (or a piece of body that starts with a row). Every
// Read/Skip returns false on error, with error() and error_position() set.
class RowReader {
 public:
  // `newline_is_whitespace` false (JSON Lines): a '\n' between tokens is an error, as in strings.
  RowReader(std::string_view text, bool newline_is_whitespace)
      : begin_(text.data()),
        p_(text.data()),
        end_(text.data() + text.size()),
        newline_is_whitespace_(newline_is_whitespace) {}

  const std::string& error() const { return error_; }
  size_t error_position() const { return error_position_; }
  size_t position() const { return size_t(p_ - begin_); }
  bool at_end() const { return p_ == end_; }
  char peek() const { return p_ < end_ ? *p_ : '\0'; }

  void SkipWhitespace() {
    // Rows are mostly written without whitespace: one comparison settles the usual case.
    while (p_ < end_ && uint8_t(*p_) <= ' ' && IsWhitespace(*p_) &&
           (*p_ != '\n' || newline_is_whitespace_)) {
      ++p_;
    }
  }

  // Consumes `text` if the input continues with it.
  bool ConsumeText(std::string_view text) {
    if (size_t(end_ - p_) < text.size() || std::memcmp(p_, text.data(), text.size()) != 0) {
      return false;
    }
    p_ += text.size();
    return true;
  }

  bool Consume(char c) {
    if (p_ < end_ && *p_ == c) {
      ++p_;
      return true;
    }
    return false;
  }

  // Records an error at the current position. Always returns false.
  bool Fail(std::string_view what) { return FailAt(p_, what); }
  bool FailAt(const char* at, std::string_view what) {
    error_.assign(what);
    if (at < end_) {
      error_ += ", got ";
      error_ += DescribeByte(*at);
    } else {
      error_ += ", got the end of the row";
    }
    error_position_ = size_t(at - begin_);
    return false;
  }
  bool FailAtWithMessage(const char* at, std::string message) {
    error_ = std::move(message);
    error_position_ = size_t(at - begin_);
    return false;
  }

  // A string at p_ (which must be '"'): validates it and sets *content to the text between the
  // quotes, still escaped, and *escaped to whether it has any backslash.
  bool ReadString(std::string_view* content, bool* escaped) {
    if (!Consume('"')) return Fail("expected a string '\"'");
    const char* start = p_;
    bool has_escape = false;
    while (true) {
      SkipPlainStringBytes();
      if (p_ == end_) return FailAt(p_, "unterminated string");
      char c = *p_;
      if (c == '"') break;
      if (c == '\\') {
        has_escape = true;
        if (!ReadEscape()) return false;
      } else if (uint8_t(c) < 0x20) {
        return FailAt(p_, "control character in a string (it must be escaped)");
      } else {
        size_t length = Utf8SequenceLength(p_, end_);
        if (length == 0) return FailAt(p_, "invalid UTF-8 in a string");
        p_ += length;
      }
    }
    *content = std::string_view(start, size_t(p_ - start));
    *escaped = has_escape;
    ++p_;  // closing quote
    return true;
  }

  // A number at p_: checks the JSON grammar and sets *text to it.
  bool ScanNumber(std::string_view* text) {
    const char* start = p_;
    Consume('-');
    if (p_ < end_ && *p_ == '0') {
      ++p_;
    } else if (p_ < end_ && *p_ >= '1' && *p_ <= '9') {
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    } else {
      return Fail("expected a digit in a number");
    }
    if (Consume('.')) {
      if (p_ == end_ || !IsDigit(*p_)) return Fail("expected a digit after '.' in a number");
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (!Consume('+')) Consume('-');
      if (p_ == end_ || !IsDigit(*p_)) return Fail("expected a digit in a number's exponent");
      while (p_ < end_ && IsDigit(*p_)) ++p_;
    }
    *text = std::string_view(start, size_t(p_ - start));
    return true;
  }

  bool ReadNumber(double* value) {
    const char* start = p_;
    std::string_view text;
    if (!ScanNumber(&text)) return false;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *value);
    if (ec == std::errc::result_out_of_range) {
      // Rounds to zero or to infinity (from_chars then leaves *value alone).
      if (!IsBelowOne(text)) {
        return FailAtWithMessage(start, "number out of the range of a double");
      }
      *value = text[0] == '-' ? -0.0 : 0.0;
    } else if (ec != std::errc() || end != text.data() + text.size()) {
      return FailAtWithMessage(start, "unreadable number");  // not expected after ScanNumber
    }
    return true;
  }

  // `word` ("true", "false", "null") at p_.
  bool ReadLiteral(std::string_view word) {
    if (size_t(end_ - p_) < word.size() || std::memcmp(p_, word.data(), word.size()) != 0) {
      return Fail("expected a JSON value");
    }
    p_ += word.size();
    return true;
  }

  // Validates any JSON value at p_; `depth` is the nesting level it would open.
  bool SkipValue(int depth) {
    if (p_ == end_) return Fail("expected a JSON value");
    switch (*p_) {
      case '{': {
        if (depth > kMaxNestingDepth) return Fail("nested too deep");
        ++p_;
        SkipWhitespace();
        if (Consume('}')) return true;
        while (true) {
          std::string_view key;
          bool escaped;
          if (!ReadString(&key, &escaped)) return false;
          SkipWhitespace();
          if (!Consume(':')) return Fail("expected ':' after a key");
          SkipWhitespace();
          if (!SkipValue(depth + 1)) return false;
          SkipWhitespace();
          if (Consume('}')) return true;
          if (!Consume(',')) return Fail("expected ',' or '}' in an object");
          SkipWhitespace();
        }
      }
      case '[': {
        if (depth > kMaxNestingDepth) return Fail("nested too deep");
        ++p_;
        SkipWhitespace();
        if (Consume(']')) return true;
        while (true) {
          if (!SkipValue(depth + 1)) return false;
          SkipWhitespace();
          if (Consume(']')) return true;
          if (!Consume(',')) return Fail("expected ',' or ']' in an array");
          SkipWhitespace();
        }
      }
      case '"': {
        std::string_view content;
        bool escaped;
        return ReadString(&content, &escaped);
      }
      case 't':
        return ReadLiteral("true");
      case 'f':
        return ReadLiteral("false");
      case 'n':
        return ReadLiteral("null");
      default: {
        if (*p_ != '-' && !IsDigit(*p_)) return Fail("expected a JSON value");
        std::string_view text;
        return ScanNumber(&text);
      }
    }
  }

  const char* cursor() const { return p_; }

 private:
  // Advances p_ to the first byte that kStringStop flags, or to end_. Eight bytes at a time
  // (SWAR): a byte is flagged when it is '"' or '\\' (zero after the XOR), below 0x20, or has its
  // high bit set. The has-zero/has-less tricks may also flag bytes after a flagged one (borrows),
  // never before, so the lowest flagged byte is exact.
  void SkipPlainStringBytes() {
    constexpr uint64_t kOnes = 0x0101010101010101ULL;
    constexpr uint64_t kHighs = 0x8080808080808080ULL;
    static_assert(std::endian::native == std::endian::little);
    while (end_ - p_ >= 8) {
      uint64_t x;
      std::memcpy(&x, p_, 8);
      uint64_t quote = x ^ (kOnes * '"');
      uint64_t backslash = x ^ (kOnes * '\\');
      uint64_t flagged = ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) |
                         ((x - kOnes * 0x20) & ~x) | x;
      flagged &= kHighs;
      if (flagged != 0) {
        p_ += std::countr_zero(flagged) / 8;
        return;
      }
      p_ += 8;
    }
    while (p_ < end_ && !kStringStop.stop[uint8_t(*p_)]) ++p_;
  }

  // An escape at p_ ('\\'), with a \u high surrogate's pair.
  bool ReadEscape() {
    const char* start = p_;
    ++p_;
    if (p_ == end_) return FailAt(p_, "unterminated escape");
    char e = *p_++;
    switch (e) {
      case '"':
      case '\\':
      case '/':
      case 'b':
      case 'f':
      case 'n':
      case 'r':
      case 't':
        return true;
      case 'u': {
        int code = end_ - p_ >= 4 ? ReadHex4(p_) : -1;
        if (code < 0) return FailAt(start, "expected 4 hex digits after \\u");
        p_ += 4;
        if (code >= 0xdc00 && code <= 0xdfff) return FailAt(start, "lone low surrogate \\u escape");
        if (code >= 0xd800 && code <= 0xdbff) {
          int low = end_ - p_ >= 6 && p_[0] == '\\' && p_[1] == 'u' ? ReadHex4(p_ + 2) : -1;
          if (low < 0xdc00 || low > 0xdfff) {
            return FailAt(start, "high surrogate \\u escape not followed by a low surrogate");
          }
          p_ += 6;
        }
        return true;
      }
      default:
        return FailAt(start,
                      "invalid escape (expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u)");
    }
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  const bool newline_is_whitespace_;
  std::string error_;
  size_t error_position_ = 0;
};

Key IdentifyKey(std::string_view key) {
  if (key.size() == 9) {
    if (key == kKeyNames[kTimestamp]) return kTimestamp;
    if (key == kKeyNames[kDeviceId]) return kDeviceId;
    if (key == kKeyNames[kMetricId]) return kMetricId;
  } else if (key.size() == 5) {
    if (key == kKeyNames[kValue]) return kValue;
  } else if (key.size() == 6) {
    if (key == kKeyNames[kLabels]) return kLabels;
  }
  return kUnknownKey;
}

// "near `<up to 24 bytes before>` ^ `<up to 24 bytes from pos>`".
std::string Excerpt(std::string_view data, size_t pos) {
  constexpr size_t kContext = 24;
  pos = std::min(pos, data.size());
  size_t begin = pos > kContext ? pos - kContext : 0;
  size_t end = std::min(data.size(), pos + kContext);
  std::string out = "near `";
  AppendPrintable(&out, data.substr(begin, pos - begin));
  out += "` ^ `";
  AppendPrintable(&out, data.substr(pos, end - pos));
  out += "`";
  return out;
}

// A hash for intern_cache_: its first, middle and last 8 bytes and its length. Collisions only
// cost a cache miss.
size_t InternCacheSlot(std::string_view text, size_t slots) {
  uint64_t a = 0, b = 0, c = 0;
  if (text.size() >= 8) {
    std::memcpy(&a, text.data(), 8);
    std::memcpy(&b, text.data() + text.size() / 2 - 4, 8);
    std::memcpy(&c, text.data() + text.size() - 8, 8);
  } else if (!text.empty()) {
    std::memcpy(&a, text.data(), text.size());
  }
  uint64_t h = (a * 0x9e3779b97f4a7c15ULL) ^ (b * 0xbf58476d1ce4e5b9ULL) ^
               (c * 0x94d049bb133111ebULL) ^ text.size();
  h ^= h >> 32;
  h *= 0x9e3779b97f4a7c15ULL;
  return size_t(h >> 40) & (slots - 1);
}

}  // namespace

uint32_t RowStreamParser::Intern(std::string_view text) {
  InternCacheEntry& entry = intern_cache_[InternCacheSlot(text, kInternCacheSlots)];
  if (entry.data != nullptr && entry.size == text.size() &&
      std::memcmp(entry.data, text.data(), text.size()) == 0) {
    return entry.id;
  }
  uint32_t id = interner_->Intern(text);
  std::string_view stored = interner_->Get(id);  // stays valid for the interner's life
  entry = InternCacheEntry{stored.data(), uint32_t(stored.size()), id};
  return id;
}

// The shortcut accepts a text only if it is the cached prefix, then SS (00-59), then optionally
// '.' and 1 to 9 digits, then exactly the cached offset text. ParseIsoTimestamp accepts every such
// text (the prefix's hour is not 24, which allows only second 0) and computes its instant as
// (instant of prefix + "00" + offset) + SS seconds + fraction, which is what the shortcut returns.
// Any other text goes to ParseIsoTimestamp, which also reports the errors.
Result<ParsedTime> RowStreamParser::ParseTimestamp(std::string_view text) {
  if (minute_.valid && text.size() >= 19 + minute_.suffix_length &&
      std::memcmp(text.data(), minute_.prefix, 17) == 0) {
    const char* p = text.data() + 17;
    const char* end = text.data() + text.size();
    if (p[0] >= '0' && p[0] <= '5' && IsDigit(p[1])) {
      int64_t second = (p[0] - '0') * 10 + (p[1] - '0');
      p += 2;
      int64_t nanos = 0;
      int digits = 0;
      if (p < end && *p == '.') {
        ++p;
        while (p < end && IsDigit(*p) && digits < 10) {
          nanos = nanos * 10 + (*p++ - '0');
          ++digits;
        }
        for (int i = digits; i < 9; ++i) nanos *= 10;
      }
      bool fraction_ok = digits <= 9 && (digits > 0 || p[-1] != '.');
      if (fraction_ok && size_t(end - p) == minute_.suffix_length &&
          std::memcmp(p, minute_.suffix, minute_.suffix_length) == 0) {
        ParsedTime parsed;
        parsed.utc = minute_.minute_utc + second * kNanosPerSecond + nanos;
        parsed.offset_seconds = minute_.offset_seconds;
        return parsed;
      }
    }
  }
  Result<ParsedTime> parsed = ParseIsoTimestamp(text);
  if (parsed.ok() && parsed->offset_seconds) CacheMinuteOf(text);
  return parsed;
}

// `text` was read by ParseIsoTimestamp, with an offset.
void RowStreamParser::CacheMinuteOf(std::string_view text) {
  minute_.valid = false;
  if (text.size() < 20 || text[4] != '-' || text[7] != '-' || text[13] != ':' || text[16] != ':' ||
      (text[11] == '2' && text[12] == '4') || !IsDigit(text[17]) || !IsDigit(text[18])) {
    return;
  }
  size_t pos = 19;
  if (text[pos] == '.') {
    ++pos;
    while (pos < text.size() && IsDigit(text[pos])) ++pos;
  }
  std::string_view suffix = text.substr(pos);
  if (suffix.empty() || suffix.size() > sizeof(minute_.suffix) ||
      std::string_view("+-Zz").find(suffix[0]) == std::string_view::npos) {
    return;  // e.g. a ',' fraction
  }
  char minute_text[17 + 2 + sizeof(minute_.suffix)];
  std::memcpy(minute_text, text.data(), 17);
  minute_text[17] = minute_text[18] = '0';
  std::memcpy(minute_text + 19, suffix.data(), suffix.size());
  Result<ParsedTime> minute = ParseIsoTimestamp(std::string_view(minute_text, 19 + suffix.size()));
  if (!minute.ok() || !minute->offset_seconds) return;
  // The shortcut adds up to 60 s to the minute: not in the last minute of the range, where the
  // sum could overflow (ParseIsoTimestamp range-checks each such time).
  if (minute->utc > std::numeric_limits<UnixNanos>::max() - 60 * kNanosPerSecond) return;
  std::memcpy(minute_.prefix, text.data(), 17);
  std::memcpy(minute_.suffix, suffix.data(), suffix.size());
  minute_.suffix_length = suffix.size();
  minute_.offset_seconds = *minute->offset_seconds;
  minute_.minute_utc = minute->utc;
  minute_.valid = true;
}

RowStreamParser::RowStreamParser(StringInterner* interner, Framing framing)
    : interner_(interner),
      json_lines_(framing == Framing::kJsonLines),
      state_(json_lines_ ? State::kLineStart : State::kBeforeArray) {}

void RowStreamParser::Fail(std::string_view data, size_t pos, int64_t data_offset,
                           std::string_view what) {
  std::string message;
  if (json_lines_) {
    message = "JSON Lines, line " + std::to_string(lines_ + 1) + ", byte " +
              std::to_string(data_offset + int64_t(pos));
  } else {
    message = "metrics body, byte " + std::to_string(data_offset + int64_t(pos));
    if (state_ == State::kInRow) message += ", row " + std::to_string(rows_ + 1);
  }
  message += ": ";
  message += what;
  message += "; ";
  message += Excerpt(data, pos);
  status_ = Status::Corruption(message);
}

bool RowStreamParser::FrameRow(std::string_view data, size_t* pos, int64_t data_offset) {
  const char* s = data.data();
  size_t i = *pos;
  const size_t n = data.size();
  // Locals so that the loop keeps them in registers; written back on every exit.
  int depth = depth_;
  uint64_t array_bits = array_bits_;
  bool in_string = in_string_;
  bool in_escape = in_escape_;
  bool complete = false;
  const bool* stop = json_lines_ ? kLineFrameStop.stop : kFrameStop.stop;
  while (i < n) {
    if (json_lines_ && s[i] == '\n') {  // the line ends inside the row: ParseRow says why
      ++i;
      complete = true;
      break;
    }
    if (in_string) {
      if (in_escape) {
        in_escape = false;
        ++i;
        continue;
      }
      while (i < n && !stop[uint8_t(s[i])]) ++i;
      if (i == n) break;
      if (s[i] == '\n') continue;  // handled above
      if (s[i] == '\\') {
        in_escape = true;
      } else {
        in_string = false;
      }
      ++i;
      continue;
    }
    char c = s[i];
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (depth >= kMaxNestingDepth) {
        Fail(data, i, data_offset,
             "nested deeper than " + std::to_string(kMaxNestingDepth) + " levels");
        return false;
      }
      uint64_t bit = uint64_t(1) << depth;
      array_bits = c == '[' ? (array_bits | bit) : (array_bits & ~bit);
      ++depth;
    } else if (c == '}' || c == ']') {
      --depth;
      bool is_array = (array_bits >> depth) & 1;
      if (is_array != (c == ']')) {
        Fail(data, i, data_offset,
             is_array ? "expected ']' to close an array" : "expected '}' to close an object");
        return false;
      }
      if (depth == 0) {
        ++i;
        complete = true;
        break;
      }
    }
    ++i;
  }
  depth_ = depth;
  array_bits_ = array_bits;
  in_string_ = in_string;
  in_escape_ = in_escape;
  *pos = i;
  return complete;
}

Status RowStreamParser::Feed(std::string_view bytes, RowBatch* batch) {
  if (!status_.ok()) return status_;
  const int64_t base = bytes_;
  bytes_ += int64_t(bytes.size());
  const size_t n = bytes.size();
  size_t i = 0;
  // Where the row in progress starts in `bytes`; npos when it started in an earlier call (its
  // beginning is then in partial_).
  size_t row_start = std::string_view::npos;
  while (i < n) {
    char c = bytes[i];
    switch (state_) {
      case State::kInRow: {
        size_t scan_start = i;
        bool complete = FrameRow(bytes, &i, base);
        if (!status_.ok()) return status_;
        size_t row_length = (row_start == std::string_view::npos ? partial_.size() : 0) +
                            (i - (row_start == std::string_view::npos ? scan_start : row_start));
        if (row_length > kMaxRowBytes) {
          Fail(bytes, i, base,
               "row longer than " + std::to_string(kMaxRowBytes) + " bytes (unbalanced '{'?)");
          return status_;
        }
        if (!complete) {
          if (row_start != std::string_view::npos) {
            partial_.assign(bytes.substr(row_start));
          } else {
            partial_.append(bytes.substr(scan_start));
          }
          return status_;
        }
        std::string_view row;
        if (row_start != std::string_view::npos) {
          row = bytes.substr(row_start, i - row_start);
        } else {
          partial_.append(bytes.substr(0, i));
          row = partial_;
        }
        size_t length = 0;
        if (!ParseRow(row, row_offset_, /*report_errors=*/true, batch, &length)) return status_;
        if (length != row.size()) {  // cannot happen: the framer and the reader agree on the end
          status_ = Status::Internal("metrics body: row framing and parsing disagree");
          return status_;
        }
        partial_.clear();
        row_start = std::string_view::npos;
        state_ = json_lines_ ? State::kLineEnd : State::kAfterRow;
        break;
      }
      case State::kBeforeArray:
        if (c == '[') {
          state_ = State::kBeforeFirst;
        } else if (!IsWhitespace(c)) {
          Fail(bytes, i, base, "expected '[' at the start of the body, got " + DescribeByte(c));
          return status_;
        }
        ++i;
        break;
      case State::kLineStart:
      case State::kBeforeFirst:
      case State::kBeforeRow:
        if (c == '{') {
          // Fast path: a row that is whole in `bytes` is parsed in place, and the reader finds its
          // end. If that fails (the row is cut by the end of `bytes`, or it is bad), the row is
          // framed and buffered, then parsed again once complete; a bad row's error is reported
          // then. Only valid rows are appended, so the two attempts cannot both append.
          size_t length = 0;
          if (ParseRow(bytes.substr(i), base + int64_t(i), /*report_errors=*/false, batch,
                       &length)) {
            i += length;
            state_ = json_lines_ ? State::kLineEnd : State::kAfterRow;
            break;
          }
          // FrameRow reads the '{' itself (depth 0 -> 1), so that a piece ending right after it
          // still leaves it in partial_.
          state_ = State::kInRow;
          row_start = i;
          row_offset_ = base + int64_t(i);
          depth_ = 0;
          array_bits_ = 0;
          in_string_ = in_escape_ = false;
          break;
        } else if (state_ == State::kLineStart) {
          Fail(bytes, i, base,
               c == '\n' ? std::string("blank line (one row per line, no empty line)")
                         : "expected a row '{' at the start of the line, got " + DescribeByte(c));
          return status_;
        } else if (c == ']' && state_ == State::kBeforeFirst) {
          state_ = State::kDone;
        } else if (!IsWhitespace(c)) {
          Fail(bytes, i, base,
               std::string(state_ == State::kBeforeFirst ? "expected a row '{' or ']'"
                                                         : "expected a row '{' after ','") +
                   " (row " + std::to_string(rows_ + 1) + "), got " + DescribeByte(c));
          return status_;
        }
        ++i;
        break;
      case State::kAfterRow:
        if (c == ',') {
          state_ = State::kBeforeRow;
        } else if (c == ']') {
          state_ = State::kDone;
        } else if (!IsWhitespace(c)) {
          Fail(bytes, i, base,
               "expected ',' or ']' after row " + std::to_string(rows_) + ", got " +
                   DescribeByte(c));
          return status_;
        }
        ++i;
        break;
      case State::kLineEnd:
        if (c != '\n') {
          Fail(bytes, i, base,
               "expected a newline after the row (one row per line), got " + DescribeByte(c));
          return status_;
        }
        ++lines_;
        state_ = State::kLineStart;
        ++i;
        break;
      case State::kDone:
        if (!IsWhitespace(c)) {
          Fail(bytes, i, base, "unexpected " + DescribeByte(c) + " after the closing ]");
          return status_;
        }
        ++i;
        break;
    }
  }
  return status_;
}

bool RowStreamParser::ParseRow(std::string_view text, int64_t offset, bool report_errors,
                               RowBatch* batch, size_t* length) {
  std::string_view row = text;  // the row alone once its end is known; for the error excerpts
  RowReader reader(text, /*newline_is_whitespace=*/!json_lines_);
  std::string_view texts[kKeyCount];      // unescaped (timestamp, device, metric) or raw (labels)
  const char* positions[kKeyCount] = {};  // where each value starts; null when absent
  double value = 0;

  auto fail = [&]() {
    if (report_errors) Fail(row, reader.error_position(), offset, reader.error());
    return false;
  };
  auto fail_with = [&](size_t position, std::string_view what) {
    if (report_errors) Fail(row, position, offset, what);
    return false;
  };

  reader.Consume('{');
  reader.SkipWhitespace();
  if (!reader.Consume('}')) {
    int expected = kTimestamp;  // the key that comes next in Kwollect's order
    while (true) {
      const char* key_position = reader.cursor();
      bool escaped;
      Key which;
      if (expected < kKeyCount && reader.ConsumeText(kQuotedKeys[expected])) {
        which = Key(expected);  // the usual case: that key, then ':', with no space
      } else {
        if (reader.peek() != '"') {
          reader.Fail("expected a key string");
          return fail();
        }
        std::string_view key;
        if (!reader.ReadString(&key, &escaped)) return fail();
        if (escaped) {
          Unescape(key, &scratch_[kKeyScratch]);
          key = scratch_[kKeyScratch];
        }
        reader.SkipWhitespace();
        if (!reader.Consume(':')) {
          reader.Fail("expected ':' after a key");
          return fail();
        }
        which = IdentifyKey(key);
      }
      expected = which < kKeyCount ? which + 1 : kKeyCount;
      reader.SkipWhitespace();
      if (which != kUnknownKey) {
        if (positions[which] != nullptr) {
          reader.FailAtWithMessage(key_position,
                                   "duplicate key \"" + std::string(kKeyNames[which]) + "\"");
          return fail();
        }
        positions[which] = reader.cursor();
      }
      switch (which) {
        case kTimestamp:
        case kDeviceId:
        case kMetricId: {
          if (reader.peek() != '"') {
            reader.Fail("expected a string for \"" + std::string(kKeyNames[which]) + "\"");
            return fail();
          }
          std::string_view content;
          if (!reader.ReadString(&content, &escaped)) return fail();
          if (escaped) {
            Unescape(content, &scratch_[which]);
            content = scratch_[which];
          }
          texts[which] = content;
          break;
        }
        case kValue: {
          char c = reader.peek();
          if (c == '"') {
            std::string_view content;
            if (!reader.ReadString(&content, &escaped)) return fail();
            if (escaped) {
              Unescape(content, &scratch_[kValue]);
              content = scratch_[kValue];
            }
            if (content == "NaN") {
              value = std::numeric_limits<double>::quiet_NaN();
            } else if (content == "Infinity") {
              value = std::numeric_limits<double>::infinity();
            } else if (content == "-Infinity") {
              value = -std::numeric_limits<double>::infinity();
            } else {
              reader.FailAtWithMessage(positions[kValue],
                                       "expected a number, null, \"NaN\", \"Infinity\" or "
                                       "\"-Infinity\" for \"value\", got another string");
              return fail();
            }
          } else if (c == 'n') {
            if (!reader.ReadLiteral("null")) return fail();
            value = NullValue();
          } else if (c == '-' || IsDigit(c)) {
            if (!reader.ReadNumber(&value)) return fail();
          } else {
            reader.Fail(
                "expected a number, null, \"NaN\", \"Infinity\" or \"-Infinity\" for \"value\"");
            return fail();
          }
          break;
        }
        case kLabels: {
          char c = reader.peek();
          if (c == '{') {
            if (!reader.SkipValue(2)) return fail();
            texts[kLabels] =
                std::string_view(positions[kLabels], size_t(reader.cursor() - positions[kLabels]));
          } else if (c == 'n') {
            if (!reader.ReadLiteral("null")) return fail();
          } else {
            reader.Fail("expected an object (or null) for \"labels\"");
            return fail();
          }
          break;
        }
        default:
          if (!reader.SkipValue(2)) return fail();
          break;
      }
      reader.SkipWhitespace();
      if (reader.Consume('}')) break;
      if (!reader.Consume(',')) {
        reader.Fail("expected ',' or '}' after a value in the row");
        return fail();
      }
      reader.SkipWhitespace();
    }
  }
  *length = reader.position();
  row = text.substr(0, *length);
  for (Key key : {kTimestamp, kDeviceId, kMetricId, kValue}) {
    if (positions[key] == nullptr) {
      return fail_with(0, "row has no \"" + std::string(kKeyNames[key]) + "\" key");
    }
  }
  if (row.size() > kMaxRowBytes) {
    return fail_with(0, "row longer than " + std::to_string(kMaxRowBytes) + " bytes");
  }
  Result<ParsedTime> time = ParseTimestamp(texts[kTimestamp]);
  if (!time.ok() || !time->offset_seconds) {
    return fail_with(size_t(positions[kTimestamp] - row.data()),
                     time.ok() ? "\"timestamp\" has no UTC offset"
                               : "bad \"timestamp\": " + time.status().message());
  }
  if (batch->raw.size() + row.size() > std::numeric_limits<uint32_t>::max()) {
    if (report_errors) {
      status_ = Status::InvalidArgument(
          "RowBatch::raw would exceed 4 GiB; drain the batch (Clear) between Feed calls");
    }
    return false;
  }
  std::string_view labels = texts[kLabels].empty() ? std::string_view("{}") : texts[kLabels];
  batch->time.push_back(time->utc);
  batch->utc_offset.push_back(int32_t(*time->offset_seconds));
  batch->device.push_back(Intern(texts[kDeviceId]));
  batch->metric.push_back(Intern(texts[kMetricId]));
  batch->value.push_back(value);
  batch->labels.push_back(Intern(labels));
  batch->raw.append(row);
  batch->raw_end.push_back(uint32_t(batch->raw.size()));
  ++rows_;
  return true;
}

Status RowStreamParser::Finish() {
  if (!status_.ok() || state_ == State::kDone) return status_;
  if (json_lines_) {
    if (state_ != State::kInRow) return status_;
    status_ = Status::Corruption(
        "JSON Lines text ended after " + std::to_string(rows_) +
        " rows, in the middle of a row (line " + std::to_string(lines_ + 1) + ", from byte " +
        std::to_string(row_offset_) + ", " + std::to_string(bytes_ - row_offset_) +
        " bytes of it read); the text was cut");
    return status_;
  }
  std::string message = "metrics body ended after " + std::to_string(rows_) + " rows, ";
  switch (state_) {
    case State::kBeforeArray:
      message += bytes_ == 0 ? "before the opening [ (empty body)" : "before the opening [";
      break;
    case State::kInRow:
      message += "in the middle of a row (row " + std::to_string(rows_ + 1) + ", from byte " +
                 std::to_string(row_offset_) + ", " + std::to_string(bytes_ - row_offset_) +
                 " bytes of it read)";
      break;
    default:
      message += "before the closing ] (" + std::to_string(bytes_) + " bytes read)";
      break;
  }
  message += "; the answer was cut";
  status_ = Status::Corruption(message);
  return status_;
}

}  // namespace kwatt::internal
