#include "kwatt/core/text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kwatt::text_test {
namespace {

TEST(ForTerminal, WritesControlCharactersAsEscapesAndKeepsTheRest) {
  EXPECT_EQ(ForTerminal("package-0"), "package-0");
  EXPECT_EQ(ForTerminal("a\x1b[2Jb\x1b]0;title\x07"), "a\\x1b[2Jb\\x1b]0;title\\x07");
  EXPECT_EQ(ForTerminal("line\nnext\ttab\r\x7f"), "line\nnext\ttab\\x0d\\x7f");
  EXPECT_EQ(ForTerminal("\xc2\x9b"
                        "31m caf\xc3\xa9 \xc2\xa0"),
            "\\u009b"
            "31m caf\xc3\xa9 \xc2\xa0");
  EXPECT_EQ(ForTerminal(std::string("nul\0z", 5)), "nul\\x00z");
}

TEST(SplitCommaList, DropsSpacesAndEmptyItems) {
  EXPECT_EQ(SplitCommaList(" a, b,,c ,"), (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_TRUE(SplitCommaList("").empty());
}

TEST(UrlWithoutCredentials, RemovesTheWholeUserinfo) {
  EXPECT_EQ(UrlWithoutCredentials("https://alice:secret@api.grid5000.fr/stable"),
            "https://api.grid5000.fr/stable");
  // A password holding '@' (and ':'): the userinfo ends at the authority's last '@'.
  EXPECT_EQ(UrlWithoutCredentials("http://bob:p@ss:w@rd@127.0.0.1:8080/stable/sites"),
            "http://127.0.0.1:8080/stable/sites");
  EXPECT_EQ(UrlWithoutCredentials("http://user@host/stable"), "http://host/stable");
  EXPECT_EQ(UrlWithoutCredentials("http://u:p@host"), "http://host");
  EXPECT_EQ(UrlWithoutCredentials("http://u:p@host?x=1"), "http://host?x=1");
}

TEST(UrlWithoutCredentials, LeavesOtherTextAlone) {
  EXPECT_EQ(UrlWithoutCredentials("https://api.grid5000.fr/stable"),
            "https://api.grid5000.fr/stable");
  // An '@' after the authority is part of the path or the query, not a userinfo.
  EXPECT_EQ(UrlWithoutCredentials("http://host/stable/a@b"), "http://host/stable/a@b");
  EXPECT_EQ(UrlWithoutCredentials("http://host?mail=a@b"), "http://host?mail=a@b");
  EXPECT_EQ(UrlWithoutCredentials("not a url @ all"), "not a url @ all");
  EXPECT_EQ(UrlWithoutCredentials(""), "");
}

TEST(UrlCredentials, SplitsAndDecodes) {
  std::string user, password;
  ASSERT_TRUE(UrlCredentials("https://al%40ice:p@ss%3Aw@api.example/stable", &user, &password));
  EXPECT_EQ(user, "al@ice");
  EXPECT_EQ(password, "p@ss:w");
  ASSERT_TRUE(UrlCredentials("http://bob@host/", &user, &password));
  EXPECT_EQ(user, "bob");
  EXPECT_EQ(password, "");
  // A '%' not followed by two hex digits stays as it is.
  ASSERT_TRUE(UrlCredentials("http://u:100%@host/", &user, &password));
  EXPECT_EQ(password, "100%");
  EXPECT_FALSE(UrlCredentials("http://host/stable", &user, &password));
  EXPECT_FALSE(UrlCredentials("http://host/a@b", &user, &password));
}

TEST(AppendCsvField, QuotesOnlyWhatNeedsIt) {
  std::string out;
  AppendCsvField(&out, "plain");
  out += '|';
  AppendCsvField(&out, "a,b");
  out += '|';
  AppendCsvField(&out, "say \"hi\"");
  out += '|';
  AppendCsvField(&out, "two\nlines");
  out += '|';
  AppendCsvField(&out, "");
  EXPECT_EQ(out, "plain|\"a,b\"|\"say \"\"hi\"\"\"|\"two\nlines\"|");
}

// Issue 21 #21: numbers in CSV are the shortest text that reads back to the same double.
TEST(AppendCsvNumber, ShortestTextThatRoundTripsAndNothingWhenNotFinite) {
  std::string out;
  for (double v : {68.55, 0.1 + 0.2, 98.0, -0.5, 1e20, double(NAN), double(INFINITY)}) {
    AppendCsvNumber(&out, v);
    out += '|';
  }
  EXPECT_EQ(out, "68.55|0.30000000000000004|98|-0.5|1e+20|||");
}

TEST(AppendPrometheusLabelValue, EscapesBackslashQuoteAndLineFeed) {
  std::string out;
  AppendPrometheusLabelValue(&out, "C:\\x \"y\"\nz\t");
  EXPECT_EQ(out, "C:\\\\x \\\"y\\\"\\nz\t");
}

TEST(EditDistance, CountsInsertionsDeletionsAndSubstitutions) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("phases", "phasess"), 1u);
  EXPECT_EQ(EditDistance("wattmetre_power_wat", "wattmetre_power_watt"), 1u);
  EXPECT_EQ(EditDistance("cpus", "cpu"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
}

TEST(ShellQuoted, QuotesWhatAShellWouldRead) {
  EXPECT_EQ(ShellQuoted("http://127.0.0.1:8080/stable"), "http://127.0.0.1:8080/stable");
  EXPECT_EQ(ShellQuoted("http://$(id)/stable"), "'http://$(id)/stable'");
  EXPECT_EQ(ShellQuoted("a b"), "'a b'");
  EXPECT_EQ(ShellQuoted("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellQuoted("`x`;y|z&"), "'`x`;y|z&'");
  EXPECT_EQ(ShellQuoted(""), "''");
}

}  // namespace
}  // namespace kwatt::text_test
