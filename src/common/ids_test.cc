#include "common/ids.h"

#include <gtest/gtest.h>

namespace lote {
namespace {

TEST(IdsTest, UuidShape) {
  std::string id = NewUuid();
  ASSERT_EQ(id.size(), 36u);
  EXPECT_EQ(id[14], '4');
  EXPECT_NE(NewUuid(), id);
}

TEST(IdsTest, TimeOrderedUuidShapeAndOrder) {
  // 2026-12-04 00:00:00.000 UTC = 0x01a23e59c400 ms (48 bits).
  const std::string id = NewTimeOrderedUuid(1796342400000);
  ASSERT_EQ(id.size(), 36u);
  EXPECT_EQ(id.substr(0, 13), "01a23e59-c400");
  EXPECT_EQ(id[14], '7');
  EXPECT_NE(std::string("89ab").find(id[19]), std::string::npos) << id;
  EXPECT_NE(NewTimeOrderedUuid(1796342400000), id);
  // Later milliseconds sort later, whatever the random bits.
  for (int i = 0; i < 100; ++i)
    EXPECT_LT(NewTimeOrderedUuid(1796342400000 + i), NewTimeOrderedUuid(1796342400001 + i));
}

TEST(IdsTest, ArnRoundTrip) {
  auto arn = Arn::Parse("arn:aws:batch:us-east-1:123456789012:job-definition/train:3");
  ASSERT_TRUE(arn.ok()) << arn.status().ToString();
  EXPECT_EQ(arn->service, "batch");
  EXPECT_EQ(arn->region, "us-east-1");
  EXPECT_EQ(arn->account, "123456789012");
  EXPECT_EQ(arn->ResourceType(), "job-definition");
  EXPECT_EQ(arn->ResourceName(), "train:3");
  EXPECT_EQ(arn->ToString(), "arn:aws:batch:us-east-1:123456789012:job-definition/train:3");
}

TEST(IdsTest, ArnRejectsGarbage) {
  EXPECT_FALSE(Arn::Parse("my-queue").ok());
  EXPECT_FALSE(Arn::Parse("urn:aws:batch:r:a:x").ok());
  EXPECT_FALSE(Arn::Parse("arn:aws::r:a:x").ok());
}

}  // namespace
}  // namespace lote
