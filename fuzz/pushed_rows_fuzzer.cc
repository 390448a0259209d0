// A push of custom metrics (POST /sites/{site}/metrics): the body's parser, then the rows served
// back. Besides "no crash": every accepted row comes back from the row stream, and the client's
// row parser reads the answer whole, with the pushed times and values.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_parser.h"
#include "src/server/pushed.h"
#include "src/server/row_stream.h"

using namespace kwatt;
using namespace kwatt::server::internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr UnixNanos kNow = 1713441600LL * kNanosPerSecond;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  Result<std::vector<PushedRow>> rows = ParsePushedRows(text, kNow);
  if (!rows.ok()) return 0;
  PushedMetrics pushed;
  if (!pushed.Add("lyon", *rows).ok()) std::abort();
  std::map<std::string, std::multiset<UnixNanos>> times;  // of each device
  for (const PushedRow& row : *rows) times[row.device_id].insert(row.t);
  for (const auto& [device, expected] : times) {
    RowStream stream(pushed.SeriesOf("lyon", device, {}), std::numeric_limits<UnixNanos>::min(),
                     std::numeric_limits<UnixNanos>::max() - 1,
                     std::numeric_limits<UnixNanos>::max() - 1, /*summary=*/false);
    std::string body;
    while (stream.Next(&body, 1 << 16)) {
    }
    StringInterner interner;
    kwatt::internal::RowStreamParser parser(&interner);
    RowBatch batch;
    if (!parser.Feed(body, &batch).ok() || !parser.Finish().ok()) std::abort();
    std::multiset<UnixNanos> got(batch.time.begin(), batch.time.end());
    for (size_t i = 0; i < batch.size(); ++i) {
      if (interner.Get(batch.device[i]) != device) std::abort();
    }
    if (got != expected) std::abort();
  }
  return 0;
}
