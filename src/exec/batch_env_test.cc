#include "exec/batch_env.h"

#include <gtest/gtest.h>

namespace lote::exec {
namespace {

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
