#include "src/store/block_codec.h"

#include <zstd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

namespace kwatt::store::internal {

namespace {

// The value column's encodings.
enum ValueEncoding : uint8_t {
  kDecimal = 0,  // a byte k, then each value * 10^k as an integer: the first, then deltas
  kXor = 1,      // each value's bits XOR the previous one's, 8 bytes little-endian
};

// The largest k of kDecimal: 10^k and the integers stay exact in doubles.
constexpr int kMaxDecimalDigits = 6;
constexpr double kPowersOfTen[] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6};
// |value * 10^k| below this is an integer a double holds exactly.
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

uint64_t ZigZag(int64_t v) { return (uint64_t(v) << 1) ^ uint64_t(v >> 63); }
int64_t UnZigZag(uint64_t v) { return int64_t(v >> 1) ^ -int64_t(v & 1); }

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(char(v | 0x80));
    v >>= 7;
  }
  out->push_back(char(v));
}

// The value as an integer count of 10^-k when dividing it back by 10^k gives the same bits.
bool ScaledExactly(double v, int k, int64_t* scaled) {
  double p = kPowersOfTen[k];
  if (!std::isfinite(v) || std::fabs(v) * p >= kMaxExactInteger) return false;
  auto i = int64_t(std::llround(v * p));
  if (std::bit_cast<uint64_t>(double(i) / p) != std::bit_cast<uint64_t>(v))
    return false;  // also refuses -0.0
  *scaled = i;
  return true;
}

// The smallest k whose scaling is exact for every value, or -1.
int DecimalDigits(const std::vector<double>& values) {
  int64_t scaled;
  for (int k = 0; k <= kMaxDecimalDigits; ++k) {
    bool all = true;
    for (double v : values) {
      if (!ScaledExactly(v, k, &scaled)) {
        all = false;
        break;
      }
    }
    if (all) return k;
  }
  return -1;
}

// Reads the content of a block, refusing anything malformed.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool Varint(uint64_t* v) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      auto byte = uint8_t(data_[pos_++]);
      result |= uint64_t(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *v = result;
        return true;
      }
    }
    return false;
  }
  bool Signed(int64_t* v) {
    uint64_t u;
    if (!Varint(&u)) return false;
    *v = UnZigZag(u);
    return true;
  }
  bool Byte(uint8_t* b) {
    if (pos_ >= data_.size()) return false;
    *b = uint8_t(data_[pos_++]);
    return true;
  }
  bool Fixed64(uint64_t* v) {
    if (data_.size() - pos_ < 8) return false;
    uint64_t r = 0;
    for (int i = 0; i < 8; ++i) r |= uint64_t(uint8_t(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    *v = r;
    return true;
  }
  bool AtEnd() const { return pos_ == data_.size(); }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

}  // namespace

void SortByTime(BlockRows* rows) {
  const std::vector<int64_t>& t = rows->micros;
  if (std::is_sorted(t.begin(), t.end())) return;
  std::vector<size_t> order(rows->size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t[a] < t[b]; });
  BlockRows sorted;
  for (size_t i : order) {
    sorted.micros.push_back(rows->micros[i]);
    sorted.utc_offset.push_back(rows->utc_offset[i]);
    sorted.value.push_back(rows->value[i]);
  }
  *rows = std::move(sorted);
}

Status BlockEncoder::Encode(const BlockRows& rows, std::string* block) {
  size_t n = rows.size();
  if (n == 0 || n > kMaxBlockRows || rows.utc_offset.size() != n || rows.value.size() != n) {
    return Status::InvalidArgument("a block holds 1 to " + std::to_string(kMaxBlockRows) +
                                   " rows, with as many offsets and values");
  }
  content_.clear();
  content_.push_back(char(kBlockFormatVersion));
  PutVarint(n, &content_);
  // Times: the first, then the first delta, then the deltas of deltas (wrapping arithmetic, so
  // any int64 round trips).
  uint64_t previous = uint64_t(rows.micros[0]);
  uint64_t previous_delta = 0;
  PutVarint(ZigZag(rows.micros[0]), &content_);
  for (size_t i = 1; i < n; ++i) {
    if (rows.micros[i] < rows.micros[i - 1]) {
      return Status::InvalidArgument("the rows of a block must be in time order");
    }
    uint64_t delta = uint64_t(rows.micros[i]) - previous;
    PutVarint(ZigZag(int64_t(delta - previous_delta)), &content_);
    previous = uint64_t(rows.micros[i]);
    previous_delta = delta;
  }
  // UTC offsets: runs of (offset, length).
  std::string runs;
  uint64_t run_count = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && rows.utc_offset[j] == rows.utc_offset[i]) ++j;
    PutVarint(ZigZag(rows.utc_offset[i]), &runs);
    PutVarint(j - i, &runs);
    ++run_count;
    i = j;
  }
  PutVarint(run_count, &content_);
  content_ += runs;
  // Values.
  int k = DecimalDigits(rows.value);
  if (k >= 0) {
    content_.push_back(char(kDecimal));
    content_.push_back(char(k));
    int64_t previous_scaled = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t scaled = 0;
      (void)ScaledExactly(rows.value[i], k, &scaled);  // true: DecimalDigits checked every value
      PutVarint(ZigZag(int64_t(uint64_t(scaled) - uint64_t(previous_scaled))), &content_);
      previous_scaled = scaled;
    }
  } else {
    content_.push_back(char(kXor));
    uint64_t previous_bits = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t bits = std::bit_cast<uint64_t>(rows.value[i]);
      uint64_t x = bits ^ previous_bits;
      for (int b = 0; b < 8; ++b) content_.push_back(char(x >> (8 * b)));
      previous_bits = bits;
    }
  }
  return zstd_.Compress(content_, block);
}

