#include "kwatt/core/prometheus_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kwatt {
namespace {

TEST(PrometheusWriter, FamiliesAndSamplesAsTheTextFormatSays) {
  std::string out;
  AppendPrometheusFamily(&out, "kwatt_x_total", "counter", "What \\ it counts,\nin two lines.");
  AppendPrometheusSample(&out, "kwatt_x_total", {{"device", "a \"b\" \\ c\nd"}, {"empty", ""}},
                         1.5);
  AppendPrometheusSample(&out, "kwatt_x_total", {}, 1e21);
  AppendPrometheusSample(&out, "kwatt_y", {{"k", "v"}}, std::nan(""));
  AppendPrometheusSample(&out, "kwatt_y", {}, std::numeric_limits<double>::infinity());
  AppendPrometheusSample(&out, "kwatt_y", {}, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(out,
            "# HELP kwatt_x_total What \\\\ it counts,\\nin two lines.\n"
            "# TYPE kwatt_x_total counter\n"
            "kwatt_x_total{device=\"a \\\"b\\\" \\\\ c\\nd\"} 1.5\n"
            "kwatt_x_total 1e+21\n"
            "kwatt_y{k=\"v\"} NaN\n"
            "kwatt_y +Inf\n"
            "kwatt_y -Inf\n");
}

}  // namespace
}  // namespace kwatt
