#include "iam/job_keys.h"

#include <gtest/gtest.h>

namespace lote::iam {
namespace {

TEST(JobKeysTest, KeyIdNamesTheJobAndAttemptAndParsesBack) {
  const std::string job = "3f2a9c1e-0b7d-4e21-9a55-6c0d8e1f2a3b";
  const std::string id = JobKeyId(job, 12);
  EXPECT_EQ(id, "LOTEJOB3F2A9C1E0B7D4E219A556C0D8E1F2A3BA12");
  std::string parsed;
  int32_t attempt = 0;
  ASSERT_TRUE(ParseJobKeyId(id, &parsed, &attempt));
  EXPECT_EQ(parsed, job);
  EXPECT_EQ(attempt, 12);
}

TEST(JobKeysTest, OtherIdsAreNotJobKeys) {
  std::string job;
  int32_t attempt = 0;
  for (const char* id :
       {"AKIAEXAMPLE", "LOTEJOB", "LOTEJOB3F2A9C1E0B7D4E219A556C0D8E1F2A3BA",
        "LOTEJOB3F2A9C1E0B7D4E219A556C0D8E1F2A3BA0", "LOTEJOB3f2a9c1e0b7d4e219a556c0d8e1f2a3bA1",
        "LOTEJOB3F2A9C1E0B7D4E219A556C0D8E1F2A3BB1",
        "LOTEJOB3F2A9C1E0B7D4E219A556C0D8E1F2A3BA1x"}) {
    EXPECT_FALSE(ParseJobKeyId(id, &job, &attempt)) << id;
  }
  EXPECT_EQ(JobKeyId("not-a-uuid", 1), "");
  EXPECT_EQ(JobKeyId("3f2a9c1e-0b7d-4e21-9a55-6c0d8e1f2a3b", 0), "");
}

TEST(JobKeysTest, SecretsDependOnTheServerKeyAndTheKeyId) {
  const std::string a = JobKeySecret("server key one", "LOTEJOBX");
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a, JobKeySecret("server key one", "LOTEJOBX"));
  EXPECT_NE(a, JobKeySecret("server key two", "LOTEJOBX"));
  EXPECT_NE(a, JobKeySecret("server key one", "LOTEJOBY"));
}

}  // namespace
}  // namespace lote::iam
