// Whole zstd frames, compressed with their content size and a checksum and decompressed into a
// reused buffer: what the archive's data files and the store's blocks are made of, in core so
// that no part compresses or decompresses its own way. zstd's contexts stay in zstd_frame.cc.
//
// Thread safety: an encoder or a decoder belongs to one thread at a time.
#ifndef KWATT_CORE_ZSTD_FRAME_H_
#define KWATT_CORE_ZSTD_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kwatt/core/status.h"

namespace kwatt::internal {

// Compresses whole inputs into one zstd frame each, with the content size and a checksum.
class ZstdFrameEncoder {
 public:
  explicit ZstdFrameEncoder(int level);
  ~ZstdFrameEncoder();
  ZstdFrameEncoder(const ZstdFrameEncoder&) = delete;
  ZstdFrameEncoder& operator=(const ZstdFrameEncoder&) = delete;

  // Replaces *frame with the frame of `input`.
  Status Compress(std::string_view input, std::string* frame);

 private:
  struct Context;  // zstd's compression context
  std::unique_ptr<Context> context_;
};

// Decompresses whole frames into a buffer of the frame's size, reused from call to call.
class ZstdFrameDecoder {
 public:
  ZstdFrameDecoder();
  ~ZstdFrameDecoder();
  ZstdFrameDecoder(const ZstdFrameDecoder&) = delete;
  ZstdFrameDecoder& operator=(const ZstdFrameDecoder&) = delete;

  // The content of `frame` (one whole zstd frame whose header announces `content_size`, checked
  // by the caller against its own limit), valid until the next call. zstd checks the frame's
  // checksum (when it has one) and content size; problems are Corruption after `where`.
  Status Decompress(std::string_view frame, uint64_t content_size, const std::string& where,
                    std::string_view* content);

 private:
  struct Context;  // zstd's decompression context
  std::unique_ptr<Context> context_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

}  // namespace kwatt::internal

#endif  // KWATT_CORE_ZSTD_FRAME_H_
