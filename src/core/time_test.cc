#include "kwatt/core/time.h"

#include <gtest/gtest.h>

namespace kwatt {
namespace {

UnixNanos At(int64_t seconds, int64_t nanos = 0) { return seconds * kNanosPerSecond + nanos; }

TEST(ParisOffset, FollowsEuRule) {
  // 2025: summer time from 2025-03-30 01:00 UTC to 2025-10-26 01:00 UTC.
  EXPECT_EQ(ParisUtcOffsetSeconds(1743296399), 3600);  // 00:59:59 UTC
  EXPECT_EQ(ParisUtcOffsetSeconds(1743296400), 7200);  // 01:00:00 UTC
  EXPECT_EQ(ParisUtcOffsetSeconds(1761440399), 7200);
  EXPECT_EQ(ParisUtcOffsetSeconds(1761440400), 3600);
  // 1990: summer time ended on the last Sunday of September.
  EXPECT_EQ(ParisUtcOffsetSeconds(654656399), 7200);  // 1990-09-30 00:59:59 UTC
  EXPECT_EQ(ParisUtcOffsetSeconds(654656400), 3600);
}

TEST(FormatTimestamp, KwollectCanonicalTexts) {
  EXPECT_EQ(FormatParisTimestamp(At(1744995333, 754307000)), "2025-04-18T18:55:33.754307+02:00");
  EXPECT_EQ(FormatParisTimestamp(At(1753182325)), "2025-07-22T13:05:25+02:00");
  EXPECT_EQ(FormatParisTimestamp(At(1645776135, 403250000)), "2022-02-25T09:02:15.40325+01:00");
  EXPECT_EQ(FormatParisTimestamp(At(1753182325, 20000000)), "2025-07-22T13:05:25.02+02:00");
  EXPECT_EQ(FormatUtcTimestamp(At(0)), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatParisTimestamp(At(-1, 500000000)), "1970-01-01T00:59:59.5+01:00");
}

TEST(ParseIsoTimestamp, AcceptsKwollectAndPostgresForms) {
  auto a = ParseIsoTimestamp("2025-04-18T18:55:33.754307+02:00");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->utc, At(1744995333, 754307000));
  EXPECT_EQ(*a->offset_seconds, 7200);
  auto b = ParseIsoTimestamp("2025-04-18 18:55:33+02");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->utc, At(1744995333));
  auto c = ParseIsoTimestamp("2021-06-08T15:00");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->offset_seconds.has_value());
  auto d = ParseIsoTimestamp("2025-04-18T16:55:33Z");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->utc, At(1744995333));
  EXPECT_EQ(ParseIsoTimestamp("2025-04-18T16:55:33.123456789+0000")->utc,
            At(1744995333, 123456789));
}

TEST(ParseIsoTimestamp, RejectsWithClearMessage) {
  for (const char* bad : {"yesterday", "2025-13-01", "2025-02-30", "2025-04-18T25:00",
                          "2025-04-18T18:55:33 02", "2025-04-18T18:55:33+02:00junk", ""}) {
    auto parsed = ParseIsoTimestamp(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_NE(parsed.status().message().find("invalid timestamp"), std::string::npos);
  }
}

TEST(ParseKwollectTimeParameter, EpochAndLocalTimes) {
  EXPECT_EQ(*ParseKwollectTimeParameter("1744995333"), At(1744995333));
  EXPECT_EQ(*ParseKwollectTimeParameter("1744995333.754307"), At(1744995333, 754307000));
  EXPECT_EQ(*ParseKwollectTimeParameter("1745000000.0"), At(1745000000));
  // Rounded to the microsecond.
  EXPECT_EQ(*ParseKwollectTimeParameter("1744995333.0000004"), At(1744995333));
  EXPECT_EQ(*ParseKwollectTimeParameter("1744995333.0000006"), At(1744995333, 1000));
  // Without offset: Europe/Paris.
  EXPECT_EQ(*ParseKwollectTimeParameter("2025-04-18T18:55:33"), At(1744995333));
  EXPECT_EQ(*ParseKwollectTimeParameter("2025-01-10 12:00"), At(1736506800));
  EXPECT_FALSE(ParseKwollectTimeParameter("soon").ok());
}

TEST(ParisLocalToUtc, AmbiguousAndGapHours) {
  // 2025-10-26 02:30 happens twice: the first (summer time, 00:30 UTC) is taken.
  auto local = ParseIsoTimestamp("2025-10-26T02:30:00")->utc;
  EXPECT_EQ(FormatParisTimestamp(ParisLocalToUtc(local)), "2025-10-26T02:30:00+02:00");
  // 2025-03-30 02:30 does not exist: read with the winter offset -> 03:30 summer time.
  local = ParseIsoTimestamp("2025-03-30T02:30:00")->utc;
  EXPECT_EQ(FormatParisTimestamp(ParisLocalToUtc(local)), "2025-03-30T03:30:00+02:00");
}

TEST(FormatEpochSeconds, SixDecimals) {
  EXPECT_EQ(FormatEpochSeconds(At(1744995333, 754307000)), "1744995333.754307");
  EXPECT_EQ(FormatEpochSeconds(At(1744995333)), "1744995333.000000");
  EXPECT_EQ(FormatEpochSeconds(At(-2, 500000000)), "-2.500000");
}

}  // namespace
}  // namespace kwatt
