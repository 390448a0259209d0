// Testbed::Build from a testbed description file (doc/store.md): what it serves, and what it
// refuses, naming the file and the place.
#include "kwatt/simulate/testbed.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "src/testing/temp_dir.h"

namespace kwatt::simulate::testbed_test {
namespace {

class DescriptionTest : public ::testing::Test {
 protected:
  Result<std::unique_ptr<Testbed>> Build(const std::string& text) {
    path_ = (dir_.root() / "lab.yaml").string();
    std::ofstream(path_) << text;
    Testbed::Options options;
    options.description_file = path_;
    return Testbed::Build(options, jobs::JobSet());
  }
  std::string Error(const std::string& text) {
    Result<std::unique_ptr<Testbed>> built = Build(text);
    EXPECT_FALSE(built.ok());
    if (built.ok()) return "";
    EXPECT_EQ(built.status().code(), Status::Code::kInvalidArgument) << built.status().ToString();
    EXPECT_EQ(built.status().message().rfind(path_ + ":", 0), 0u) << built.status().message();
    return built.status().message().substr(path_.size() + 2);
  }

  kwatt::testing::TempDir dir_;
  std::string path_;
};

constexpr const char* kLab = R"(sites:
  - uid: mylab
    name: My lab
    clusters:
      - uid: rack
        model: Dell PowerEdge R640
        nodes: [rack-1, rack-2]
        metrics:
          - name: wattmetre_power_watt
            description: Power of the node from its wattmeter, in watt
            period: 1000
            optional_period: 20
            source: {protocol: wattmetre}
          - name: bmc_node_power_watt
            period: 5000
            only_for: [rack-2]
            source: {protocol: ipmisensor}
      - uid: gpu
        nodes: [gpu-1]
)";

TEST_F(DescriptionTest, SitesClustersNodesAndCataloguesAreTheDescriptions) {
  Result<std::unique_ptr<Testbed>> built = Build(kLab);
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  const Testbed& testbed = **built;
  ASSERT_EQ(testbed.sites().size(), 1u);
  const Site& site = *testbed.sites()[0];
  EXPECT_EQ(site.uid, "mylab");
  EXPECT_EQ(site.name, "My lab");
  ASSERT_EQ(site.clusters.size(), 2u);
  const Cluster& rack = *site.clusters[0];
  EXPECT_EQ(rack.uid, "rack");
  EXPECT_EQ(rack.model, "Dell PowerEdge R640");
  ASSERT_EQ(rack.nodes.size(), 2u);
  EXPECT_EQ(rack.nodes[1]->uid, "rack-2");
  ASSERT_EQ(rack.catalogue.entries().size(), 2u);
  EXPECT_EQ(rack.catalogue.entries()[0].optional_period_ms, 20);
  EXPECT_EQ(rack.catalogue.MetricsOf("rack-1").size(), 1u);  // only_for
  EXPECT_EQ(rack.catalogue.MetricsOf("rack-2").size(), 2u);
  EXPECT_TRUE(site.clusters[1]->catalogue.entries().empty());
  EXPECT_NE(testbed.FindNode(site, "gpu-1"), nullptr);
  EXPECT_EQ(testbed.FindSite("lyon"), nullptr);  // Grid'5000's are not served
}

TEST_F(DescriptionTest, WhatIsWrongIsNamedWithItsPlace) {
  EXPECT_EQ(Error("clusters: []\n"),
            "the description should have \"sites\": a list of sites, each with its clusters");
  EXPECT_EQ(Error("sites:\n  - uid: My Lab\n    clusters: [{uid: rack, nodes: [rack-1]}]\n"),
            "sites[0].uid should be lowercase letters and digits, e.g. \"mylab\"");
  EXPECT_EQ(Error("sites:\n  - uid: lab\n"), "sites[0].clusters should be a list of clusters");
  EXPECT_EQ(Error("sites:\n  - uid: lab\n    clusters: [{uid: rack, nodes: [node-1]}]\n"),
            "sites[0].clusters[0].nodes[0] should be the cluster's uid, '-' and a number "
            "(\"rack-1\"), not \"node-1\"");
  EXPECT_EQ(Error("sites:\n  - uid: lab\n    clusters: [{uid: rack, nodes: [rack-1, rack-1]}]\n"),
            "sites[0].clusters[0].nodes[1] \"rack-1\" is given twice");
  EXPECT_EQ(Error("sites:\n  - uid: lab\n    clusters:\n      - {uid: rack, nodes: [rack-1]}\n"
                  "      - {uid: rack, nodes: [rack-2]}\n"),
            "sites[0].clusters[1].uid \"rack\" is given twice");
  std::string period = Error(
      "sites:\n  - uid: lab\n    clusters:\n      - uid: rack\n        nodes: [rack-1]\n"
      "        metrics: [{name: p, period: fast}]\n");
  EXPECT_EQ(period.rfind("sites[0].clusters[0].metrics: catalogue entry \"p\"", 0), 0u) << period;
  std::string yaml = Error("sites: [\n");
  EXPECT_NE(yaml.find("not YAML"), std::string::npos) << yaml;
  Testbed::Options missing;
  missing.description_file = (dir_.root() / "none.yaml").string();
  EXPECT_EQ(Testbed::Build(missing, jobs::JobSet()).status().code(), Status::Code::kNotFound);
}

// The jobs file's sites, nodes and outage devices must exist on the simulated testbed; what does
// not is named by its place in the file. An outage on an unknown device silenced nothing.
TEST(TestbedJobs, UnknownSitesNodesAndDevicesAreNamedByTheirPlace) {
  auto error = [](const std::string& text) -> std::string {
    Result<jobs::JobSet> jobs = jobs::JobSet::Parse(text, "f.json");
    EXPECT_TRUE(jobs.ok()) << jobs.status().ToString();
    if (!jobs.ok()) return "";
    Result<std::unique_ptr<Testbed>> built = Testbed::Build({}, std::move(*jobs));
    if (built.ok()) return "OK";
    EXPECT_EQ(built.status().code(), Status::Code::kInvalidArgument);
    return built.status().message();
  };
  std::string site =
      error(R"({"jobs":[{"site":"lyonx","uid":1,"nodes":["nova-1"],"started_at":1}]})");
  EXPECT_EQ(site.rfind("jobs file f.json: jobs[0].site = \"lyonx\" is not a site of the simulated "
                       "testbed (sites: ",
                       0),
            0u)
      << site;
  EXPECT_NE(site.find(" lyon,"), std::string::npos) << site;
  EXPECT_EQ(
      error(R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1","nova-99"],"started_at":1}]})"),
      "jobs file f.json: jobs[0].nodes[1]: no node \"nova-99\" on site lyon (clusters: see GET "
      "/sites/lyon/clusters)");
  // A typo is named with the node it looks like.
  EXPECT_EQ(
      error(R"({"jobs":[{"site":"lyon","uid":1,"nodes":["nova-1","novaa-14"],"started_at":1}]})"),
      "jobs file f.json: jobs[0].nodes[1]: no node \"novaa-14\" on site lyon (did you mean "
      "nova-14?) (clusters: see GET /sites/lyon/clusters)");
  EXPECT_EQ(error(R"({"outages":[{"site":"lyon","device":"nova-1","start":1,"end":2},
                     {"site":"lyon","device":"watmetre1-port13","start":1,"end":2}]})"),
            "jobs file f.json: outages[1].device = \"watmetre1-port13\" is not a device of site "
            "lyon (did you mean wattmetre1-port13?): give a node uid (nova-1) or the device_id "
            "of a wattmeter port, PDU outlet or switch port of the site");
  // Two devices as near as each other: no guess.
  EXPECT_EQ(
      error(R"({"outages":[{"site":"lyon","device":"wattmetre1-port99","start":1,"end":2}]})"),
      "jobs file f.json: outages[0].device = \"wattmetre1-port99\" is not a device of site "
      "lyon: give a node uid (nova-1) or the device_id of a wattmeter port, PDU outlet or "
      "switch port of the site");
  std::string outage_site =
      error(R"({"outages":[{"site":"lyonx","device":"nova-1","start":1,"end":2}]})");
  EXPECT_EQ(outage_site.rfind("jobs file f.json: outages[0].site = \"lyonx\" is not a site of the "
                              "simulated testbed (sites: ",
                              0),
            0u)
      << outage_site;
  EXPECT_EQ(
      error(R"({"outages":[{"site":"lyon","device":"wattmetre1-port13","start":1,"end":2}]})"),
      "OK");
  // A fault's device likewise.
  EXPECT_EQ(error(R"({"faults":[{"site":"lyon","device":"nova-1","bias":1},
                     {"site":"lyon","device":"watmetre1-port13","scale":2}]})"),
            "jobs file f.json: faults[1].device = \"watmetre1-port13\" is not a device of site "
            "lyon (did you mean wattmetre1-port13?): give a node uid (nova-1) or the device_id "
            "of a wattmeter port, PDU outlet or switch port of the site");
  EXPECT_EQ(error(R"({"faults":[{"site":"lyon","device":"wattmetre1-port13","late":3}]})"), "OK");
}

}  // namespace
}  // namespace kwatt::simulate::testbed_test
