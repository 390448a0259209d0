// A row's value that is JSON null, kept apart from "NaN".
//
// Kwollect serves a value as a number, "NaN" (a reading that was not a number) or null (SQL
// NULL: no reading; `as_rate`'s first points, a pushed null). kwatt's rows carry one double per
// value, so null is a quiet NaN with a payload of its own, as R's NA is: every NaN test
// (std::isnan) still sees it as "no number", and whatever keeps a value's bits (the stores, the
// archives' text, binary COPY) keeps it apart from "NaN", which the renderers write back as
// `null` (json_text.h). Arithmetic on it gives an unspecified NaN: test with IsNullValue() before
// computing, never after.
//
// Pure functions; thread-safe.
#ifndef KWATT_CORE_NULL_VALUE_H_
#define KWATT_CORE_NULL_VALUE_H_

#include <bit>
#include <cstdint>

namespace kwatt {

// A quiet NaN (exponent all ones, quiet bit set) with payload 1954, R's NA_real_.
inline constexpr uint64_t kNullValueBits = 0x7ff8'0000'0000'07a2;

inline double NullValue() { return std::bit_cast<double>(kNullValueBits); }

// True for NullValue() (whatever its sign bit), false for any other value, "NaN" included.
inline bool IsNullValue(double value) {
  return (std::bit_cast<uint64_t>(value) & ~(uint64_t(1) << 63)) == kNullValueBits;
}

}  // namespace kwatt

#endif  // KWATT_CORE_NULL_VALUE_H_
