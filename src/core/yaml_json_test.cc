#include "kwatt/core/yaml_json.h"

#include <gtest/gtest.h>

#include <string>

namespace kwatt::internal::yaml_json_test {
namespace {

std::string Json(std::string_view yaml) {
  Result<std::string> json = YamlToJson(yaml, "f.yaml");
  EXPECT_TRUE(json.ok()) << json.status().ToString();
  return json.ok() ? *json : "";
}

TEST(YamlToJson, ScalarsTakeTheirKinds) {
  EXPECT_EQ(Json("a: 1\nb: -2.5\nc: true\nd: ~\ne: nova-1\nf: '12'\ng: \"true\"\nh:\ni: 1e3\n"),
            R"({"a":1,"b":-2.5,"c":true,"d":null,"e":"nova-1","f":"12","g":"true","h":null,)"
            R"("i":1000.0})");
  EXPECT_EQ(Json("x: .inf\ny: 0x1A\nz: 2025-04-18T14:00:00+02:00\n"),
            R"({"x":".inf","y":"0x1A","z":"2025-04-18T14:00:00+02:00"})");
}

TEST(YamlToJson, NestingKeepsKeyOrderAndJsonReadsAsItself) {
  EXPECT_EQ(Json("sites:\n  - uid: lab\n    clusters: [{uid: rack, nodes: [r-1, r-2]}]\n"),
            R"({"sites":[{"uid":"lab","clusters":[{"uid":"rack","nodes":["r-1","r-2"]}]}]})");
  EXPECT_EQ(Json(R"({"z": [1, {"b": null, "a": "x"}]})"), R"({"z":[1,{"b":null,"a":"x"}]})");
  EXPECT_EQ(Json(""), "null");
}

TEST(YamlToJson, ErrorsNameTheFileAndThePlace) {
  Result<std::string> broken = YamlToJson("a: [1, 2\nb: 3\n", "f.yaml");
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.status().code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(broken.status().message().rfind("f.yaml:", 0), 0u) << broken.status().message();
  EXPECT_NE(broken.status().message().find("not YAML"), std::string::npos);
  Result<std::string> twice = YamlToJson("a: 1\nb: 2\na: 3\n", "f.yaml");
  EXPECT_EQ(twice.status().message(), "f.yaml:3:1: \"a\" is given twice");
  Result<std::string> key = YamlToJson("? [1, 2]\n: x\n", "f.yaml");
  EXPECT_EQ(key.status().message(), "f.yaml:1:3: a key should be a plain name");
  Result<std::string> documents = YamlToJson("a: 1\n---\nb: 2\n", "f.yaml");
  EXPECT_EQ(documents.status().message(),
            "f.yaml: holds more than one YAML document (---); give one");
  Result<std::string> alias = YamlToJson("a: *nothing\n", "f.yaml");
  EXPECT_EQ(alias.status().message(), "f.yaml:1:4: *nothing names no anchor");
}

TEST(YamlToJson, AliasesAreCopiedWithinBounds) {
  EXPECT_EQ(Json("base: &m {name: p, period: 1000}\nuse: [*m, *m]\n"),
            R"({"base":{"name":"p","period":1000},"use":[{"name":"p","period":1000},)"
            R"({"name":"p","period":1000}]})");
  // "Billion laughs": aliases of aliases, 10^9 values once expanded.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'i'; ++c) {
    bomb += std::string(1, c) + ": &" + c + " [";
    for (int i = 0; i < 10; ++i) bomb += std::string(i ? ", *" : "*") + char(c - 1);
    bomb += "]\n";
  }
  Result<std::string> refused = YamlToJson(bomb, "f.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("more than 1000000 values"), std::string::npos)
      << refused.status().message();
  std::string deep(100, '[');
  EXPECT_NE(YamlToJson(deep, "f.yaml").status().message().find("levels deep"), std::string::npos);
}

// Found by the testbed_description fuzzer: yaml-cpp 0.7 never returned on these 20 bytes.
TEST(YamlToJson, AnInputThatHungTheFormerParserIsRefused) {
  std::string input = ",, in ba{\xbbt2s: \"a~e:";
  Result<std::string> refused = YamlToJson(input, "f.yaml");
  EXPECT_EQ(refused.status().code(), Status::Code::kInvalidArgument);
}

}  // namespace
}  // namespace kwatt::internal::yaml_json_test
