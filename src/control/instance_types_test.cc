#include "control/instance_types.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

TEST(InstanceCatalogTest, KnowsPublishedShapes) {
  InstanceCatalog catalog(HostResources{16, 65536});
  auto trn = catalog.Lookup("trn1.32xlarge");
  ASSERT_TRUE(trn.ok());
  EXPECT_EQ(trn->vcpus, 128);
  EXPECT_EQ(trn->memory_mib, 512 * 1024);
  EXPECT_EQ(trn->accelerators, 16);
  auto p5 = catalog.Lookup("p5.48xlarge");
  ASSERT_TRUE(p5.ok());
  EXPECT_EQ(p5->vcpus, 192);
  EXPECT_EQ(p5->accelerator_kind, "H100");
  auto c5 = catalog.Lookup("c5.xlarge");
  ASSERT_TRUE(c5.ok());
  EXPECT_EQ(c5->memory_mib, 8 * 1024);
  EXPECT_EQ(c5->accelerators, 0);
}

TEST(InstanceCatalogTest, LocalIsThisHost) {
  InstanceCatalog catalog(HostResources{16, 65536});
  auto local = catalog.Lookup("local");
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->vcpus, 16);
  EXPECT_EQ(local->memory_mib, 65536);
  HostResources detected = HostResources::Detect();
  EXPECT_GE(detected.vcpus, 1);
  EXPECT_GT(detected.memory_mib, 0);
}

TEST(InstanceCatalogTest, UnknownTypeNamesTheChoices) {
  InstanceCatalog catalog(HostResources{});
  auto bad = catalog.Lookup("z9.huge");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.status().IsInvalidArgument());
  EXPECT_NE(bad.status().message().find("z9.huge"), std::string::npos);
  EXPECT_NE(bad.status().message().find("trn1.32xlarge"), std::string::npos);
}

}  // namespace
}  // namespace lote::control
