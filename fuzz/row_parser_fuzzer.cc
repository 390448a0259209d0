// The streaming row parser (Kwollect's JSON array answers and archives' JSON Lines): whatever the
// bytes, no crash, and the same result whole and fed in pieces.
#include <cstdint>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "kwatt/core/row_batch.h"
#include "kwatt/core/row_parser.h"

using kwatt::RowBatch;
using kwatt::Status;
using kwatt::StringInterner;
using kwatt::internal::Framing;
using kwatt::internal::RowStreamParser;

namespace {

struct Outcome {
  Status status;
  size_t rows = 0;
  std::string raw;
};

Outcome Parse(std::string_view input, Framing framing, size_t piece) {
  StringInterner interner;
  RowStreamParser parser(&interner, framing);
  RowBatch batch;
  Outcome out;
  for (size_t at = 0; at < input.size() && out.status.ok(); at += piece) {
    out.status = parser.Feed(input.substr(at, piece), &batch);
  }
  if (out.status.ok()) out.status = parser.Finish();
  out.rows = batch.size();
  out.raw = batch.raw;
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Framing framing = data[0] & 1 ? Framing::kJsonLines : Framing::kJsonArray;
  size_t piece = 1 + data[0] / 2 % 7;  // pieces of 1 to 7 bytes
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  Outcome whole = Parse(input, framing, input.size() + 1);
  Outcome pieces = Parse(input, framing, piece);
  KWATT_FUZZ_CHECK(whole.status.ok() == pieces.status.ok());
  if (whole.status.ok()) {
    KWATT_FUZZ_CHECK(whole.rows == pieces.rows);
    KWATT_FUZZ_CHECK(whole.raw == pieces.raw);
  }
  return 0;
}
