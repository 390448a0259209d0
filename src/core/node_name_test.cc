#include "kwatt/core/node_name.h"

#include <gtest/gtest.h>

namespace kwatt::node_name_test {
namespace {

TEST(ParseNodeName, EveryFormUsersWrite) {
  for (const char* text : {"nova-1.lyon.grid5000.fr", "nova-1.lyon", "nova-1-kavlan-4.lyon",
                           "nova-1-kavlan-4.lyon.grid5000.fr", "nova-1-ipv6.lyon.grid5000.fr",
                           "nova-1-kavlan-12-ipv6.lyon.grid5000.fr", " nova-1.lyon.grid5000.fr. ",
                           // DNS names are case-insensitive.
                           "NOVA-1.LYON.GRID5000.FR", "nova-1.LYON", "Nova-1.Lyon.Grid5000.Fr"}) {
    auto node = ParseNodeName(text);
    ASSERT_TRUE(node.ok()) << text << ": " << node.status().ToString();
    EXPECT_EQ(node->uid, "nova-1") << text;
    EXPECT_EQ(node->site, "lyon") << text;
  }
  EXPECT_EQ(ParseNodeName("gros-41.nancy")->Fqdn(), "gros-41.nancy.grid5000.fr");
  EXPECT_EQ(ParseNodeName("gros-41.nancy")->Cluster(), "gros");
  EXPECT_EQ(ParseNodeName("abacus1-3.rennes")->Cluster(), "abacus1");
}

TEST(ParseNodeName, RefusesWithAHint) {
  auto bare = ParseNodeName("nova-1");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("nova-1.SITE"), std::string::npos);
  EXPECT_FALSE(ParseNodeName("nova-1.lyon.example.org").ok());
  EXPECT_FALSE(ParseNodeName("").ok());
  EXPECT_FALSE(ParseNodeName("nova 1.lyon").ok());
}

TEST(ParseNodeName, RefusesAnEmptyUidOrCluster) {
  // "-ipv6" is a suffix only: without it nothing is left, and "-1" has no cluster before its
  // number. Either would ask the API for "/clusters/".
  for (const char* text :
       {"-ipv6.lyon", "-ipv6.lyon.grid5000.fr", "-1.lyon", "-kavlan-4-ipv6.lyon"}) {
    auto node = ParseNodeName(text);
    ASSERT_FALSE(node.ok()) << text << " gave uid \"" << node->uid << "\"";
    EXPECT_EQ(node.status().code(), Status::Code::kInvalidArgument) << text;
    EXPECT_NE(node.status().message().find(text), std::string::npos) << node.status().message();
  }
}

TEST(ParseNodeList, KeepsOrderDropsDuplicates) {
  auto nodes = ParseNodeList("yeti-1.grenoble, nova-1.lyon,nova-1-kavlan-4.lyon.grid5000.fr,,");
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].uid, "yeti-1");
  EXPECT_EQ((*nodes)[1].uid, "nova-1");
  EXPECT_FALSE(ParseNodeList(" , ").ok());
}

}  // namespace
}  // namespace kwatt::node_name_test
