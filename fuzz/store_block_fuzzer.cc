// A block of the embedded store (doc/store.md, "Block encoding"). The first byte chooses:
//   even: the rest is a stored block, decoded (as Check and queries do); one that decodes is
//         encoded again and must decode to the same rows, bit for bit;
//   odd:  the rest is rows, 20 bytes each (int64 microseconds, int32 UTC offset, the value's 64
//         bits, little-endian), sorted by time, encoded, and decoded back bit for bit.
#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "src/store/block_codec.h"

namespace {

using kwatt::store::internal::BlockDecoder;
using kwatt::store::internal::BlockEncoder;
using kwatt::store::internal::BlockRows;

bool SameRows(const BlockRows& a, const BlockRows& b) {
  if (a.micros != b.micros || a.utc_offset != b.utc_offset || a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::bit_cast<uint64_t>(a.value[i]) != std::bit_cast<uint64_t>(b.value[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  BlockEncoder encoder;
  BlockDecoder decoder;
  BlockRows rows, again;
  std::string block;
  if (data[0] % 2 == 0) {
    if (!decoder.Decode(input, "fuzz", &rows).ok()) return 0;
    KWATT_FUZZ_CHECK(encoder.Encode(rows, &block).ok());
  } else {
    for (size_t at = 0; at + 20 <= input.size(); at += 20) {
      int64_t micros;
      int32_t offset;
      uint64_t bits;
      std::memcpy(&micros, input.data() + at, 8);
      std::memcpy(&offset, input.data() + at + 8, 4);
      std::memcpy(&bits, input.data() + at + 12, 8);
      rows.micros.push_back(micros);
      rows.utc_offset.push_back(offset);
      rows.value.push_back(std::bit_cast<double>(bits));
    }
    if (rows.size() == 0) return 0;
    kwatt::store::internal::SortByTime(&rows);
    KWATT_FUZZ_CHECK(encoder.Encode(rows, &block).ok());
  }
  KWATT_FUZZ_CHECK(decoder.Decode(block, "fuzz", &again).ok());
  KWATT_FUZZ_CHECK(SameRows(rows, again));
  return 0;
}
