#include "exec/batch_env.h"

#include <gtest/gtest.h>

namespace lote::exec {
namespace {

BatchJobContext Base() {
  BatchJobContext c;
  c.job_id = "8f3c0a1e-job";
  c.attempt = 2;
  c.job_queue_name = "q1";
  c.compute_environment_name = "ce1";
  return c;
}

TEST(BatchEnvTest, SingleNodeJobHasOnlyCommonVariables) {
  auto env = BuildBatchEnvironment(Base());
  ASSERT_TRUE(env.ok()) << env.status().ToString();
  EXPECT_EQ((*env)["AWS_BATCH_JOB_ID"], "8f3c0a1e-job");
  EXPECT_EQ((*env)["AWS_BATCH_JOB_ATTEMPT"], "2");
  EXPECT_EQ((*env)["AWS_BATCH_JQ_NAME"], "q1");
  EXPECT_EQ((*env)["AWS_BATCH_CE_NAME"], "ce1");
  EXPECT_EQ(env->size(), 4u);
}

TEST(BatchEnvTest, ArrayChildCarriesIndexAndSize) {
  BatchJobContext c = Base();
  c.array = ArrayContext{7, 100};
  auto env = BuildBatchEnvironment(c);
  ASSERT_TRUE(env.ok());
  EXPECT_EQ((*env)["AWS_BATCH_JOB_ID"], "8f3c0a1e-job:7");
  EXPECT_EQ((*env)["AWS_BATCH_JOB_ARRAY_INDEX"], "7");
  EXPECT_EQ((*env)["AWS_BATCH_JOB_ARRAY_SIZE"], "100");
  EXPECT_EQ(env->count("AWS_BATCH_JOB_NODE_INDEX"), 0u);
}

TEST(BatchEnvTest, MultiNodeMainHasNoMainAddressChildrenDo) {
  BatchJobContext c = Base();
  c.multi_node = MultiNodeContext{4, 0, 0, "127.0.1.1"};
  auto main = BuildBatchEnvironment(c);
  ASSERT_TRUE(main.ok());
  EXPECT_EQ((*main)["AWS_BATCH_JOB_ID"], "8f3c0a1e-job#0");
  EXPECT_EQ((*main)["AWS_BATCH_JOB_NODE_INDEX"], "0");
  EXPECT_EQ((*main)["AWS_BATCH_JOB_NUM_NODES"], "4");
  EXPECT_EQ((*main)["AWS_BATCH_JOB_MAIN_NODE_INDEX"], "0");
  EXPECT_EQ(main->count("AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"), 0u);
  EXPECT_EQ(main->count("AWS_BATCH_JOB_ARRAY_INDEX"), 0u);

  c.multi_node->node_index = 3;
  auto child = BuildBatchEnvironment(c);
  ASSERT_TRUE(child.ok());
  EXPECT_EQ((*child)["AWS_BATCH_JOB_ID"], "8f3c0a1e-job#3");
  EXPECT_EQ((*child)["AWS_BATCH_JOB_NODE_INDEX"], "3");
  EXPECT_EQ((*child)["AWS_BATCH_JOB_MAIN_NODE_PRIVATE_IPV4_ADDRESS"], "127.0.1.1");
}

TEST(BatchEnvTest, RejectsInconsistentInput) {
  BatchJobContext c = Base();
  c.multi_node = MultiNodeContext{4, 0, 4, "127.0.1.1"};
  EXPECT_TRUE(BuildBatchEnvironment(c).status().IsInvalidArgument());
  c.multi_node = MultiNodeContext{4, 0, 1, ""};
  EXPECT_TRUE(BuildBatchEnvironment(c).status().IsInvalidArgument());
  c = Base();
  c.job_id = "abc#1";
  EXPECT_TRUE(BuildBatchEnvironment(c).status().IsInvalidArgument());
  c = Base();
  c.attempt = 0;
  EXPECT_TRUE(BuildBatchEnvironment(c).status().IsInvalidArgument());
  c = Base();
  c.array = ArrayContext{1, 2};
  c.multi_node = MultiNodeContext{2, 0, 0, ""};
  EXPECT_TRUE(BuildBatchEnvironment(c).status().IsInvalidArgument());
}

TEST(BatchEnvTest, InstancePrivateIps) {
  EXPECT_EQ(*InstancePrivateIp(0), "127.0.1.1");
  EXPECT_EQ(*InstancePrivateIp(3), "127.0.1.4");
  EXPECT_EQ(*InstancePrivateIp(253), "127.0.1.254");
  EXPECT_EQ(*InstancePrivateIp(254), "127.0.2.1");
  EXPECT_EQ(*InstancePrivateIp(254 * 254 - 1), "127.0.254.254");
  EXPECT_TRUE(InstancePrivateIp(254 * 254).status().IsInvalidArgument());
  EXPECT_TRUE(InstancePrivateIp(-1).status().IsInvalidArgument());
  for (int32_t i : {0, 3, 253, 254, 1000, 254 * 254 - 1})
    EXPECT_EQ(InstanceIndexOfPrivateIp(*InstancePrivateIp(i)), i);
  for (const char* other : {"127.0.0.1", "127.0.1.255", "127.0.1.0", "10.0.1.1", "127.0.1.1x", ""})
    EXPECT_EQ(InstanceIndexOfPrivateIp(other), -1) << other;
}

}  // namespace
}  // namespace lote::exec
