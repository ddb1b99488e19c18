#include "control/node_ranges.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace lote::control {
namespace {

TEST(NodeRangeTest, ParsesAllForms) {
  struct Case {
    std::string text;
    int32_t num_nodes, first, last;
  };
  for (const Case& c : std::vector<Case>{{"0:3", 4, 0, 3},
                                         {"2:", 4, 2, 3},
                                         {":4", 6, 0, 4},
                                         {"5", 6, 5, 5},
                                         {"0:", 4, 0, 3},
                                         {"3:", 4, 3, 3},
                                         {":", 4, 0, 3},  // both bounds omitted: every node
                                         {":", 1, 0, 0},
                                         {"0", 1, 0, 0},
                                         {"007:8", 9, 7, 8}}) {
    Result<NodeIndexRange> r = ParseNodeRange(c.text, c.num_nodes);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(r->first, c.first) << c.text;
    EXPECT_EQ(r->last, c.last) << c.text;
  }
}

TEST(NodeRangeTest, BoundsKeepWhatTheTextOmits) {
  Result<NodeRangeBounds> open = ParseNodeRangeBounds("2:");
  ASSERT_TRUE(open.ok());
  EXPECT_EQ(open->first, 2);
  EXPECT_FALSE(open->last.has_value());
  Result<NodeRangeBounds> head = ParseNodeRangeBounds(":4");
  ASSERT_TRUE(head.ok());
  EXPECT_FALSE(head->first.has_value());
  EXPECT_EQ(head->last, 4);
  Result<NodeRangeBounds> single = ParseNodeRangeBounds("5");
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->first, 5);
  EXPECT_EQ(single->last, 5);
  Result<NodeRangeBounds> all = ParseNodeRangeBounds(":");
  ASSERT_TRUE(all.ok());
  EXPECT_FALSE(all->first.has_value());
  EXPECT_FALSE(all->last.has_value());
  EXPECT_FALSE(ParseNodeRangeBounds("1:2:3").ok());
}

TEST(NodeRangeTest, ErrorsNameTheFieldAndTheProblem) {
  struct Case {
    std::string text;
    std::string want;
  };
  for (const Case& c :
       std::vector<Case>{{"", "ranges[1].targetNodes is empty: use a node range such as \"0:\""},
                         {"1:2:3", "ranges[1].targetNodes '1:2:3' has more than one ':'"},
                         {"::", "has more than one ':'"},
                         {"a:b", "ranges[1].targetNodes 'a:b' is not a node range: use \"N:M\""},
                         {"-1:", "is not a node range"},
                         {"+1", "is not a node range"},
                         {" 1", "is not a node range"},
                         {"1 :2", "is not a node range"},
                         {"1234567890:", "more than 9 digits"},
                         {"3:1", "'3:1' starts after it ends: write the lower node index first"},
                         {"0:4", "'0:4' reaches node 4 but numNodes is 4 (nodes 0 to 3)"},
                         {"5:", "'5:' reaches node 5 but numNodes is 4"},
                         {"4", "'4' reaches node 4"},
                         {":9", "reaches node 9"},
                         {"999999999", "reaches node 999999999"}}) {
    Result<NodeIndexRange> r = ParseNodeRange(c.text, 4, "ranges[1].targetNodes");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(r.status().IsInvalidArgument()) << c.text;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.text << ": got '" << r.status().message() << "', want '" << c.want << "'";
  }
  Result<NodeIndexRange> no_nodes = ParseNodeRange(":", 0);
  ASSERT_FALSE(no_nodes.ok());
  EXPECT_NE(no_nodes.status().message().find("numNodes must be at least 1"), std::string::npos);
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
