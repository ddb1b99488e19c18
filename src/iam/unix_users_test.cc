#include "iam/unix_users.h"

#include <gtest/gtest.h>

namespace lote::iam {
namespace {

TEST(UnixUsersTest, DefinitionUsersOfContainersAndNodeRanges) {
  EXPECT_EQ(JobDefinitionUsers(*ParseJson(R"({"containerProperties":{"user":"nobody"}})")),
            std::vector<std::string>{"nobody"});
  EXPECT_EQ(JobDefinitionUsers(*ParseJson(R"({"containerProperties":{"image":"x"}})")),
            std::vector<std::string>{""});
  EXPECT_EQ(JobDefinitionUsers(*ParseJson(R"({"nodeProperties":{"nodeRangeProperties":[
                {"container":{"user":"root"}},{"container":{}}]}})")),
            (std::vector<std::string>{"root", ""}));
}

TEST(UnixUsersTest, OnlyMappedUsersAndRootOnlyWhenGranted) {
  User alice;
  alice.arn = "arn:aws:iam::0:user/alice";
  alice.unix_users = {"nobody"};
  EXPECT_FALSE(CheckJobUsers(alice, {"nobody"}, "root", "d:1"));
  auto root = CheckJobUsers(alice, {"root"}, "root", "d:1");
  ASSERT_TRUE(root);
  EXPECT_NE(root->find("'root'"), std::string::npos) << *root;
  EXPECT_NE(root->find("nobody"), std::string::npos) << *root;
  // No user in the definition: the server's own user, root here.
  EXPECT_TRUE(CheckJobUsers(alice, {""}, "root", "d:1"));
  EXPECT_FALSE(CheckJobUsers(alice, {""}, "nobody", "d:1"));
  User admin;
  admin.unix_users = {"*"};
  EXPECT_FALSE(CheckJobUsers(admin, {"root", ""}, "root", "d:1"));
  User none;
  EXPECT_TRUE(CheckJobUsers(none, {"nobody"}, "root", "d:1"));
}

}  // namespace
}  // namespace lote::iam
