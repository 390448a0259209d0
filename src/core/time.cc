#include "kwatt/core/time.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <vector>

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
  return Civil{int(ymd.year()),      unsigned(ymd.month()),     unsigned(ymd.day()),
               unsigned(rem / 3600), unsigned(rem % 3600 / 60), unsigned(rem % 60)};
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

// "YYYY-MM-DDTHH:MM:SS[.f]" of a wall-clock time given as if it were UTC.
std::string LocalText(UnixNanos local_as_utc) {
  char buffer[kMaxTimestampLength];
  size_t n = FormatTimestamp(local_as_utc, 0, buffer);
  return std::string(buffer, n - 6);
}

// One wall-clock time to the instant, in a zone given by its UTC offset at each instant
// (`offset_at`, seconds). The candidates are the instants L - o for the offsets o the zone has
// around L; a time that is none of them (a spring gap) or two of them (an autumn hour) is refused.
template <typename OffsetAt>
Result<UnixNanos> WallClockToUtc(UnixNanos local_as_utc, std::string_view zone,
                                 OffsetAt offset_at) {
  int64_t local_seconds = FloorDiv(local_as_utc, kNanosPerSecond);
  std::vector<int> offsets;
  for (int64_t probe : {local_seconds - 2 * 86400, local_seconds, local_seconds + 2 * 86400}) {
    int o = offset_at(probe);
    if (std::find(offsets.begin(), offsets.end(), o) == offsets.end()) offsets.push_back(o);
  }
  std::sort(offsets.begin(), offsets.end(), std::greater<int>());  // earlier instant first
  std::vector<std::pair<UnixNanos, int>> matches;
  for (int o : offsets) {
    UnixNanos t;
    if (__builtin_sub_overflow(local_as_utc, int64_t(o) * kNanosPerSecond, &t)) {
      return OutOfRange(LocalText(local_as_utc));
    }
    if (offset_at(FloorDiv(t, kNanosPerSecond)) == o) matches.emplace_back(t, o);
  }
  if (matches.size() == 1) return matches[0].first;
  std::string text = LocalText(local_as_utc);
  auto written = [&](int o) {
    char buffer[kMaxTimestampLength];
    return text + std::string(buffer, FormatTimestamp(0, o, buffer)).substr(19);
  };
  std::string candidates = offsets.size() >= 2 ? written(offsets[0]) + " or " + written(offsets[1])
                                               : written(offsets[0]);
  if (matches.empty()) {
    return Status::InvalidArgument(text + " does not exist in " + std::string(zone) +
                                   " (the clocks skip that hour): " + candidates +
                                   "; give the offset");
  }
  return Status::InvalidArgument(text + " is ambiguous in " + std::string(zone) +
                                 " (that hour happens twice): " + candidates + "; give the offset");
}

// The machine's time zone, for messages: $TZ, else the zone /etc/localtime links to.
std::string LocalZoneName() {
  const char* tz = std::getenv("TZ");
  if (tz && *tz) return std::string(tz[0] == ':' ? tz + 1 : tz);
  char target[512];
  ssize_t n = readlink("/etc/localtime", target, sizeof target - 1);
  if (n > 0) {
    std::string path(target, size_t(n));
    size_t at = path.find("zoneinfo/");
    if (at != std::string::npos) return path.substr(at + 9);
  }
  return "the local time zone";
}

}  // namespace

Status OutOfRange(std::string_view text) {
  return Status::InvalidArgument(std::string(text) +
                                 " is outside the times kwatt handles (1677-09-21 .. 2262-04-11)");
}

Result<UnixNanos> EpochSecondsToNanos(double seconds, std::string_view text) {
  // Rounded to the microsecond, as PostgreSQL's to_timestamp does.
  double micros = std::round(seconds * 1e6);
  if (!(micros >= -9223372036854775.0 && micros <= 9223372036854775.0)) return OutOfRange(text);
  UnixNanos t;
  if (__builtin_mul_overflow(int64_t(micros), kNanosPerMicro, &t)) return OutOfRange(text);
  return t;
}

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

size_t FormatFraction(int64_t nanos, char* out) {
  if (nanos == 0) return 0;
  int digits = 9;
  while (nanos % 10 == 0) {
    nanos /= 10;
    --digits;
  }
  out[0] = '.';
  PutDigits(out + 1, unsigned(nanos), digits);
  return size_t(digits + 1);
}

size_t FormatTimestamp(UnixNanos t, int offset_seconds, char* out) {
  int64_t seconds = FloorDiv(t, kNanosPerSecond);
  int64_t nanos = NanosOfSecond(t);  // t - seconds * 1e9 overflows before 1677-09-21T00:12:44Z
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
  p += FormatFraction(nanos, p);
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
  // Years have 4 digits: these seconds fit; their nanoseconds may not (1677..2262 only).
  int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second -
                    int64_t(parsed.offset_seconds.value_or(0));
  if (__builtin_mul_overflow(seconds, kNanosPerSecond, &parsed.utc) ||
      __builtin_add_overflow(parsed.utc, nanos, &parsed.utc)) {
    return OutOfRange(text);
  }
  return parsed;
}

Result<UnixNanos> ParisLocalToUtc(UnixNanos local_as_utc) {
  return WallClockToUtc(local_as_utc, "Europe/Paris", ParisUtcOffsetSeconds);
}

Result<UnixNanos> LocalToUtc(UnixNanos local_as_utc) {
  return WallClockToUtc(local_as_utc, LocalZoneName(), [](int64_t unix_seconds) {
    std::time_t t = std::time_t(unix_seconds);
    std::tm tm{};
    if (!localtime_r(&t, &tm)) return 0;
    return int(tm.tm_gmtoff);
  });
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
    int64_t t;
    if (__builtin_mul_overflow(seconds, kNanosPerSecond, &t) ||
        __builtin_add_overflow(t, frac_nanos, &t)) {
      return OutOfRange(text);
    }
    return negative ? -t : t;
  }
  Result<ParsedTime> parsed = ParseIsoTimestamp(text);
  if (!parsed.ok()) return parsed.status();
  if (parsed->offset_seconds) return parsed->utc;
  return ParisLocalToUtc(parsed->utc);
}

Result<UnixNanos> ParseUserTime(std::string_view text, UnixNanos now) {
  if (text == "now") return now;
  bool numeric = !text.empty() &&
                 text.find_first_not_of("0123456789.+-") == std::string_view::npos &&
                 text.find('-', 1) == std::string_view::npos;
  if (numeric) return ParseKwollectTimeParameter(text);
  Result<ParsedTime> parsed = ParseIsoTimestamp(text);
  if (!parsed.ok()) {
    if (parsed.status().message().rfind("invalid timestamp", 0) != 0) return parsed.status();
    return Status::InvalidArgument(parsed.status().message() + ", or \"now\"");
  }
  if (parsed->offset_seconds) return parsed->utc;
  // Local time of this machine, by its C library's time zone rules.
  return LocalToUtc(parsed->utc);
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
