// The encoding of a block of the embedded store (doc/store.md, "Blocks"): the rows of one series,
// in time order, column by column (times as deltas of deltas, UTC offsets as runs, values as
// scaled decimal integers when that is exact, else as the XOR of consecutive bit patterns), the
// whole compressed into one zstd frame with its content size and checksum. Internal to the store.
//
// Thread safety: an encoder or a decoder belongs to one thread at a time.
#ifndef KWATT_SRC_STORE_BLOCK_CODEC_H_
#define KWATT_SRC_STORE_BLOCK_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/status.h"
#include "kwatt/core/zstd_frame.h"

namespace kwatt::store::internal {

// The version byte that starts a block's content.
inline constexpr uint8_t kBlockFormatVersion = 1;
// No block holds more rows than this; a decoder refuses a block that announces more.
inline constexpr size_t kMaxBlockRows = size_t(1) << 20;
// The zstd level of blocks.
inline constexpr int kBlockZstdLevel = 3;

// The rows of one series, in time order (ties in the order they were appended).
struct BlockRows {
  std::vector<int64_t> micros;  // UTC microseconds since the epoch
  std::vector<int32_t> utc_offset;
  std::vector<double> value;

  size_t size() const { return micros.size(); }
  void Clear() {
    micros.clear();
    utc_offset.clear();
    value.clear();
  }
};

// Sorts rows by time, rows of one instant kept in their order.
void SortByTime(BlockRows* rows);

class BlockEncoder {
 public:
  BlockEncoder() : zstd_(kBlockZstdLevel) {}
  // Replaces *block with the encoding of `rows`. REQUIRES: 1 <= rows.size() <= kMaxBlockRows,
  // rows in time order (InvalidArgument otherwise).
  Status Encode(const BlockRows& rows, std::string* block);

 private:
  kwatt::internal::ZstdFrameEncoder zstd_;
  std::string content_;
};

class BlockDecoder {
 public:
  // Replaces *rows with the rows of `block`. Corruption after `where` when the block is damaged:
  // a zstd problem (its checksum included), a malformed content, rows out of time order.
  Status Decode(std::string_view block, const std::string& where, BlockRows* rows);

 private:
  kwatt::internal::ZstdFrameDecoder zstd_;
};

}  // namespace kwatt::store::internal

#endif  // KWATT_SRC_STORE_BLOCK_CODEC_H_
