#include "src/core/zstd_frame.h"

#include <algorithm>

namespace kwatt::internal {

ZstdFrameEncoder::ZstdFrameEncoder(int level) : cctx_(ZSTD_createCCtx()) {
  if (cctx_ == nullptr) return;
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1);
}

ZstdFrameEncoder::~ZstdFrameEncoder() { ZSTD_freeCCtx(cctx_); }

Status ZstdFrameEncoder::Compress(std::string_view input, std::string* frame) {
  if (cctx_ == nullptr) return Status::Internal("zstd: cannot create a compression context");
  frame->resize(ZSTD_compressBound(input.size()));
  size_t n = ZSTD_compress2(cctx_, frame->data(), frame->size(), input.data(), input.size());
  if (ZSTD_isError(n)) return Status::Internal(std::string("zstd: ") + ZSTD_getErrorName(n));
  frame->resize(n);
  return Status::OK();
}

ZstdFrameDecoder::ZstdFrameDecoder() : dctx_(ZSTD_createDCtx()) {}
ZstdFrameDecoder::~ZstdFrameDecoder() { ZSTD_freeDCtx(dctx_); }

Status ZstdFrameDecoder::Decompress(std::string_view frame, uint64_t content_size,
                                    const std::string& where, std::string_view* content) {
  if (dctx_ == nullptr) return Status::Internal("zstd: cannot create a decompression context");
  if (content_size > capacity_) {
    capacity_ = std::max<size_t>(content_size, capacity_ * 2);
    buffer_.reset(new char[capacity_]);
  }
  ZSTD_DCtx_reset(dctx_, ZSTD_reset_session_only);
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  // The whole frame is in `in` and `out` has room for its content: zstd decodes it in one pass,
  // straight into the buffer.
  ZSTD_outBuffer out{buffer_.get(), size_t(content_size), 0};
  while (true) {
    size_t left = ZSTD_decompressStream(dctx_, &out, &in);
    if (ZSTD_isError(left)) return Status::Corruption(where + ": " + ZSTD_getErrorName(left));
    if (left == 0) break;  // the frame is whole, its checksum checked
    if (out.pos == out.size || in.pos == in.size) {
      return Status::Corruption(where +
                                ": its content is longer than the frame header says, "
                                "or its data ends early");
    }
  }
  if (in.pos != in.size) return Status::Corruption(where + ": bytes after the frame's end");
  if (out.pos != content_size) {
    return Status::Corruption(where + ": " + std::to_string(out.pos) +
                              " bytes of text, the frame header says " +
                              std::to_string(content_size));
  }
  *content = std::string_view(buffer_.get(), out.pos);
  return Status::OK();
}

}  // namespace kwatt::internal
