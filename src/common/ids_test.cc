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
