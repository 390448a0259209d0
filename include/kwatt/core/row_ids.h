// The device and metric ids a row may have: those that Kwollect's metrics query can ask for, so
// that a row written under one can be read back. Every writer of rows that takes ids from a user
// checks them here: a push (POST /sites/{site}/metrics) and the collector's configuration.
// Pure functions; thread-safe.
#ifndef KWATT_CORE_ROW_IDS_H_
#define KWATT_CORE_ROW_IDS_H_

#include <cstddef>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt {

// The longest id kept (bytes).
inline constexpr size_t kMaxRowIdBytes = 255;

// How the metrics query reads its `nodes`, `devices` and `metrics` parameters: each a list split
// at ',' whose items lose the spaces and tabs around them (SplitCommaList, kwatt/core/text.h), a
// device id cut at its first '.' (`nova-1.lyon.grid5000.fr` asks for `nova-1`). An id that this
// reading changes could be written but never asked for. So an id is refused (InvalidArgument
// saying why and what to write instead, without the id: the caller names the field and quotes
// it) when it is empty, longer than kMaxRowIdBytes, holds ',' (a device id: '.' too), begins or
// ends with a space, or holds a control character, a tab among them (PostgreSQL refuses NUL in
// text, and none of them belongs in an id).
Status CheckDeviceId(std::string_view id);
Status CheckMetricId(std::string_view id);

}  // namespace kwatt

#endif  // KWATT_CORE_ROW_IDS_H_
