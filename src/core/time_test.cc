#include "kwatt/core/time.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <ctime>
#include <limits>
#include <optional>
#include <string>

namespace kwatt::time_test {
namespace {

UnixNanos At(int64_t seconds, int64_t nanos = 0) { return seconds * kNanosPerSecond + nanos; }

TEST(FloorAndCeilDiv, RoundTowardsTheirSideAtTheEndsOfTheRange) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(FloorDiv(-1, 1000), -1);
  EXPECT_EQ(CeilDiv(-1, 1000), 0);
  EXPECT_EQ(CeilDiv(1, 1000), 1);
  EXPECT_EQ(CeilDiv(-2000, 1000), -2);
  EXPECT_EQ(FloorDiv(kMin, 1000), -9223372036854776);
  EXPECT_EQ(CeilDiv(kMin, 1000), -9223372036854775);
  EXPECT_EQ(FloorDiv(kMax, 1000), 9223372036854775);
  EXPECT_EQ(CeilDiv(kMax, 1000), 9223372036854776);
}

TEST(FormatTimestamp, TheEndsOfTheRange) {
  char text[kMaxTimestampLength];
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(std::string(text, FormatTimestamp(kMin, 0, text)),
            "1677-09-21T00:12:43.145224192+00:00");
  EXPECT_EQ(std::string(text, FormatTimestamp(kMax, 3600, text)),
            "2262-04-12T00:47:16.854775807+01:00");
  EXPECT_EQ(NanosOfSecond(kMin), 145224192);
  EXPECT_EQ(NanosOfSecond(-1), 999999999);
}

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

TEST(ParisLocalToUtc, RefusesAmbiguousAndGapHoursNamingBothReadings) {
  // 2025-10-26 02:30 happens twice (summer then winter time): refused, both readings named.
  auto local = ParseIsoTimestamp("2025-10-26T02:30:00")->utc;
  Result<UnixNanos> autumn = ParisLocalToUtc(local);
  ASSERT_FALSE(autumn.ok());
  EXPECT_EQ(autumn.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(autumn.status().message(),
            "2025-10-26T02:30:00 is ambiguous in Europe/Paris (that hour happens twice): "
            "2025-10-26T02:30:00+02:00 or 2025-10-26T02:30:00+01:00; give the offset");
  // 2025-03-30 02:30 does not exist (02:00 -> 03:00): refused, not moved.
  local = ParseIsoTimestamp("2025-03-30T02:30:00")->utc;
  Result<UnixNanos> spring = ParisLocalToUtc(local);
  ASSERT_FALSE(spring.ok());
  EXPECT_EQ(spring.status().message(),
            "2025-03-30T02:30:00 does not exist in Europe/Paris (the clocks skip that hour): "
            "2025-03-30T02:30:00+02:00 or 2025-03-30T02:30:00+01:00; give the offset");
  // Just outside those hours: one reading.
  EXPECT_EQ(FormatParisTimestamp(*ParisLocalToUtc(ParseIsoTimestamp("2025-10-26T03:00:00")->utc)),
            "2025-10-26T03:00:00+01:00");
  EXPECT_EQ(FormatParisTimestamp(*ParisLocalToUtc(ParseIsoTimestamp("2025-10-26T01:59:59")->utc)),
            "2025-10-26T01:59:59+02:00");
  EXPECT_EQ(FormatParisTimestamp(*ParisLocalToUtc(ParseIsoTimestamp("2025-03-30T03:00:00")->utc)),
            "2025-03-30T03:00:00+02:00");
  // The API parameter without offset follows the same rule.
  EXPECT_FALSE(ParseKwollectTimeParameter("2025-10-26T02:30").ok());
}

// ParseUserTime reads local time with the machine's zone (TZ), by the same rule as Paris.
class LocalZone : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tz = std::getenv("TZ");
    saved_ = tz ? std::optional<std::string>(tz) : std::nullopt;
    setenv("TZ", "Europe/Paris", 1);
    tzset();
  }
  void TearDown() override {
    if (saved_) {
      setenv("TZ", saved_->c_str(), 1);
    } else {
      unsetenv("TZ");
    }
    tzset();
  }
  std::optional<std::string> saved_;
};

