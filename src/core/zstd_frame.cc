#include "kwatt/core/zstd_frame.h"

#include <zstd.h>

#include <algorithm>

namespace kwatt::internal {

struct ZstdFrameEncoder::Context {
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ~Context() { ZSTD_freeCCtx(cctx); }
};

struct ZstdFrameDecoder::Context {
  ZSTD_DCtx* dctx = ZSTD_createDCtx();
  ~Context() { ZSTD_freeDCtx(dctx); }
};

ZstdFrameEncoder::ZstdFrameEncoder(int level) : context_(std::make_unique<Context>()) {
  ZSTD_CCtx* cctx = context_->cctx;
  if (cctx == nullptr) return;
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
}

ZstdFrameEncoder::~ZstdFrameEncoder() = default;

Status ZstdFrameEncoder::Compress(std::string_view input, std::string* frame) {
  ZSTD_CCtx* cctx = context_->cctx;
  if (cctx == nullptr) return Status::Internal("zstd: cannot create a compression context");
  frame->resize(ZSTD_compressBound(input.size()));
  size_t n = ZSTD_compress2(cctx, frame->data(), frame->size(), input.data(), input.size());
  if (ZSTD_isError(n)) return Status::Internal(std::string("zstd: ") + ZSTD_getErrorName(n));
  frame->resize(n);
  return Status::OK();
}

ZstdFrameDecoder::ZstdFrameDecoder() : context_(std::make_unique<Context>()) {}
ZstdFrameDecoder::~ZstdFrameDecoder() = default;

Status ZstdFrameDecoder::Decompress(std::string_view frame, uint64_t content_size,
                                    const std::string& where, std::string_view* content) {
  ZSTD_DCtx* dctx = context_->dctx;
  if (dctx == nullptr) return Status::Internal("zstd: cannot create a decompression context");
  if (content_size > capacity_) {
    capacity_ = std::max<size_t>(content_size, capacity_ * 2);
    buffer_.reset(new char[capacity_]);
  }
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  // The whole frame is in `in` and `out` has room for its content: zstd decodes it in one pass,
  // straight into the buffer.
  ZSTD_outBuffer out{buffer_.get(), size_t(content_size), 0};
  while (true) {
    size_t left = ZSTD_decompressStream(dctx, &out, &in);
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
