#include "exec/node_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace lote::exec {
namespace {

TEST(NodeFilesTest, PathsAndKeysRoundTrip) {
  NodeKey key{AttemptKey{"job-1:5", 2}, 3};
  auto p = NodePathsFor("/home/x", key);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->dir, "/home/x/jobs/job-1:5/2/3");
  EXPECT_EQ(p->status(), "/home/x/jobs/job-1:5/2/3/status.json");
  auto back = NodeKeyFromRelative("job-1:5", "2", "3");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, key);
  EXPECT_FALSE(NodeKeyFromRelative("job", "0", "1").has_value());
  EXPECT_FALSE(NodeKeyFromRelative("job", "x", "1").has_value());
}

TEST(NodeFilesTest, RejectsUnsafeJobIds) {
  for (const char* bad : {"", ".", "..", "a/b", "abc#1", "a b"}) {
    EXPECT_TRUE(NodePathsFor("/h", NodeKey{AttemptKey{bad, 1}, 0}).status().IsInvalidArgument())
        << bad;
  }
}

TEST(NodeFilesTest, SpecAndStatusRoundTrip) {
  ShimSpec s;
  s.node = NodeKey{AttemptKey{"j", 1}, 0};
  s.argv = {"sh", "-c", "echo hi"};
  s.env = {"A=1"};
  s.working_dir = "/tmp";
  s.output_path = "/tmp/out";
  s.uid = 65534;
  s.gid = 65534;
  s.rlimits = {ShimRlimit{"nofile", 7, 100, 200}};
  auto back = ShimSpecFromJson(ToJson(s));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->argv, s.argv);
  EXPECT_EQ(back->uid, s.uid);
  ASSERT_EQ(back->rlimits.size(), 1u);
  EXPECT_EQ(back->rlimits[0].hard, 200);

  StatusRecord st;
  st.outcome = NodeOutcome::kSignaled;
  st.signal = 9;
  st.terminated = true;
  st.pull_started_at_ms = 100;
  st.pull_stopped_at_ms = 250;
  auto st2 = StatusRecordFromJson(ToJson(st));
  ASSERT_TRUE(st2.ok());
  EXPECT_EQ(st2->outcome, NodeOutcome::kSignaled);
  EXPECT_EQ(st2->signal, 9);
  EXPECT_TRUE(st2->terminated);
  const NodeEvent e = EventFromStatus(NodeKey{AttemptKey{"j", 1}, 0}, *st2);
  EXPECT_EQ(e.pull_started_at_ms, 100);
  EXPECT_EQ(e.pull_stopped_at_ms, 250);

  EXPECT_EQ(StatusRecordFromJson(Json{{"outcome", 3}}).status().code(), StatusCode::kDataLoss);
}

TEST(NodeFilesTest, OwnIdentityIsAliveAndAWrongStartTimeIsNot) {
  auto me = CurrentIdentity(::getpid());
  ASSERT_TRUE(me.ok());
  EXPECT_TRUE(IdentityAlive(*me));
  ProcessIdentity recycled = *me;
  recycled.start_time += 1;
  EXPECT_FALSE(IdentityAlive(recycled));
}

}  // namespace
}  // namespace lote::exec