TEST_F(LocalZone, UserTimeRefusesAmbiguousAndMissingLocalTimes) {
  Result<UnixNanos> autumn = ParseUserTime("2025-10-26T02:30", 0);
  ASSERT_FALSE(autumn.ok());
  EXPECT_EQ(autumn.status().message(),
            "2025-10-26T02:30:00 is ambiguous in Europe/Paris (that hour happens twice): "
            "2025-10-26T02:30:00+02:00 or 2025-10-26T02:30:00+01:00; give the offset");
  Result<UnixNanos> spring = ParseUserTime("2025-03-30T02:30", 0);
  ASSERT_FALSE(spring.ok());
  EXPECT_NE(spring.status().message().find("does not exist in Europe/Paris"), std::string::npos);
  // With the offset given, or outside those hours, it is read.
  EXPECT_EQ(*ParseUserTime("2025-10-26T02:30+01:00", 0), *ParseUserTime("2025-10-26T01:30Z", 0));
  EXPECT_EQ(*ParseUserTime("2025-04-18T18:55:33", 0), At(1744995333));
  EXPECT_EQ(*LocalToUtc(ParseIsoTimestamp("2025-01-10T12:00")->utc), At(1736506800));
}

TEST(TimeRange, RefusesTimesOutsideInt64Nanoseconds) {
  const std::string expected = " is outside the times kwatt handles (1677-09-21 .. 2262-04-11)";
  for (const char* text : {"3000-01-01T00:00:00Z", "1600-01-01T00:00:00Z", "2262-04-12T00:00:00Z",
                           "1677-09-20T00:00:00+00:00"}) {
    Result<ParsedTime> parsed = ParseIsoTimestamp(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().message(), text + expected);
    Result<UnixNanos> user = ParseUserTime(text, 0);
    ASSERT_FALSE(user.ok()) << text;
    EXPECT_EQ(user.status().message(), text + expected);
  }
  // Without an offset (Paris, or local time) too.
  EXPECT_FALSE(ParseKwollectTimeParameter("3000-01-01T00:00").ok());
  EXPECT_FALSE(ParseUserTime("3000-01-01T00:00", 0).ok());
  // Epoch seconds.
  for (const char* text : {"20000000000", "-20000000000", "9223372037", "9223372036.9"}) {
    Result<UnixNanos> t = ParseKwollectTimeParameter(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().message(), text + expected);
    EXPECT_FALSE(ParseUserTime(text, 0).ok()) << text;
  }
  // The edges themselves are read.
  EXPECT_EQ(*ParseKwollectTimeParameter("9223372036"), At(9223372036));
  EXPECT_EQ(ParseIsoTimestamp("2262-04-11T23:47:16Z")->utc, At(9223372036));
  EXPECT_EQ(ParseIsoTimestamp("1677-09-21T00:12:44Z")->utc, At(-9223372036));
  // From a JSON number.
  EXPECT_EQ(*EpochSecondsToNanos(1744995333.754307, "x"), At(1744995333, 754307000));
  for (double bad : {1e30, -1e30, 1e10, double(NAN)}) {
    EXPECT_FALSE(EpochSecondsToNanos(bad, "t").ok()) << bad;
  }
}

TEST(FormatEpochSeconds, SixDecimals) {
  EXPECT_EQ(FormatEpochSeconds(At(1744995333, 754307000)), "1744995333.754307");
  EXPECT_EQ(FormatEpochSeconds(At(1744995333)), "1744995333.000000");
  EXPECT_EQ(FormatEpochSeconds(At(-2, 500000000)), "-2.500000");
}

}  // namespace
}  // namespace kwatt::time_test
