#include "kwatt/core/backoff.h"

#include <gtest/gtest.h>

namespace kwatt {
namespace {

TEST(Backoff, DoublesFromItsFirstDelayUpToItsCeilingAndStartsAgainAfterASuccess) {
  Backoff backoff(BackoffPolicy{1.0, 10.0});
  EXPECT_EQ(backoff.Failed(), 1.0);
  EXPECT_EQ(backoff.Failed(), 2.0);
  EXPECT_EQ(backoff.Failed(), 4.0);
  EXPECT_EQ(backoff.Failed(), 8.0);
  EXPECT_EQ(backoff.Failed(), 10.0);
  EXPECT_EQ(backoff.Failed(), 10.0);
  EXPECT_EQ(backoff.failures(), 6);
  backoff.Succeeded();
  EXPECT_EQ(backoff.failures(), 0);
  EXPECT_EQ(backoff.Failed(), 1.0);
}

TEST(Backoff, WithoutACeilingAndAfterManyFailuresItStaysANumber) {
  BackoffPolicy policy{0.5};
  EXPECT_EQ(policy.DelayBefore(0), 0.0);
  EXPECT_EQ(policy.DelayBefore(1), 0.5);
  EXPECT_EQ(policy.DelayBefore(4), 4.0);
  EXPECT_GT(policy.DelayBefore(100000), 1e300);  // huge, not undefined behaviour
  // A first delay of 0 (retry at once): always 0.
  Backoff at_once(BackoffPolicy{0.0, 60.0});
  EXPECT_EQ(at_once.Failed(), 0.0);
  EXPECT_EQ(at_once.Failed(), 0.0);
}

}  // namespace
}  // namespace kwatt
