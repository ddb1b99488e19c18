#include "exec/slurm_placement.h"

#include <gtest/gtest.h>

namespace lote::exec {
namespace {

TEST(SlurmPlacementTest, SinfoNodeStatesAreParsedOncePerNode) {
  const std::vector<SlurmNodeState> got =
      ParseSinfoNodeStates("b1 idle\nb2 drain\nb1 idle\n\nb3 down*\n");
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].name, "b1");
  EXPECT_EQ(got[1].state, "drain");
  EXPECT_EQ(got[2].state, "down*");
}

TEST(SlurmPlacementTest, OnlyNodesInServiceAreUsable) {
  for (const char* s : {"idle", "mix", "alloc", "comp", "idle~", "plnd"})
    EXPECT_TRUE(SlurmNodeUsable(s)) << s;
  for (const char* s : {"drain", "drng", "down", "down*", "idle*", "fail", "maint", ""})
    EXPECT_FALSE(SlurmNodeUsable(s)) << s;
}

TEST(SlurmPlacementTest, ARetryExcludesItsFailedHostsOnlyWhenEnoughOthersAreLeft) {
  const std::vector<SlurmNodeState> four = {
      {"b1", "idle"}, {"b2", "alloc"}, {"b3", "mix"}, {"b4", "idle"}};
  struct Case {
    const char* name;
    std::vector<std::string> avoid;
    std::vector<SlurmNodeState> partition;
    int32_t needed;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"three others for two nodes", {"b2"}, four, 2, {"b2"}},
      {"exactly enough others", {"b2"}, four, 3, {"b2"}},
      {"not enough others: none excluded", {"b2"}, four, 4, {}},
      {"a drained node is no other",
       {"b2"},
       {{"b1", "idle"}, {"b2", "idle"}, {"b3", "drain"}, {"b4", "idle"}},
       3,
       {}},
      {"a host outside the partition is not passed", {"x9"}, four, 2, {}},
      {"several, sorted, once", {"b3", "b1", "b3"}, four, 2, {"b1", "b3"}},
      {"nothing to avoid", {}, four, 1, {}},
  };
  for (const Case& c : cases)
    EXPECT_EQ(HostsToExclude(c.avoid, c.partition, c.needed), c.want) << c.name;
}

TEST(SlurmPlacementTest, OnlyLotesDrainReasonIsLotes) {
  EXPECT_TRUE(IsLoteDrainReason(std::string(kSlurmQuarantineReasonPrefix) + "3 jobs"));
  EXPECT_FALSE(IsLoteDrainReason("maintenance by the admin"));
  EXPECT_FALSE(IsLoteDrainReason(""));
}

}  // namespace
}  // namespace lote::exec

namespace lote::exec {
namespace {

TEST(SlurmPlacementTest, GresGpusCountsEveryGpuEntry) {
  EXPECT_EQ(GresGpus("gpu:2"), 2);
  EXPECT_EQ(GresGpus("gpu:a100:4(S:0-1)"), 4);
  EXPECT_EQ(GresGpus("gpu:2,mps:100"), 2);
  EXPECT_EQ(GresGpus("gpu:a100:2(S:0,1),gpu:v100:1"), 3);
  EXPECT_EQ(GresGpus("(null)"), 0);
  EXPECT_EQ(GresGpus(""), 0);
  EXPECT_EQ(GresGpus("mps:100"), 0);
  EXPECT_EQ(GresGpus("gpu:x"), 0);
}

}  // namespace
}  // namespace lote::exec
