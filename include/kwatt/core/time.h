// Instants, Europe/Paris time, and the timestamp texts Kwollect reads and writes.
//
// An instant is int64 nanoseconds since the Unix epoch, UTC (UnixNanos). Kwollect keeps
// microseconds; kwatt keeps nanoseconds so that no text it reads loses a digit.
// Europe/Paris offsets follow the EU rule (summer time from the last Sunday of March 01:00 UTC to
// the last Sunday of October 01:00 UTC) from 1996 on, and the 1981-1995 rule (end on the last
// Sunday of September) before; instants before 1981 are taken as +01:00.
//
// All functions are pure and thread-safe.
#ifndef KWATT_CORE_TIME_H_
#define KWATT_CORE_TIME_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt {

using UnixNanos = int64_t;
inline constexpr int64_t kNanosPerMicro = 1'000;
inline constexpr int64_t kNanosPerMilli = 1'000'000;
inline constexpr int64_t kNanosPerSecond = 1'000'000'000;

// Floor division for instants before 1970 as well.
inline int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// The nanoseconds of `t` past its second (0..999999999), without overflow at the ends of time.
inline int64_t NanosOfSecond(UnixNanos t) {
  int64_t nanos = t % kNanosPerSecond;
  return nanos < 0 ? nanos + kNanosPerSecond : nanos;
}

// Ceiling division for a positive `b`, without overflow at the ends of the int64 range.
inline int64_t CeilDiv(int64_t a, int64_t b) { return a / b + (a % b > 0 ? 1 : 0); }

// The system clock, now.
UnixNanos WallClockNow();

// The UTC offset of Europe/Paris at `unix_seconds`: 3600 (CET) or 7200 (CEST).
int ParisUtcOffsetSeconds(int64_t unix_seconds);

// Longest text FormatTimestamp writes: "-YYYYY-MM-DDTHH:MM:SS.fffffffff+HH:MM".
inline constexpr size_t kMaxTimestampLength = 40;

// Writes `t` as "YYYY-MM-DDTHH:MM:SS[.f]+HH:MM" in the local time of `offset_seconds`, the
// fraction with up to 9 digits and its trailing zeros removed (none when whole seconds), as
// Kwollect does. REQUIRES: `out` has room for kMaxTimestampLength chars. Returns the length.
size_t FormatTimestamp(UnixNanos t, int offset_seconds, char* out);

// The fraction of a second FormatTimestamp writes for `nanos` (0..999999999): "" for 0, else '.'
// and the digits without trailing zeros (".02", ".761802"). At most 10 characters.
size_t FormatFraction(int64_t nanos, char* out);
// The same in Europe/Paris time, which is how Kwollect renders every timestamp.
size_t FormatParisTimestamp(UnixNanos t, char* out);
std::string FormatParisTimestamp(UnixNanos t);
// RFC 3339 in UTC with a "Z" ("2025-04-18T16:55:33.754307Z"), for logs and manifests.
std::string FormatUtcTimestamp(UnixNanos t);

// An ISO 8601 / PostgreSQL timestamp text: "YYYY-MM-DD", then optionally "T" or " " and
// "HH:MM[:SS[.fraction]]", then optionally "Z", "+HH", "+HH:MM" or "+HHMM" (or "-").
struct ParsedTime {
  UnixNanos utc = 0;                  // the instant (when no offset: as if the text were UTC)
  std::optional<int> offset_seconds;  // the offset written in the text, if any
};
Result<ParsedTime> ParseIsoTimestamp(std::string_view text);

// The instants kwatt handles are those of UnixNanos: 1677-09-21T00:12:43.145224192Z ..
// 2262-04-11T23:47:16.854775807Z. Every parser below range-checks what it reads and refuses a
// time outside with OutOfRange(text): "TEXT is outside the times kwatt handles (1677-09-21 ..
// 2262-04-11)" (InvalidArgument).
Status OutOfRange(std::string_view text);

// Epoch seconds (a JSON number, say) to the instant, rounded to the microsecond; OutOfRange(text)
// when outside the range above (or NaN).
Result<UnixNanos> EpochSecondsToNanos(double seconds, std::string_view text);

// Europe/Paris wall-clock time (given as nanoseconds as if it were UTC) to the instant. A time
// that does not exist (in the spring gap) or happens twice (the autumn hour) is refused
// (InvalidArgument naming both readings: "2025-10-26T02:30:00 is ambiguous in Europe/Paris (that
// hour happens twice): 2025-10-26T02:30:00+02:00 or 2025-10-26T02:30:00+01:00; give the offset").
Result<UnixNanos> ParisLocalToUtc(UnixNanos local_as_utc);

// The same in the machine's local time zone (TZ, else /etc/localtime), by the same rule: the one
// algorithm both the CLI and the Python package (naive datetimes) read local times with.
Result<UnixNanos> LocalToUtc(UnixNanos local_as_utc);

// A start_time/end_time parameter of the metrics API: a decimal number is epoch seconds (rounded
// to the microsecond, as PostgreSQL's to_timestamp does); anything else is an ISO timestamp, read
// in Europe/Paris time when it has no offset (ParisLocalToUtc: refused in the spring gap and the
// autumn hour, where PostgreSQL would pick one reading).
Result<UnixNanos> ParseKwollectTimeParameter(std::string_view text);

// A time as a user writes it on the command line: "now", epoch seconds ("1745000000.5"), an ISO
// 8601 timestamp with an offset, or one without, read in the machine's local time zone (the TZ
// environment variable, else /etc/localtime), like date(1) does, except that a local time that
// does not exist or is ambiguous there is refused (LocalToUtc).
Result<UnixNanos> ParseUserTime(std::string_view text, UnixNanos now);

// Epoch seconds with 6 decimals ("1745000133.754307"), how a client sends bounds.
std::string FormatEpochSeconds(UnixNanos t);

}  // namespace kwatt

#endif  // KWATT_CORE_TIME_H_
