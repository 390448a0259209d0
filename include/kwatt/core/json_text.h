// Writing JSON text exactly as Kwollect (PostgreSQL/PostgREST) renders it.
//
// Pure functions; thread-safe.
#ifndef KWATT_CORE_JSON_TEXT_H_
#define KWATT_CORE_JSON_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace kwatt {

// Longest text FormatJsonNumber writes.
inline constexpr size_t kMaxNumberLength = 32;

// A double as PostgreSQL renders float8 in JSON: the shortest text that reads back to the same
// double, integral values without ".0" (98, 152601965318), exponents as "1e+20"; NaN and the
// infinities as the JSON strings "NaN", "Infinity", "-Infinity".
// REQUIRES: `out` has room for kMaxNumberLength chars. Returns the length.
size_t FormatJsonNumber(double value, char* out);
void AppendJsonNumber(std::string* out, double value);

// Appends `text` as a JSON string literal (quotes included), escaping '"', '\\' and control
// characters; other bytes (UTF-8) are copied.
void AppendJsonString(std::string* out, std::string_view text);

}  // namespace kwatt

#endif  // KWATT_CORE_JSON_TEXT_H_
