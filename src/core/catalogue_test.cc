#include "kwatt/core/catalogue.h"

#include <gtest/gtest.h>

namespace kwatt::catalogue_test {
namespace {

constexpr const char* kCluster = R"({"uid":"gros","metrics":[
 {"name":"wattmetre_power_watt","period":1000,"optional_period":20,
  "source":{"protocol":"wattmetre"},"only_for":["gros-41","gros-42"]},
 {"name":"bmc_fan_speed_rpm","labels":{"fan":"4a"},"period":0,"optional_period":5000,
  "source":{"protocol":"snmp","id":"1.3.6"}},
 {"name":"prom_default_metrics","period":0,"optional_period":15000,
  "source":{"protocol":"prometheus","port":9100,"id":["node_load1","node_cpu_seconds_total"]}},
 {"name":"prom_all_metrics","period":0,"optional_period":15000,
  "source":{"protocol":"prometheus","port":9100}}]})";

TEST(Catalogue, ExpandsAndRestricts) {
  auto catalogue = Catalogue::FromJson(kCluster);
  ASSERT_TRUE(catalogue.ok()) << catalogue.status().ToString();
  ASSERT_EQ(catalogue->entries().size(), 4u);
  EXPECT_EQ(catalogue->entries()[0].optional_period_ms, 20);
  EXPECT_EQ(catalogue->entries()[1].labels[0].second, "4a");

  std::vector<std::string> ids;
  for (const auto& m : catalogue->MetricsOf("gros-41")) ids.push_back(m.metric_id);
  EXPECT_EQ(ids, (std::vector<std::string>{"wattmetre_power_watt", "bmc_fan_speed_rpm",
                                           "prom_node_load1", "prom_node_cpu_seconds_total"}));
  ids.clear();
  for (const auto& m : catalogue->MetricsOf("gros-1")) ids.push_back(m.metric_id);
  EXPECT_EQ(ids.front(), "bmc_fan_speed_rpm");  // only_for leaves gros-1 without a wattmeter
}

TEST(Catalogue, AFieldOfTheWrongTypeIsCorruptionNamingItNotAnException) {
  for (const char* text :
       {R"([{"name":"m1","description":42}])", R"([{"name":"m1","description":["a"]}])",
        R"([{"name":"m1","source":{"protocol":7}}])",
        R"([{"name":"m1","source":{"protocol":{"x":1}}}])"}) {
    Result<Catalogue> catalogue = Status::OK();
    EXPECT_NO_THROW(catalogue = Catalogue::FromJson(text)) << text;
    ASSERT_FALSE(catalogue.ok()) << text;
    EXPECT_EQ(catalogue.status().code(), Status::Code::kCorruption) << text;
    EXPECT_NE(catalogue.status().message().find("m1"), std::string::npos)
        << catalogue.status().message();
    EXPECT_TRUE(catalogue.status().message().find("description") != std::string::npos ||
                catalogue.status().message().find("protocol") != std::string::npos)
        << catalogue.status().message();
  }
  // null is an absent field.
  auto nulls =
      Catalogue::FromJson(R"([{"name":"m1","description":null,"source":{"protocol":null}}])");
  ASSERT_TRUE(nulls.ok()) << nulls.status().ToString();
  EXPECT_EQ(nulls->entries()[0].description, "");
  EXPECT_EQ(nulls->entries()[0].protocol, "");
}

TEST(Catalogue, APeriodOutOfRangeIsCorruptionNamingIt) {
  for (const char* text :
       {R"([{"name":"m1","period":1e30}])", R"([{"name":"m1","period":-20}])",
        R"([{"name":"m1","optional_period":0.5}])", R"([{"name":"m1","optional_period":"20"}])"}) {
    Result<Catalogue> catalogue = Catalogue::FromJson(text);
    ASSERT_FALSE(catalogue.ok()) << text;
    EXPECT_EQ(catalogue.status().code(), Status::Code::kCorruption) << text;
    EXPECT_NE(catalogue.status().message().find("catalogue entry \"m1\": field \""),
              std::string::npos)
        << catalogue.status().message();
  }
  auto whole = Catalogue::FromJson(R"([{"name":"m1","period":1000.0,"optional_period":null}])");
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_EQ(whole->entries()[0].period_ms, 1000);
  EXPECT_EQ(whole->entries()[0].optional_period_ms, 0);
}

TEST(Catalogue, KeepsTheMetricsArrayItWasReadFrom) {
  auto cluster = Catalogue::FromJson(R"({"uid":"c","metrics":[{"name":"m1", "period":20}]})");
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->json(), R"([{"name":"m1","period":20}])");
  auto again = Catalogue::FromJson(cluster->json());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->json(), cluster->json());
  EXPECT_EQ(Catalogue().json(), "[]");
  ClusterCatalogues all{{"lyon/c", *cluster}};
  EXPECT_EQ(FindCatalogue(all, "lyon/c"), &all[0].catalogue);
  EXPECT_EQ(FindCatalogue(all, "lyon/d"), nullptr);
}

TEST(Catalogue, KeepsTheClustersModelWhenTheObjectNamesIt) {
  auto cluster = Catalogue::FromJson(
      R"({"uid":"nova","model":"Dell PowerEdge R430","metrics":[{"name":"m1"}]})");
  ASSERT_TRUE(cluster.ok());
  EXPECT_EQ(cluster->model(), "Dell PowerEdge R430");
  // A bare metrics array (an archive's) has none, nor an object without one, nor a non-string.
  EXPECT_EQ(Catalogue::FromJson(cluster->json())->model(), "");
  EXPECT_EQ(Catalogue::FromJson(R"({"metrics":[]})")->model(), "");
  EXPECT_EQ(Catalogue::FromJson(R"({"model":3,"metrics":[]})")->model(), "");
}

TEST(Catalogue, RejectsDamagedInput) {
  EXPECT_EQ(Catalogue::FromJson("{").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(Catalogue::FromJson(R"({"uid":"x"})").status().code(), Status::Code::kCorruption);
  EXPECT_EQ(Catalogue::FromJson(R"([{"period":1}])").status().code(), Status::Code::kCorruption);
}

TEST(MonitorEnables, AnchoredAtStartOnly) {
  EXPECT_TRUE(MonitorEnables({"monitor"}, "bmc_fan_speed_rpm"));
  EXPECT_TRUE(MonitorEnables({"deploy", "monitor=wattmetre"}, "wattmetre_power_watt"));
  EXPECT_TRUE(MonitorEnables({"monitor=bmc_.*_temp|wattmetre"}, "wattmetre_power_watt"));
  EXPECT_FALSE(MonitorEnables({"monitor=power"}, "wattmetre_power_watt"));
  EXPECT_FALSE(MonitorEnables({"monitoring"}, "wattmetre_power_watt"));
  EXPECT_FALSE(MonitorEnables({"monitor=("}, "wattmetre_power_watt"));  // invalid regex
  EXPECT_FALSE(MonitorEnables({}, "wattmetre_power_watt"));
}

TEST(JobRunsNodeExporter, NotOnDeployJobs) {
  EXPECT_TRUE(JobRunsNodeExporter({}));
  EXPECT_TRUE(JobRunsNodeExporter({"monitor"}));
  EXPECT_FALSE(JobRunsNodeExporter({"deploy"}));
}

}  // namespace
}  // namespace kwatt::catalogue_test
