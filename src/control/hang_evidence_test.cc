#include "control/hang_evidence.h"

#include <gtest/gtest.h>

#include "control/job_controller.h"

namespace lote::control {
namespace {

std::string Dump(const std::string& state, const std::vector<std::string>& frames) {
  std::string d = "=== process 1 (" + state + "): lote train ===\nThread 1 (LWP 1):\n";
  for (size_t i = 0; i < frames.size(); ++i)
    d += "#" + std::to_string(i) + "  0x0000 in " + frames[i] + " () at x.cc:1\n";
  return d + "=== last progress: (none) ===\n";
}

const std::vector<std::string> kWaiting = {"__futex_wait", "gloo::transport::Pair::recv",
                                           "lote::engine::AllReduce", "main"};
const std::vector<std::string> kComputing = {"sgemm_kernel", "lote::engine::MatMul",
                                             "lote::engine::Forward", "main"};

TEST(Stragglers, TheNodeWhoseProcessesAreStopped) {
  std::map<int32_t, std::string> dumps = {{0, Dump("S (sleeping)", kWaiting)},
                                          {1, Dump("T (stopped)", kWaiting)},
                                          {2, Dump("S (sleeping)", kWaiting)},
                                          {3, Dump("S (sleeping)", kWaiting)}};
  EXPECT_EQ(Stragglers(dumps), std::vector<int32_t>{1});
  const std::string s = EvidenceSentence(dumps, "<node's log stream>/dump", "");
  EXPECT_EQ(s,
            "; stack dumps of nodes 0, 1, 2, 3 are in <node's log stream>/dump; straggler: node 1 "
            "(its processes are stopped, state T)");
}

TEST(Stragglers, ElseTheOneWhoseStacksDiffer) {
  std::map<int32_t, std::string> dumps = {{0, Dump("S (sleeping)", kWaiting)},
                                          {1, Dump("S (sleeping)", kWaiting)},
                                          {2, Dump("R (running)", kComputing)},
                                          {3, Dump("S (sleeping)", kWaiting)}};
  EXPECT_EQ(Stragglers(dumps), std::vector<int32_t>{2});
  EXPECT_NE(EvidenceSentence(dumps, "s/dump", "").find("straggler: node 2 (its stacks differ"),
            std::string::npos);
}

TEST(Stragglers, NoneWhenTheStacksDifferWithoutAClearOutlier) {
  // A running job's snapshot: every node somewhere else, none stands out.
  std::map<int32_t, std::string> dumps = {{0, Dump("R (running)", {"a", "b", "main"})},
                                          {1, Dump("R (running)", {"a", "c", "main"})},
                                          {2, Dump("R (running)", {"b", "c", "main"})}};
  EXPECT_TRUE(Stragglers(dumps).empty());
  // Two nodes: each is as far from the other.
  EXPECT_TRUE(
      Stragglers({{0, Dump("S (sleeping)", kWaiting)}, {1, Dump("R (running)", kComputing)}})
          .empty());
}

TEST(Stragglers, NoneWhenAllAlikeOrAlone) {
  std::map<int32_t, std::string> same = {{0, Dump("S (sleeping)", kWaiting)},
                                         {1, Dump("S (sleeping)", kWaiting)}};
  EXPECT_TRUE(Stragglers(same).empty());
  EXPECT_NE(EvidenceSentence(same, "s/dump", "").find("no straggler"), std::string::npos);
  EXPECT_TRUE(Stragglers({{0, Dump("T (stopped)", kWaiting)}}).empty());
  EXPECT_EQ(EvidenceSentence({}, "", "the slurm backend cannot collect stack dumps"),
            "; no stack dumps: the slurm backend cannot collect stack dumps");
}

TEST(HungNodes, SilentNodesDoNotHangWhileAnotherReports) {
  const Json progress = {{"nodes", Json::array({Json{{"node", 0}, {"step", 8}}})}};
  EXPECT_EQ(HungNodes({1, 2, 3}, progress), std::vector<int32_t>{});
  EXPECT_EQ(HungNodes({0, 1, 2, 3}, progress), std::vector<int32_t>{0});
  EXPECT_EQ(HungNodes({1, 2}, std::nullopt), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(HungNodes({1}, Json::object()), std::vector<int32_t>{1});
}

}  // namespace
}  // namespace lote::control
