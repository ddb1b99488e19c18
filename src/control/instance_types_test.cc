#include "control/instance_types.h"

#include <gtest/gtest.h>

#include <vector>

namespace lote::control {
namespace {

TEST(InstanceCatalogTest, KnowsPublishedShapes) {
  InstanceCatalog catalog(HostResources{16, 65536, 0, ""});
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
  InstanceCatalog catalog(HostResources{16, 65536, 0, ""});
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

// Whatever AWS accepts resolves, by the documented mapping to local capacity.
TEST(InstanceCatalogTest, AcceptsWhatAwsAcceptsWithADocumentedShape) {
  InstanceCatalog catalog(HostResources{16, 65536, 0, ""});
  for (const char* alias : {"optimal", "default_x86_64", "default_arm64"}) {
    auto t = catalog.Lookup(alias);
    ASSERT_TRUE(t.ok()) << alias;
    EXPECT_EQ(t->name, alias);
    EXPECT_EQ(t->vcpus, 16);
    EXPECT_EQ(t->memory_mib, 65536);
  }
  auto c5 = catalog.Lookup("c5");  // the family's largest catalog entry
  ASSERT_TRUE(c5.ok());
  EXPECT_EQ(c5->name, "c5");
  EXPECT_EQ(c5->vcpus, 72);
  auto p4d = catalog.Lookup("p4d");
  ASSERT_TRUE(p4d.ok());
  EXPECT_EQ(p4d->accelerators, 8);
  auto t2 = catalog.Lookup("t2");  // a family the catalog does not list: this host
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->vcpus, 16);
  struct Want {
    const char* name;
    int32_t vcpus;
    int64_t memory_mib;
  };
  for (const Want& w : std::vector<Want>{{"t2.micro", 1, 4096},
                                         {"t3.large", 2, 8192},
                                         {"c7g.16xlarge", 64, 131072},
                                         {"r6i.2xlarge", 8, 65536},
                                         {"m7i-flex.xlarge", 4, 16384},
                                         {"c6i.metal", 96, 196608}}) {
    auto t = catalog.Lookup(w.name);
    ASSERT_TRUE(t.ok()) << w.name << ": " << t.status().ToString();
    EXPECT_EQ(t->name, w.name);
    EXPECT_EQ(t->vcpus, w.vcpus) << w.name;
    EXPECT_EQ(t->memory_mib, w.memory_mib) << w.name;
    EXPECT_EQ(t->accelerators, 0) << w.name;
  }
  for (const char* bad :
       {"", "C5", "c5.", ".large", "c5.huge", "c5.0xlarge", "c5 .large", "large", "c5.large.x"}) {
    auto t = catalog.Lookup(bad);
    EXPECT_FALSE(t.ok()) << bad;
    if (!t.ok()) {
      EXPECT_TRUE(t.status().IsInvalidArgument());
    }
  }
}

}  // namespace
}  // namespace lote::control
