#include "src/archive/frames.h"

#include <zstd_errors.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "kwatt/archive/format.h"
#include "kwatt/core/row_parser.h"

namespace kwatt::archive::internal {

using kwatt::internal::Framing;
using kwatt::internal::RowStreamParser;

namespace {

// A zstd block of at most 128 KiB takes at least 4 bytes (an RLE block): no frame expands more.
constexpr uint64_t kMaxZstdExpansion = (128 << 10) / 4;

}  // namespace

// Checks the zstd frame at the start of data[0, avail): a zstd frame (not a skippable one) with
// its content size and a checksum, whole. Sets *size and *content_size; sets *need_more instead
// when `avail` is too short and more bytes may come (!eof). Returns the problem otherwise.
Status CheckFrame(const char* data, size_t avail, bool eof, size_t* size, uint64_t* content_size,
                  bool* need_more, const std::string& where) {
  *need_more = false;
  auto more = [&](const char* what) {
    if (!eof) {
      *need_more = true;
      return Status::OK();
    }
    return Status::Corruption(where + ": truncated: the file ends inside the frame's " +
                              std::string(what));
  };
  if (avail < 5) return more("header");
  uint32_t magic;
  std::memcpy(&magic, data, 4);  // little-endian
  if ((magic & ZSTD_MAGIC_SKIPPABLE_MASK) == ZSTD_MAGIC_SKIPPABLE_START) {
    return Status::Corruption(where +
                              ": a skippable zstd frame, which a kwatt archive never holds");
  }
  if (magic != ZSTD_MAGICNUMBER) {
    return Status::Corruption(where + ": not a zstd frame (wrong magic number)");
  }
  // RFC 8878 3.1.1.1: the frame header descriptor.
  auto descriptor = uint8_t(data[4]);
  int fcs_flag = descriptor >> 6;
  bool single_segment = (descriptor >> 5) & 1;
  bool has_checksum = (descriptor >> 2) & 1;
  static constexpr size_t kDictIdBytes[] = {0, 1, 2, 4};
  static constexpr size_t kFcsBytes[] = {0, 2, 4, 8};
  size_t header = 5 + (single_segment ? 0 : 1) + kDictIdBytes[descriptor & 3] +
                  (fcs_flag == 0 && single_segment ? 1 : kFcsBytes[fcs_flag]);
  if (avail < header) return more("header");
  if (fcs_flag == 0 && !single_segment) {
    return Status::Corruption(where +
                              ": the frame does not record its content size, which the "
                              "format requires (was it compressed from a pipe?)");
  }
  if (!has_checksum) {
    return Status::Corruption(where + ": the frame has no checksum, which the format requires");
  }
  unsigned long long declared = ZSTD_getFrameContentSize(data, avail);
  if (declared == ZSTD_CONTENTSIZE_ERROR || declared == ZSTD_CONTENTSIZE_UNKNOWN) {
    return Status::Corruption(where + ": unreadable frame header");
  }
  // The content size is allocated before decoding: a damaged header must not decide it.
  if (declared > kMaxFrameTextBytes) {
    return Status::Corruption(where + ": the frame header announces " + std::to_string(declared) +
                              " bytes of text, more than a frame of the format holds (" +
                              std::to_string(kMaxFrameTextBytes >> 20) + " MiB)");
  }
  size_t found = ZSTD_findFrameCompressedSize(data, avail);
  if (ZSTD_isError(found)) {
    if (ZSTD_getErrorCode(found) == ZSTD_error_srcSize_wrong) return more("blocks");
    return Status::Corruption(where + ": damaged frame (" + ZSTD_getErrorName(found) + ")");
  }
  // A zstd block of at most 128 KiB takes at least 4 bytes (an RLE block): no frame expands more.
  if (declared / kMaxZstdExpansion > found) {
    return Status::Corruption(where + ": the frame header announces " + std::to_string(declared) +
                              " bytes of text, more than its " + std::to_string(found) +
                              " bytes can hold");
  }
  *size = found;
  *content_size = declared;
  return Status::OK();
}

std::string FrameWhere(const std::string& path, size_t index, size_t offset) {
  return path + ": zstd frame " + std::to_string(index + 1) + " (from byte " +
         std::to_string(offset) + ")";
}

// Splits a whole file (or the committed part of it) into frames.
Status SplitFrames(const std::string& path, std::string_view data, std::vector<FrameSpan>* frames) {
  size_t pos = 0;
  while (pos < data.size()) {
    FrameSpan span;
    bool need_more;
    KWATT_RETURN_IF_ERROR(CheckFrame(data.data() + pos, data.size() - pos, /*eof=*/true, &span.size,
                                     &span.content_size, &need_more,
                                     FrameWhere(path, frames->size(), pos)));
    span.offset = pos;
    frames->push_back(span);
    pos += span.size;
  }
  return Status::OK();
}

// Appends the rows of a frame's text to `batch`, whose ids refer to `interner`.
Status FrameDecoder::Parse(std::string_view text, StringInterner* interner, RowBatch* batch,
                           const std::string& where) {
  RowStreamParser parser(interner, Framing::kJsonLines);
  Status status = parser.Feed(text, batch);
  if (status.ok()) status = parser.Finish();
  if (!status.ok()) {
    if (status.code() != Status::Code::kCorruption) return status;  // a batch too large
    return Status::Corruption(
        where + ", its text: " + status.message() +
        (parser.rows() > 0 && status.message().find("ended after") != std::string::npos
             ? " (a frame must hold whole rows)"
             : ""));
  }
  if (!text.empty() && text.back() != '\n') {
    return Status::Corruption(where + ", its text: the last row is not followed by a newline");
  }
  return Status::OK();
}

Status FrameDecoder::Decode(std::string_view frame, uint64_t content_size, StringInterner* interner,
                            RowBatch* batch, const std::string& where) {
  std::string_view text;
  KWATT_RETURN_IF_ERROR(Decompress(frame, content_size, where, &text));
  return Parse(text, interner, batch, where);
}

std::string Hex64(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace kwatt::archive::internal
