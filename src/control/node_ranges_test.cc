#include "control/node_ranges.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

TEST(NodeRangeTest, ParsesAllForms) {
  auto open = ParseNodeRange("0:", 4);
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->first, 0);
  EXPECT_EQ(open->last, 3);
  auto head = ParseNodeRange(":1", 4);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->last, 1);
  auto single = ParseNodeRange("2", 4);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->first, 2);
  EXPECT_EQ(single->last, 2);
}

TEST(NodeRangeTest, RejectsOutOfRangeAndGarbage) {
  auto out = ParseNodeRange("0:4", 4);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("numNodes is 4"), std::string::npos);
  EXPECT_FALSE(ParseNodeRange("a:b", 4).ok());
  EXPECT_FALSE(ParseNodeRange("3:1", 4).ok());
}

TEST(NodeRangeTest, CoverageMustBeExactlyOnce) {
  EXPECT_TRUE(CheckNodeRangesCover({{0, 0}, {1, 3}}, 4).ok());
  Status gap = CheckNodeRangesCover({{0, 0}, {2, 3}}, 4);
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("node 1 is in no"), std::string::npos);
  Status overlap = CheckNodeRangesCover({{0, 2}, {2, 3}}, 4);
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.message().find("more than one"), std::string::npos);
}

}  // namespace
}  // namespace lote::control
