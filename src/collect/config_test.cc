#include "kwatt/collect/config.h"

#include <gtest/gtest.h>

#include <fstream>

#include "src/testing/temp_dir.h"

namespace kwatt::collect::config_test {
namespace {

std::string ErrorOf(std::string_view yaml) {
  Result<std::vector<MetricDescription>> metrics = ParseMetricDescriptions(yaml, "conf/pdu.yaml");
  EXPECT_FALSE(metrics.ok());
  return metrics.ok() ? "" : metrics.status().message();
}

TEST(ParseMetricUrl, SplitsEveryPart) {
  Result<MetricUrl> url =
      ParseMetricUrl("ipmisensor://ad%40min:p%3Ass:w@bmc-1.lab:6230/Power Meter");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->scheme, "ipmisensor");
  EXPECT_EQ(url->user, "ad@min");
  EXPECT_EQ(url->password, "p:ss:w");
  EXPECT_EQ(url->host, "bmc-1.lab");
  EXPECT_EQ(url->port, 6230);
  EXPECT_EQ(url->path, "Power Meter");
  EXPECT_EQ(url->Redacted(), "ipmisensor://ad@min:***@bmc-1.lab:6230/Power Meter");
  Result<MetricUrl> snmp = ParseMetricUrl(
      "snmp://secret@pdu/1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == TenGigabitEthernet "
      "0/25 }}");
  ASSERT_TRUE(snmp.ok());
  EXPECT_EQ(snmp->user, "secret");
  EXPECT_EQ(snmp->port, 0);
  EXPECT_EQ(snmp->path,
            "1.3.6.1.2.1.31.1.1.1.6.{{ 1.3.6.1.2.1.31.1.1.1.1 == TenGigabitEthernet 0/25 }}");
  EXPECT_EQ(snmp->Redacted().find("secret"), std::string::npos) << snmp->Redacted();
  Result<MetricUrl> json = ParseMetricUrl("json://[::1]:8080/status.json?x=1#/power/0");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(json->host, "::1");
  EXPECT_EQ(json->query, "x=1");
  EXPECT_EQ(json->fragment, "/power/0");
  EXPECT_EQ(json->Redacted(), "json://[::1]:8080/status.json?x=1#/power/0");
}

TEST(ParseMetricUrl, RefusesWhatIsNotAUrlWithoutShowingThePassword) {
  EXPECT_NE(ParseMetricUrl("pdu-1/1.3.6").status().message().find("is not a URL"),
            std::string::npos);
  EXPECT_NE(ParseMetricUrl("modbus://pdu/1").status().message().find("no driver"),
            std::string::npos);
  std::string bad_port = ParseMetricUrl("ipmisensor://u:hunter2@bmc:99999/x").status().message();
  EXPECT_NE(bad_port.find("1 to 65535"), std::string::npos);
  EXPECT_EQ(bad_port.find("hunter2"), std::string::npos);
  EXPECT_NE(ParseMetricUrl("snmp://public@/1.3").status().message().find("no host"),
            std::string::npos);
  EXPECT_NE(ParseMetricUrl("snmp://public@pdu/1.%G3").status().message().find("hexadecimal"),
            std::string::npos);
}

TEST(ParseMetricDescriptions, ReadsKwollectsFormat) {
  Result<std::vector<MetricDescription>> metrics = ParseMetricDescriptions(R"(
- name: pdu_outlet_power_watt
  device_id: gros-pdu2-port-1
  url: snmp://public@gros-pdu2/1.3.6.1.4.1.13742.6.5.4.3.1.4.1.1.5
  update_every: 1000
  scale_factor: 0.1
  labels: {_device_alias: gros-1, psu: 1}
- name: bmc_node_power_watt
  device_id: gros-1
  url: ipmisensor://admin:pw@gros-1-bmc/Power
  optional: true
)",
                                                                           "conf/pdu.yaml");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  ASSERT_EQ(metrics->size(), 2u);
  const MetricDescription& pdu = (*metrics)[0];
  EXPECT_EQ(pdu.name, "pdu_outlet_power_watt");
  EXPECT_EQ(pdu.update_every_ms, 1000);
  EXPECT_EQ(pdu.scale_factor, 0.1);
  EXPECT_EQ(pdu.device_alias, "gros-1");
  EXPECT_EQ(LabelsText(pdu.labels), R"({"psu":1,"_device_alias":"gros-1"})");
  EXPECT_EQ(pdu.origin, "conf/pdu.yaml, entry 1");
  const MetricDescription& bmc = (*metrics)[1];
  EXPECT_EQ(bmc.update_every_ms, 10000);  // Kwollect's default
  EXPECT_TRUE(bmc.optional);
  EXPECT_EQ(bmc.PeriodMs(), 10000);
  EXPECT_EQ(bmc.url.password, "pw");
  // One mapping alone is one description; an empty file none.
  Result<std::vector<MetricDescription>> one =
      ParseMetricDescriptions("name: m\ndevice_id: d\nurl: prometheus://h:9100/\n", "one.yaml");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].origin, "one.yaml");
  EXPECT_TRUE(ParseMetricDescriptions("", "empty.yaml")->empty());
}

