#include "api/query_protocol.h"

#include <gtest/gtest.h>

namespace lote::api {
namespace {

TEST(QueryProtocolTest, FormPairsBecomeATreeWithListsInIndexOrder) {
  auto pairs = ParseFormEncoded(
      "Action=DescribePlacementGroups&Version=2016-11-15&Filter.2.Name=state&"
      "Filter.1.Name=strategy&Filter.1.Value.1=cluster&Filter.2.Value.1=available&"
      "LaunchTemplateData.ImageId=ami-1&Name=a+b%2Fc");
  Result<Json> tree = UnflattenQuery(pairs);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_FALSE(tree->contains("Action"));
  EXPECT_EQ((*tree)["Filter"][0]["Name"], "strategy");
  EXPECT_EQ((*tree)["Filter"][0]["Value"], Json::array({"cluster"}));
  EXPECT_EQ((*tree)["Filter"][1]["Name"], "state");
  EXPECT_EQ((*tree)["LaunchTemplateData"]["ImageId"], "ami-1");
  EXPECT_EQ((*tree)["Name"], "a b/c");
}

TEST(QueryProtocolTest, ConflictingOrBadNamesAreClientErrors) {
  EXPECT_TRUE(UnflattenQuery({{"A", "1"}, {"A.B", "2"}}).status().IsInvalidArgument());
  EXPECT_TRUE(UnflattenQuery({{"A.1", "1"}, {"A.B", "2"}}).status().IsInvalidArgument());
  EXPECT_TRUE(UnflattenQuery({{"A.0", "1"}}).status().IsInvalidArgument());
  EXPECT_TRUE(UnflattenQuery({{"A..B", "1"}}).status().IsInvalidArgument());
  EXPECT_TRUE(UnflattenQuery({{"A", "1"}, {"A", "2"}}).status().IsInvalidArgument());
}

TEST(QueryProtocolTest, AnswersAreXmlWithItemsAndEscapes) {
  std::string xml;
  AppendXml(Json{{"placementGroupSet", Json::array({{{"groupName", "a<&>"}, {"ok", true}}})},
                 {"count", 2},
                 {"skipped", nullptr}},
            &xml);
  EXPECT_EQ(xml,
            "<count>2</count><placementGroupSet><item><groupName>a&lt;&amp;&gt;</groupName>"
            "<ok>true</ok></item></placementGroupSet>");
}

}  // namespace
}  // namespace lote::api
