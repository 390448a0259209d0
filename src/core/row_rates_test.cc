#include "kwatt/core/row_rates.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kwatt/core/null_value.h"

namespace kwatt {
namespace {

constexpr UnixNanos kS = kNanosPerSecond;

// Kwollect's as_rate, row by row (tests/integration/test_kwollect_conformance.py checks the same
// against its SQL): null first, the rise per second, a wrap past the highest so far, null at a
// repeated instant and next to a null, NaN from a NaN on; and a series forgotten (rows of its
// device could not be fetched) starts again with a null.
TEST(SeriesRates, AsKwollectsAsRate) {
  SeriesRates rates;
  EXPECT_TRUE(IsNullValue(rates.Next("a", 0, 100)));
  EXPECT_DOUBLE_EQ(rates.Next("a", 5 * kS, 150), 10);
  EXPECT_DOUBLE_EQ(rates.Next("a", 10 * kS, 400), 50);
  EXPECT_DOUBLE_EQ(rates.Next("a", 15 * kS, 20), (400 - 400 + 20) / 5.0);  // a wrap
  EXPECT_TRUE(IsNullValue(rates.Next("a", 15 * kS, 20)));                  // the same instant
  EXPECT_TRUE(IsNullValue(rates.Next("b", 15 * kS, 7)));                   // another series
  EXPECT_TRUE(IsNullValue(rates.Next("a", 20 * kS, NullValue())));
  EXPECT_TRUE(IsNullValue(rates.Next("a", 25 * kS, 30)));  // after a null
  EXPECT_DOUBLE_EQ(rates.Next("a", 30 * kS, 40), 2);
  rates.Forget({"a"});
  EXPECT_TRUE(IsNullValue(rates.Next("a", 35 * kS, 50)));
  EXPECT_DOUBLE_EQ(rates.Next("b", 20 * kS, 17), 2);  // others kept
  const double nan = std::nan("");
  const double from_nan = rates.Next("a", 40 * kS, nan);
  EXPECT_TRUE(std::isnan(from_nan) && !IsNullValue(from_nan));  // NaN, not null
  EXPECT_TRUE(std::isnan(rates.Next("a", 45 * kS, 60)));
}

}  // namespace
}  // namespace kwatt
