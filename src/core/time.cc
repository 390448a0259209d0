#include "kwatt/core/time.h"

#include <charconv>
#include <chrono>
#include <cstring>
#include <ctime>

namespace kwatt {
namespace {

namespace chr = std::chrono;

// Seconds since the epoch of 01:00 UTC on the last Sunday of `month` in `year`.
int64_t LastSundayOneUtc(int year, unsigned month) {
  chr::sys_days day{chr::year{year} / chr::month{month} / chr::Sunday[chr::last]};
  return day.time_since_epoch().count() * 86400LL + 3600;
}

struct Civil {
  int year;
  unsigned month, day, hour, minute, second;
};

Civil ToCivil(int64_t unix_seconds) {
  int64_t days = FloorDiv(unix_seconds, 86400);
  int64_t rem = unix_seconds - days * 86400;
  chr::year_month_day ymd{chr::sys_days{chr::days{days}}};
  return Civil{int(ymd.year()), unsigned(ymd.month()), unsigned(ymd.day()), unsigned(rem / 3600),
               unsigned(rem % 3600 / 60), unsigned(rem % 60)};
}

inline char* PutDigits(char* p, unsigned value, int width) {
  for (int i = width - 1; i >= 0; --i) {
    p[i] = char('0' + value % 10);
    value /= 10;
  }
  return p + width;
}

bool ReadDigits(std::string_view text, size_t* pos, int count, int* value) {
  if (*pos + count > text.size()) return false;
  int v = 0;
  for (int i = 0; i < count; ++i) {
    char c = text[*pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *pos += count;
  *value = v;
  return true;
}

Status BadTimestamp(std::string_view text, std::string_view why) {
  std::string message = "invalid timestamp \"";
  message.append(text);
  message += "\": ";
  message.append(why);
  message += " (expected epoch seconds or YYYY-MM-DD[THH:MM[:SS[.ffffff]]][+HH:MM])";
  return Status::InvalidArgument(message);
}

}  // namespace

UnixNanos WallClockNow() {
  return chr::duration_cast<chr::nanoseconds>(chr::system_clock::now().time_since_epoch()).count();
}

int ParisUtcOffsetSeconds(int64_t unix_seconds) {
  int year = ToCivil(unix_seconds).year;
  if (year < 1981) return 3600;
  int64_t begin = LastSundayOneUtc(year, 3);
  int64_t end = LastSundayOneUtc(year, year >= 1996 ? 10 : 9);
  return (unix_seconds >= begin && unix_seconds < end) ? 7200 : 3600;
}

size_t FormatTimestamp(UnixNanos t, int offset_seconds, char* out) {
  int64_t seconds = FloorDiv(t, kNanosPerSecond);
  int64_t nanos = t - seconds * kNanosPerSecond;
  Civil c = ToCivil(seconds + offset_seconds);
  char* p = out;
  int year = c.year;
  if (year < 0) {
    *p++ = '-';
    year = -year;
  }
  p = PutDigits(p, unsigned(year), year > 9999 ? 5 : 4);
  *p++ = '-';
  p = PutDigits(p, c.month, 2);
  *p++ = '-';
  p = PutDigits(p, c.day, 2);
  *p++ = 'T';
  p = PutDigits(p, c.hour, 2);
  *p++ = ':';
  p = PutDigits(p, c.minute, 2);
  *p++ = ':';
  p = PutDigits(p, c.second, 2);
  if (nanos != 0) {
    int digits = 9;
    while (nanos % 10 == 0) {
      nanos /= 10;
      --digits;
    }
    *p++ = '.';
    p = PutDigits(p, unsigned(nanos), digits);
  }
  int offset = offset_seconds;
  *p++ = offset < 0 ? '-' : '+';
  if (offset < 0) offset = -offset;
  p = PutDigits(p, unsigned(offset / 3600), 2);
  *p++ = ':';
  p = PutDigits(p, unsigned(offset % 3600 / 60), 2);
  return size_t(p - out);
}

size_t FormatParisTimestamp(UnixNanos t, char* out) {
  return FormatTimestamp(t, ParisUtcOffsetSeconds(FloorDiv(t, kNanosPerSecond)), out);
}

std::string FormatParisTimestamp(UnixNanos t) {
  char buffer[kMaxTimestampLength];
  return std::string(buffer, FormatParisTimestamp(t, buffer));
}

std::string FormatUtcTimestamp(UnixNanos t) {
  char buffer[kMaxTimestampLength];
  size_t n = FormatTimestamp(t, 0, buffer);
  return std::string(buffer, n - 6) + "Z";  // "+00:00" -> "Z"
}

Result<ParsedTime> ParseIsoTimestamp(std::string_view text) {
  size_t pos = 0;
  int year, month, day, hour = 0, minute = 0, second = 0;
  int64_t nanos = 0;
  if (!ReadDigits(text, &pos, 4, &year) || pos >= text.size() || text[pos++] != '-' ||
      !ReadDigits(text, &pos, 2, &month) || pos >= text.size() || text[pos++] != '-' ||
      !ReadDigits(text, &pos, 2, &day)) {
    return BadTimestamp(text, "no date YYYY-MM-DD at its start");
  }
  chr::year_month_day ymd{chr::year{year}, chr::month{unsigned(month)}, chr::day{unsigned(day)}};
  if (!ymd.ok()) return BadTimestamp(text, "no such date");
  if (pos < text.size() && (text[pos] == 'T' || text[pos] == 't' || text[pos] == ' ')) {
    ++pos;
    if (!ReadDigits(text, &pos, 2, &hour) || pos >= text.size() || text[pos++] != ':' ||
        !ReadDigits(text, &pos, 2, &minute)) {
      return BadTimestamp(text, "time is not HH:MM[:SS]");
    }
    if (pos < text.size() && text[pos] == ':') {
      ++pos;
      if (!ReadDigits(text, &pos, 2, &second)) return BadTimestamp(text, "bad seconds");
      if (pos < text.size() && (text[pos] == '.' || text[pos] == ',')) {
        ++pos;
        int digits = 0;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
          if (digits < 9) nanos = nanos * 10 + (text[pos] - '0');
          ++digits;
          ++pos;
        }
        if (digits == 0) return BadTimestamp(text, "empty fraction");
        if (digits > 9) return BadTimestamp(text, "more than 9 fraction digits");
        for (int i = digits; i < 9; ++i) nanos *= 10;
      }
    }
    if (hour > 24 || minute > 59 || second > 60 || (hour == 24 && (minute || second || nanos))) {
      return BadTimestamp(text, "time out of range");
    }
  }
  ParsedTime parsed;
  if (pos < text.size()) {
    char sign = text[pos];
    if (sign == 'Z' || sign == 'z') {
      parsed.offset_seconds = 0;
      ++pos;
    } else if (sign == '+' || sign == '-') {
      ++pos;
      int oh = 0, om = 0;
      if (!ReadDigits(text, &pos, 2, &oh)) return BadTimestamp(text, "offset is not +HH[:MM]");
      if (pos < text.size() && text[pos] == ':') ++pos;
      if (pos < text.size() && !ReadDigits(text, &pos, 2, &om)) {
        return BadTimestamp(text, "offset is not +HH[:MM]");
      }
      if (oh > 15 || om > 59) return BadTimestamp(text, "offset out of range");
      parsed.offset_seconds = (sign == '-' ? -1 : 1) * (oh * 3600 + om * 60);
    } else if (sign == ' ') {
      return BadTimestamp(text, "unexpected space (a '+' in a URL must be sent as %2B)");
    }
  }
  if (pos != text.size()) return BadTimestamp(text, "unexpected text after the timestamp");
  int64_t days = chr::sys_days{ymd}.time_since_epoch().count();
  int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second;
  parsed.utc = seconds * kNanosPerSecond + nanos - int64_t(parsed.offset_seconds.value_or(0)) *
                                                       kNanosPerSecond;
  return parsed;
}

UnixNanos ParisLocalToUtc(UnixNanos local_as_utc) {
  int64_t local_seconds = FloorDiv(local_as_utc, kNanosPerSecond);
  // Try summer time first (the earlier reading of a repeated hour), then winter time.
  for (int offset : {7200, 3600}) {
    if (ParisUtcOffsetSeconds(local_seconds - offset) == offset) {
      return local_as_utc - int64_t(offset) * kNanosPerSecond;
    }
  }
  return local_as_utc - 3600 * kNanosPerSecond;  // in the spring gap
}

Result<UnixNanos> ParseKwollectTimeParameter(std::string_view text) {
  // Epoch seconds: [-]digits[.digits]
  size_t pos = 0;
  bool negative = false;
  if (pos < text.size() && (text[pos] == '-' || text[pos] == '+')) {
    negative = text[pos] == '-';
    ++pos;
  }
  size_t int_begin = pos;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
  size_t int_end = pos;
  bool numeric = int_end > int_begin && int_end - int_begin <= 12;
  int64_t frac_nanos = 0;
  if (numeric && pos < text.size() && text[pos] == '.') {
    ++pos;
    int digits = 0;
    int64_t scaled = 0;  // fraction in 1e-10 seconds, for rounding to the microsecond
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (digits < 10) scaled = scaled * 10 + (text[pos] - '0');
      ++digits;
      ++pos;
    }
    for (int i = digits; i < 10; ++i) scaled *= 10;
    frac_nanos = (scaled + 5000) / 10000 * 1000;  // round half up to microseconds
  }
  if (numeric && pos == text.size() && int_end > int_begin) {
    int64_t seconds = 0;
    std::from_chars(text.data() + int_begin, text.data() + int_end, seconds);
    int64_t t = seconds * kNanosPerSecond + frac_nanos;
    return negative ? -t : t;
  }
  Result<ParsedTime> parsed = ParseIsoTimestamp(text);
  if (!parsed.ok()) return parsed.status();
  if (parsed->offset_seconds) return parsed->utc;
  return ParisLocalToUtc(parsed->utc);
}

Result<UnixNanos> ParseUserTime(std::string_view text, UnixNanos now) {
  if (text == "now") return now;
  bool numeric = !text.empty() && text.find_first_not_of("0123456789.+-") == std::string_view::npos &&
                 text.find('-', 1) == std::string_view::npos;
  if (numeric) return ParseKwollectTimeParameter(text);
  Result<ParsedTime> parsed = ParseIsoTimestamp(text);
  if (!parsed.ok()) {
    return Status::InvalidArgument(parsed.status().message() + ", or \"now\"");
  }
  if (parsed->offset_seconds) return parsed->utc;
  // Local time of this machine: let the C library apply its time zone rules.
  int64_t local_seconds = FloorDiv(parsed->utc, kNanosPerSecond);
  int64_t nanos = parsed->utc - local_seconds * kNanosPerSecond;
  Civil c = ToCivil(local_seconds);
  std::tm tm{};
  tm.tm_year = c.year - 1900;
  tm.tm_mon = int(c.month) - 1;
  tm.tm_mday = int(c.day);
  tm.tm_hour = int(c.hour);
  tm.tm_min = int(c.minute);
  tm.tm_sec = int(c.second);
  tm.tm_isdst = -1;
  std::time_t t = std::mktime(&tm);
  if (t == std::time_t(-1)) return Status::InvalidArgument("cannot read local time " + std::string(text));
  return int64_t(t) * kNanosPerSecond + nanos;
}

std::string FormatEpochSeconds(UnixNanos t) {
  int64_t micros = FloorDiv(t + 500, kNanosPerMicro);  // round to the microsecond
  int64_t seconds = FloorDiv(micros, 1'000'000);
  int64_t frac = micros - seconds * 1'000'000;
  char buffer[40];
  char* p = std::to_chars(buffer, buffer + 24, seconds).ptr;
  *p++ = '.';
  p = PutDigits(p, unsigned(frac), 6);
  return std::string(buffer, p);
}

}  // namespace kwatt
