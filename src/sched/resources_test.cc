#include "sched/resources.h"

#include <gtest/gtest.h>

namespace lote::sched {
namespace {

TEST(ResourcesTest, FormatVcpus) {
  struct Case {
    int64_t milli;
    const char* want;
  };
  for (const Case& c : {Case{96000, "96"}, Case{500, "0.5"}, Case{1250, "1.25"},
                        Case{1005, "1.005"}, Case{0, "0"}}) {
    EXPECT_EQ(FormatVcpus(c.milli), c.want) << c.milli;
  }
}

TEST(ResourcesTest, DescribeAndFits) {
  EXPECT_EQ(Describe(Resources{96000, 500000, 0}), "96 vCPU, 500000 MiB");
  EXPECT_EQ(Describe(Resources{2000, 4096, 1}), "2 vCPU, 4096 MiB, 1 accelerator");
  EXPECT_EQ(Describe(Resources{2000, 4096, 16}), "2 vCPU, 4096 MiB, 16 accelerators");
  Resources cap{4000, 8192, 2};
  EXPECT_TRUE((Resources{4000, 8192, 2}).FitsIn(cap));
  EXPECT_FALSE((Resources{4001, 1, 0}).FitsIn(cap));
  EXPECT_FALSE((Resources{1, 8193, 0}).FitsIn(cap));
  EXPECT_FALSE((Resources{1, 1, 3}).FitsIn(cap));
  EXPECT_EQ(Resources::FromAws(0.25, 512, 0), (Resources{250, 512, 0}));
  EXPECT_EQ(Resources::FromAws(96, 500000, 16), (Resources{96000, 500000, 16}));
  EXPECT_EQ(WholeVcpus(1), 1);
  EXPECT_EQ(WholeVcpus(4000), 4);
  EXPECT_EQ(WholeVcpus(4001), 5);
}

}  // namespace
}  // namespace lote::sched
