#include "src/core/yaml_json.h"

#include <gtest/gtest.h>

#include <string>

namespace kwatt::internal {
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
  EXPECT_NE(key.status().message().find("a key should be a plain name"), std::string::npos);
  Result<std::string> documents = YamlToJson("a: 1\n---\nb: 2\n", "f.yaml");
  EXPECT_EQ(documents.status().message(), "f.yaml: holds 2 YAML documents (---); give one");
}

}  // namespace
}  // namespace kwatt::internal