TEST(ParseMetricDescriptions, ErrorsNameTheFileTheEntryAndTheField) {
  EXPECT_EQ(ErrorOf("- {name: a, device_id: d, url: 'prometheus://h/', update_every: 0.5}"),
            "conf/pdu.yaml, entry 1: update_every should be a whole number of milliseconds from "
            "1 to 86400000, not 0.5");
  EXPECT_EQ(ErrorOf("- {name: a, device_id: d, url: 'prometheus://h/'}\n"
                    "- {name: b, device_id: d, url: 'prometheus://h/', every: 5}"),
            "conf/pdu.yaml, entry 2: every is not a field of a metric description (name, "
            "device_id, url, update_every, optional, optional_period, labels, scale_factor; "
            "command and mapping for wattmetre://)");
  EXPECT_EQ(ErrorOf("- {name: a, url: 'prometheus://h/'}"),
            "conf/pdu.yaml, entry 1 has no device_id (a metric description needs name, device_id "
            "and url)");
  std::string url = ErrorOf("- {name: a, device_id: d, url: 'ipmisensor://u:hunter2@h:0/x'}");
  EXPECT_EQ(url.rfind("conf/pdu.yaml, entry 1: url: has the port '0'", 0), 0u) << url;
  EXPECT_EQ(url.find("hunter2"), std::string::npos);
  EXPECT_EQ(ErrorOf("- {name: a, device_id: d, url: 'prometheus://h/', labels: [x]}"),
            "conf/pdu.yaml, entry 1: labels should be a mapping of label names to values, not a "
            "list");
  EXPECT_EQ(ErrorOf("- {name: a, device_id: d, url: 'prometheus://h/', optional: yes}"),
            "conf/pdu.yaml, entry 1: optional should be true or false, not \"yes\"");
  EXPECT_EQ(ErrorOf("- {name: a, device_id: d, url: 'prometheus://h/', command: [x]}"),
            "conf/pdu.yaml, entry 1: command is only for wattmetre:// (a wattmeter's line stream)");
  EXPECT_EQ(ErrorOf("[1, 2]"),
            "conf/pdu.yaml, entry 1 should be a mapping of name, device_id, url..., not a number");
  EXPECT_EQ(ErrorOf("- {name: '', device_id: d, url: 'prometheus://h/'}"),
            "conf/pdu.yaml, entry 1: name is empty");
}

TEST(ParseMetricDescriptions, WattmetreStreamsTakeACommandOrAPathAndAMapping) {
  Result<std::vector<MetricDescription>> metrics =
      ParseMetricDescriptions(R"(
- name: wattmetre_power_watt
  device_id: wattmetre1
  url: wattmetre://wattmetre1/?version=2
  command: [kwatt, simulate, wattmetre, --rate, 50]
  mapping: maps/wattmetre1.yaml
)",
                              "/etc/kwatt/metrics/wattmetre.yaml");
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  EXPECT_EQ((*metrics)[0].command,
            (std::vector<std::string>{"kwatt", "simulate", "wattmetre", "--rate", "50"}));
  EXPECT_EQ((*metrics)[0].mapping_file, "/etc/kwatt/metrics/maps/wattmetre1.yaml");
  EXPECT_EQ((*metrics)[0].url.query, "version=2");
  EXPECT_NE(
      ErrorOf("- {name: w, device_id: w, url: 'wattmetre://w1/'}").find("should name the stream"),
      std::string::npos);
}