Status BlockDecoder::Decode(std::string_view block, const std::string& where, BlockRows* rows) {
  rows->Clear();
  auto damaged = [&](const std::string& what) { return Status::Corruption(where + ": " + what); };
  unsigned long long size = ZSTD_getFrameContentSize(block.data(), block.size());
  if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN) {
    return damaged("not a zstd frame with its content size");
  }
  // The largest content of kMaxBlockRows rows: 2 + 10 varints and 8 bytes a row, and a header.
  if (size > kMaxBlockRows * 40 + 64) {
    return damaged("its header announces " + std::to_string(size) +
                   " bytes, more than a block holds");
  }
  std::string_view content;
  KWATT_RETURN_IF_ERROR(zstd_.Decompress(block, size, where, &content));
  Reader in(content);
  uint8_t version;
  uint64_t n;
  if (!in.Byte(&version)) return damaged("empty");
  if (version != kBlockFormatVersion) {
    return damaged("block format " + std::to_string(version) + ", this kwatt reads " +
                   std::to_string(kBlockFormatVersion));
  }
  if (!in.Varint(&n) || n == 0 || n > kMaxBlockRows) return damaged("bad row count");
  rows->micros.resize(n);
  rows->utc_offset.resize(n);
  rows->value.resize(n);
  int64_t first;
  if (!in.Signed(&first)) return damaged("truncated times");
  rows->micros[0] = first;
  uint64_t previous = uint64_t(first), delta = 0;
  for (size_t i = 1; i < n; ++i) {
    int64_t dod;
    if (!in.Signed(&dod)) return damaged("truncated times");
    delta += uint64_t(dod);
    previous += delta;
    rows->micros[i] = int64_t(previous);
    if (rows->micros[i] < rows->micros[i - 1]) return damaged("rows out of time order");
  }
  uint64_t run_count;
  if (!in.Varint(&run_count) || run_count == 0 || run_count > n) return damaged("bad offset runs");
  size_t at = 0;
  for (uint64_t r = 0; r < run_count; ++r) {
    int64_t offset;
    uint64_t length;
    if (!in.Signed(&offset) || !in.Varint(&length) || length == 0 || length > n - at ||
        offset < INT32_MIN || offset > INT32_MAX) {
      return damaged("bad offset runs");
    }
    for (uint64_t i = 0; i < length; ++i) rows->utc_offset[at++] = int32_t(offset);
  }
  if (at != n) return damaged("the offset runs do not cover the rows");
  uint8_t encoding;
  if (!in.Byte(&encoding)) return damaged("truncated values");
  if (encoding == kDecimal) {
    uint8_t k;
    if (!in.Byte(&k) || k > kMaxDecimalDigits) return damaged("bad decimal scale");
    uint64_t scaled = 0;
    for (size_t i = 0; i < n; ++i) {
      int64_t d;
      if (!in.Signed(&d)) return damaged("truncated values");
      scaled += uint64_t(d);
      rows->value[i] = double(int64_t(scaled)) / kPowersOfTen[k];
    }
  } else if (encoding == kXor) {
    uint64_t bits = 0;
    for (size_t i = 0; i < n; ++i) {
      uint64_t x;
      if (!in.Fixed64(&x)) return damaged("truncated values");
      bits ^= x;
      rows->value[i] = std::bit_cast<double>(bits);
    }
  } else {
    return damaged("unknown value encoding " + std::to_string(encoding));
  }
  if (!in.AtEnd()) return damaged("bytes after the values");
  return Status::OK();
}

}  // namespace kwatt::store::internal
