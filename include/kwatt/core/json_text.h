// Writing JSON text exactly as Kwollect (PostgreSQL/PostgREST) renders it.
//
// Pure functions; thread-safe.
#ifndef KWATT_CORE_JSON_TEXT_H_
#define KWATT_CORE_JSON_TEXT_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// A JSON object as PostgreSQL's jsonb writes it (how Kwollect serves a row's labels): its members
// given as (key, the value's JSON text), keys shorter first, then in byte order; a key given twice
// keeps its last value; no blanks: {"psu":"1","interface":"eth0"}.
std::string JsonbObjectText(std::vector<std::pair<std::string, std::string>> members);

// What Python's json.loads makes of a row's "value": an int (a number without fraction or
// exponent: 98), a float (70.18, 1e+20), None (null) or a string ("NaN", "Infinity"...).
enum class JsonValueKind { kFloat, kInt, kNull, kText };

// The kind of the "value" member of a Kwollect row's text (the first key "value" followed by ':';
// kFloat when there is none).
JsonValueKind RowValueKind(std::string_view row);
// The kind of the text FormatJsonNumber writes for `value` (how Kwollect renders it).
JsonValueKind NumberKind(double value);

}  // namespace kwatt

#endif  // KWATT_CORE_JSON_TEXT_H_
