#include "src/store/block_codec.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace kwatt::store::internal::block_codec_test {
namespace {

BlockRows RoundTrip(const BlockRows& rows, std::string* block = nullptr) {
  BlockEncoder encoder;
  std::string encoded;
  Status status = encoder.Encode(rows, &encoded);
  EXPECT_TRUE(status.ok()) << status.ToString();
  BlockDecoder decoder;
  BlockRows decoded;
  status = decoder.Decode(encoded, "block", &decoded);
  EXPECT_TRUE(status.ok()) << status.ToString();
  if (block) *block = encoded;
  return decoded;
}

void ExpectSame(const BlockRows& a, const BlockRows& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.micros[i], b.micros[i]) << i;
    EXPECT_EQ(a.utc_offset[i], b.utc_offset[i]) << i;
    EXPECT_EQ(std::bit_cast<uint64_t>(a.value[i]), std::bit_cast<uint64_t>(b.value[i]))
        << i << ": " << a.value[i] << " " << b.value[i];
  }
}

TEST(BlockCodec, ValuesKeepTheirBits) {
  const double kValues[] = {0.0,
                            -0.0,
                            std::numeric_limits<double>::quiet_NaN(),
                            -std::numeric_limits<double>::quiet_NaN(),
                            std::bit_cast<double>(0x7ff8000000000123ULL),  // a NaN with a payload
                            std::numeric_limits<double>::infinity(),
                            -std::numeric_limits<double>::infinity(),
                            std::numeric_limits<double>::max(),
                            std::numeric_limits<double>::lowest(),
                            std::numeric_limits<double>::denorm_min(),
                            std::numeric_limits<double>::min(),
                            1e300,
                            -1e-300,
                            0.1,
                            123.4,
                            9007199254740993.0,
                            1.0 / 3.0};
  BlockRows rows;
  int64_t t = 1'700'000'000'000'000;
  for (double v : kValues) {
    rows.micros.push_back(t);
    rows.utc_offset.push_back(3600);
    rows.value.push_back(v);
    t += 20'000;
  }
  ExpectSame(rows, RoundTrip(rows));
}

TEST(BlockCodec, DecimalValuesAndRegularTimesAreSmall) {
  // 50 Hz power values with 0.1 W resolution: a few bytes a row.
  BlockRows rows;
  std::mt19937 random(7);
  double watts = 150.0;
  for (int i = 0; i < 4096; ++i) {
    rows.micros.push_back(1'700'000'000'000'000 + int64_t(i) * 20'000);
    rows.utc_offset.push_back(i < 2000 ? 7200 : 3600);
    int tenths = int(std::lround(watts * 10)) + int(random() % 21) - 10;
    watts = std::clamp(tenths / 10.0, 95.0, 250.0);
    rows.value.push_back(watts);
  }
  std::string block;
  ExpectSame(rows, RoundTrip(rows, &block));
  EXPECT_LT(block.size(), rows.size() * 2) << "bytes: " << block.size();
}

TEST(BlockCodec, ExtremeAndEqualTimes) {
  BlockRows rows;
  for (int64_t t :
       {std::numeric_limits<int64_t>::min(), int64_t(-5), int64_t(-5), int64_t(0), int64_t(1),
        std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()}) {
    rows.micros.push_back(t);
    rows.utc_offset.push_back(-36000);
    rows.value.push_back(double(rows.size()));
  }
  ExpectSame(rows, RoundTrip(rows));
}

TEST(BlockCodec, RefusesRowsOutOfOrderAndEmptyBlocks) {
  BlockEncoder encoder;
  std::string block;
  BlockRows rows;
  EXPECT_EQ(encoder.Encode(rows, &block).code(), Status::Code::kInvalidArgument);
  rows.micros = {2, 1};
  rows.utc_offset = {0, 0};
  rows.value = {1, 2};
  EXPECT_EQ(encoder.Encode(rows, &block).code(), Status::Code::kInvalidArgument);
}

TEST(BlockCodec, DamageIsCorruption) {
  BlockRows rows;
  for (int i = 0; i < 500; ++i) {
    rows.micros.push_back(i * 1000);
    rows.utc_offset.push_back(3600);
    rows.value.push_back(std::sqrt(double(i)));
  }
  std::string block;
  RoundTrip(rows, &block);
  BlockDecoder decoder;
  BlockRows decoded;
  // Every single flipped byte is noticed (zstd's checksum covers the content).
  for (size_t at = 0; at < block.size(); at += 7) {
    std::string damaged = block;
    damaged[at] = char(damaged[at] ^ 0x20);
    Status status = decoder.Decode(damaged, "block 9", &decoded);
    EXPECT_EQ(status.code(), Status::Code::kCorruption) << "byte " << at;
    EXPECT_NE(status.message().find("block 9"), std::string::npos) << status.message();
  }
  EXPECT_EQ(decoder.Decode(block.substr(0, block.size() / 2), "b", &decoded).code(),
            Status::Code::kCorruption);
  EXPECT_EQ(decoder.Decode("", "b", &decoded).code(), Status::Code::kCorruption);
}

TEST(BlockCodec, SortByTimeKeepsTheOrderOfEqualInstants) {
  BlockRows rows;
  rows.micros = {5, 3, 5, 1, 3};
  rows.utc_offset = {0, 1, 2, 3, 4};
  rows.value = {0.5, 0.3, 1.5, 0.1, 1.3};
  SortByTime(&rows);
  EXPECT_EQ(rows.micros, (std::vector<int64_t>{1, 3, 3, 5, 5}));
  EXPECT_EQ(rows.utc_offset, (std::vector<int32_t>{3, 1, 4, 0, 2}));
  EXPECT_EQ(rows.value, (std::vector<double>{0.1, 0.3, 1.3, 0.5, 1.5}));
}

}  // namespace
}  // namespace kwatt::store::internal::block_codec_test
