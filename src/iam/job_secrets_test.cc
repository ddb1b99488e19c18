#include "iam/job_secrets.h"

#include <gtest/gtest.h>

#include "iam/actions.h"
#include "iam/authorize.h"

namespace lote::iam {
namespace {

TEST(JobSecrets, ContainerAndEveryNodeRange) {
  const Json def = ParseJson(R"({
    "containerProperties": {"secrets": [{"name": "A", "valueFrom": "/team/a"}]},
    "nodeProperties": {"nodeRangeProperties": [
      {"targetNodes": "0", "container": {"secrets": [{"name": "B", "valueFrom": "b"}]}},
      {"targetNodes": "1:", "container": {"image": "x"}}]}})")
                       .value();
  EXPECT_EQ(JobDefinitionSecrets(def), (std::vector<std::string>{"/team/a", "b"}));
  EXPECT_TRUE(JobDefinitionSecrets(Json{{"containerProperties", Json::object()}}).empty());
  EXPECT_TRUE(JobDefinitionSecrets(Json("not an object")).empty());
}

}  // namespace
}  // namespace lote::iam