TEST(ParseMetricUrl, AQueryOrFragmentRightAfterTheHostIsNotPartOfIt) {
  Result<MetricUrl> url = ParseMetricUrl("wattmetre://wattmetre1?version=2");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "wattmetre1");
  EXPECT_EQ(url->path, "");
  EXPECT_EQ(url->query, "version=2");
  url = ParseMetricUrl("json://h:8080#/watts");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "h");
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->fragment, "/watts");
  url = ParseMetricUrl("wattmetre://w1/dev/ttyUSB0?version=3");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->path, "dev/ttyUSB0");
  EXPECT_EQ(url->query, "version=3");
}

TEST(ParseMetricDescriptions, ADeviceAliasIsOneNodeName) {
  auto error = [](const std::string& text) {
    auto parsed = ParseMetricDescriptions(text, "f.yaml");
    return parsed.ok() ? std::string() : parsed.status().message();
  };
  EXPECT_NE(error("- {name: p, device_id: o, url: 'snmp://c@pdu/1.3', "
                  "labels: {_device_alias: [a, b]}}")
                .find("f.yaml, entry 1: labels: _device_alias should be the device id of one "
                      "node (nova-1), not a list"),
            std::string::npos);
  EXPECT_NE(error("- {name: p, device_id: o, url: 'snmp://c@pdu/1.3', labels: {_device_alias: "
                  "''}}")
                .find("not empty"),
            std::string::npos);
  EXPECT_EQ(error("- {name: p, device_id: o, url: 'snmp://c@pdu/1.3', labels: {_device_alias: "
                  "nova-1}}"),
            "");
}

TEST(LabelsText, OrdersKeysAsJsonbAndKeepsTheLastValue) {
  EXPECT_EQ(LabelsText({}), "{}");
  EXPECT_EQ(LabelsText(
                {{"interface", "\"eth1\""}, {"_device_orig", "[\"a\"]"}, {"id", "2"}, {"id", "3"}}),
            R"({"id":3,"interface":"eth1","_device_orig":["a"]})");
}

TEST(ReadCollectConfig, ReadsEveryFileInNameOrderAndRefusesDuplicates) {
  kwatt::testing::TempDir dir;
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir.root() / name) << text;
  };
  write("b.yaml", "- {name: m, device_id: b, url: 'prometheus://h:1/'}\n");
  write("a", "- {name: m, device_id: a, url: 'prometheus://h:1/'}\n");
  write(".hidden", "garbage: [");
  write("a.yaml~", "garbage: [");
  write("empty.yaml", "");
  Result<CollectConfig> config = ReadCollectConfig(dir.root().string());
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  ASSERT_EQ(config->metrics.size(), 2u);
  EXPECT_EQ(config->metrics[0].device_id, "a");
  EXPECT_EQ(config->files.size(), 3u);
  write("c.yaml", "- {name: m, device_id: a, url: 'snmp://public@pdu/1.3.6.1'}\n");
  Result<CollectConfig> twice = ReadCollectConfig(dir.root().string());
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("c.yaml, entry 1 writes the same series as"),
            std::string::npos)
      << twice.status().message();
  // The same description twice would double a node's row.
  write(
      "c.yaml",
      "- {name: p, device_id: o, url: 'snmp://public@pdu/1.3.6.1', labels: {_device_alias: n}}\n"
      "- {name: p, device_id: o, url: 'snmp://public@pdu/1.3.6.1', labels: {_device_alias: n}}\n");
  Result<CollectConfig> identical = ReadCollectConfig(dir.root().string());
  ASSERT_FALSE(identical.ok());
  EXPECT_NE(identical.status().message().find(
                "c.yaml, entry 2 reads the same series from the same URL as "),
            std::string::npos)
      << identical.status().message();
  EXPECT_NE(identical.status().message().find("c.yaml, entry 1 (device o"), std::string::npos);
  write("c.yaml", "- {name: m, device_id: a, url: 'snmp://public@pdu/1.3.6.1' broken\n");
  Result<CollectConfig> broken = ReadCollectConfig(dir.root().string());
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("c.yaml"), std::string::npos);
  EXPECT_EQ(ReadCollectConfig((dir.root() / "none").string()).status().code(),
            Status::Code::kNotFound);
  kwatt::testing::TempDir empty;
  EXPECT_NE(ReadCollectConfig(empty.root().string()).status().message().find("no metric"),
            std::string::npos);
}

}  // namespace
}  // namespace kwatt::collect::config_test
