// zstd frames of kwatt archive data files (doc/archive_format.md): checking their headers,
// splitting a file into them, decoding them. Internal to the archive library (reader and writer).
#ifndef KWATT_SRC_ARCHIVE_FRAMES_H_
#define KWATT_SRC_ARCHIVE_FRAMES_H_

#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kwatt/core/row_batch.h"
#include "kwatt/core/status.h"
#include "kwatt/core/zstd_frame.h"

namespace kwatt::archive::internal {

struct FrameSpan {
  size_t offset = 0;  // in the file
  size_t size = 0;    // compressed
  uint64_t content_size = 0;
};

// Checks the zstd frame at the start of data[0, avail): a zstd frame (not a skippable one) with
// its content size (at most kMaxFrameTextBytes, and no more than its bytes can expand to) and a
// checksum, whole. Sets *size and *content_size; sets *need_more instead when `avail` is too short
// and more bytes may come (!eof). Returns the problem (Corruption, after `where`) otherwise.
Status CheckFrame(const char* data, size_t avail, bool eof, size_t* size, uint64_t* content_size,
                  bool* need_more, const std::string& where);

// A file's xxh64 checksum as the manifest writes it: 16 lowercase hex digits.
std::string Hex64(uint64_t value);

// "data/x.jsonl.zst: zstd frame 3 (from byte 1234)".
std::string FrameWhere(const std::string& path, size_t index, size_t offset);

// Splits a whole file (or the committed part of it) into frames, each checked by CheckFrame.
Status SplitFrames(const std::string& path, std::string_view data, std::vector<FrameSpan>* frames);

// Decompresses whole frames (into a buffer of the frame's size, reused) and parses their text.
// One per thread.
class FrameDecoder {
 public:
  FrameDecoder() = default;
  FrameDecoder(const FrameDecoder&) = delete;
  FrameDecoder& operator=(const FrameDecoder&) = delete;

  // The text of `frame` (one whole zstd frame, checked by CheckFrame), valid until the next call.
  // zstd checks the frame's checksum and content size.
  Status Decompress(std::string_view frame, uint64_t content_size, const std::string& where,
                    std::string_view* text) {
    return zstd_.Decompress(frame, content_size, where, text);
  }

  // Appends the rows of a frame's text to `batch`, whose ids refer to `interner`.
  static Status Parse(std::string_view text, StringInterner* interner, RowBatch* batch,
                      const std::string& where);

  Status Decode(std::string_view frame, uint64_t content_size, StringInterner* interner,
                RowBatch* batch, const std::string& where);

 private:
  kwatt::internal::ZstdFrameDecoder zstd_;
};

}  // namespace kwatt::archive::internal

#endif  // KWATT_SRC_ARCHIVE_FRAMES_H_
