#include "control/consumables.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

std::string ArnOf(const std::string& name) {
  return "arn:aws:batch:us-east-1:000000000000:consumable-resource/" + name;
}

TEST(ConsumableNameOfTest, TakesNamesAndArns) {
  EXPECT_EQ(ConsumableNameOf("licence_a"), "licence_a");
  EXPECT_EQ(ConsumableNameOf(ArnOf("lic-2")), "lic-2");
  EXPECT_EQ(ConsumableNameOf("arn:aws:batch:us-east-1:0:job-queue/q"), "");
  EXPECT_EQ(ConsumableNameOf("bad name"), "");
  EXPECT_EQ(ConsumableNameOf(""), "");
}

TEST(ParseConsumablePropertiesTest, ParsesAndRefusesWithTheField) {
  Result<std::vector<ConsumableNeed>> ok = ParseConsumableProperties(
      Json::parse(R"({"consumableResourceList": [{"consumableResource": "a", "quantity": 2},
        {"consumableResource": ")" +
                  ArnOf("b") + R"(", "quantity": 1}]})"),
      "p");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[0], (ConsumableNeed{"a", "a", 2}));
  EXPECT_EQ((*ok)[1].name, "b");
  EXPECT_EQ((*ok)[1].resource, ArnOf("b"));
  EXPECT_EQ(ConsumablePropertiesJson(*ok)["consumableResourceList"][1]["consumableResource"],
            ArnOf("b"));
  EXPECT_TRUE(ParseConsumableProperties(Json(), "p")->empty());

  auto refused = [](const char* text) {
    Result<std::vector<ConsumableNeed>> r = ParseConsumableProperties(Json::parse(text), "props");
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_NE(refused(R"({"consumableResourceList": [{"consumableResource": "a", "quantity": 0}]})")
                .find("props.consumableResourceList[0].quantity"),
            std::string::npos);
  EXPECT_NE(refused(R"({"consumableResourceList": [{"quantity": 1}]})").find("consumableResource"),
            std::string::npos);
  EXPECT_NE(refused(R"({"consumableResourceList": [{"consumableResource": "a", "quantity": 1},
                                                   {"consumableResource": "a", "quantity": 2}]})")
                .find("twice"),
            std::string::npos);
  EXPECT_NE(refused(R"({"consumableResourceList": "a"})").find("must be a list"),
            std::string::npos);
  std::string six = R"({"consumableResourceList": [)";
  for (int i = 0; i < 6; ++i)
    six += std::string(i ? "," : "") + R"({"consumableResource": "r)" + std::to_string(i) +
           R"(", "quantity": 1})";
  EXPECT_NE(refused((six + "]}").c_str()).find("at most 5"), std::string::npos);
}

class ConsumableResourcesTest : public ::testing::Test {
 protected:
  Json Create(const std::string& body) {
    ConsumableResources::Change c;
    Result<Json> r = resources_.Create(Json::parse(body), 1000, &c);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(c.doc.is_null());
    return r.ok() ? *r : Json();
  }
  Json Describe(const std::string& name, const UnitsInUse& in_use = {}) {
    Result<Json> r = resources_.Describe(Json{{"consumableResource", name}}, in_use);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : Json();
  }
  Result<Json> Update(const std::string& op, int64_t q, const std::string& token = "",
                      int64_t now = 2000, const UnitsInUse& in_use = {}) {
    Json req = {{"consumableResource", "lic"}, {"operation", op}, {"quantity", q}};
    if (!token.empty()) req["clientToken"] = token;
    ConsumableResources::Change c;
    return resources_.Update(req, now, in_use, &c);
  }
  ConsumableResources resources_{ArnOf};
};

TEST_F(ConsumableResourcesTest, CreateDescribeAndDefaults) {
  Json created = Create(R"({"consumableResourceName": "lic", "totalQuantity": 4,
                            "tags": {"team": "a"}})");
  EXPECT_EQ(created["consumableResourceArn"], ArnOf("lic"));
  Json d = Describe("lic", {{"lic", 1}});
  EXPECT_EQ(d["totalQuantity"], 4);
  EXPECT_EQ(d["inUseQuantity"], 1);
  EXPECT_EQ(d["availableQuantity"], 3);
  EXPECT_EQ(d["resourceType"], "REPLENISHABLE");
  EXPECT_EQ(d["createdAt"], 1000);
  EXPECT_EQ(d["tags"]["team"], "a");
  EXPECT_EQ(Describe(ArnOf("lic"))["consumableResourceName"], "lic");

  ConsumableResources::Change c;
  Result<Json> again =
      resources_.Create(Json{{"consumableResourceName", "lic"}, {"totalQuantity", 1}}, 1, &c);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_FALSE(
      resources_.Create(Json{{"consumableResourceName", "x"}, {"resourceType", "SOMETIMES"}}, 1, &c)
          .ok());
  EXPECT_FALSE(
      resources_.Create(Json{{"consumableResourceName", "x"}, {"totalQuantity", -1}}, 1, &c).ok());
  EXPECT_EQ(resources_.Describe(Json{{"consumableResource", "nope"}}, {}).status().code(),
            StatusCode::kNotFound);
}

TEST_F(ConsumableResourcesTest, UpdateSetAddRemoveAndClientTokens) {
  Create(R"({"consumableResourceName": "lic", "totalQuantity": 4})");
  EXPECT_EQ((*Update("ADD", 3))["totalQuantity"], 7);
  EXPECT_EQ((*Update("REMOVE", 5))["totalQuantity"], 2);
  EXPECT_EQ((*Update("REMOVE", 9))["totalQuantity"], 0);  // never below 0
  EXPECT_EQ((*Update("SET", 10))["totalQuantity"], 10);
  // The same token and request: applied once, both answered.
  EXPECT_EQ((*Update("ADD", 1, "tok-1"))["totalQuantity"], 11);
  EXPECT_EQ((*Update("ADD", 1, "tok-1"))["totalQuantity"], 11);
  // The same token with another request: refused.
  Result<Json> other = Update("ADD", 2, "tok-1");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another request"), std::string::npos);
  // After 8 hours the token is forgotten: a new change.
  EXPECT_EQ((*Update("ADD", 1, "tok-1", 2000 + 8LL * 3600 * 1000 + 1))["totalQuantity"], 12);
  EXPECT_FALSE(Update("DOUBLE", 1).ok());
}

TEST_F(ConsumableResourcesTest, ShrinkingBelowWhatIsInUseConvergesAsJobsEnd) {
  Create(R"({"consumableResourceName": "lic", "totalQuantity": 4})");
  ASSERT_TRUE(Update("SET", 1, "", 2000, {{"lic", 3}}).ok());
  Json d = Describe("lic", {{"lic", 3}});
  EXPECT_EQ(d["totalQuantity"], 3);  // what is held, until those jobs end
  EXPECT_EQ(d["availableQuantity"], 0);
  d = Describe("lic", {{"lic", 0}});
  EXPECT_EQ(d["totalQuantity"], 1);
  EXPECT_EQ(d["availableQuantity"], 1);
  EXPECT_EQ(resources_.ForScheduler({{"lic", 3}}).at(0).available, 0);
}

TEST_F(ConsumableResourcesTest, NonReplenishableUnitsAreUsedUp) {
  Create(R"({"consumableResourceName": "once", "totalQuantity": 3,
             "resourceType": "NON_REPLENISHABLE"})");
  Create(R"({"consumableResourceName": "lic", "totalQuantity": 3})");
  ASSERT_TRUE(resources_.UseUp("once", 2).has_value());
  EXPECT_EQ(Describe("once")["totalQuantity"], 1);
  ASSERT_TRUE(resources_.UseUp("once", 5).has_value());
  EXPECT_EQ(Describe("once")["totalQuantity"], 0);
  EXPECT_FALSE(resources_.UseUp("lic", 2).has_value());  // replenishable: given back
  EXPECT_FALSE(resources_.UseUp("gone", 2).has_value());
  EXPECT_EQ(Describe("lic")["totalQuantity"], 3);
}

TEST_F(ConsumableResourcesTest, ListFiltersAndPages) {
  for (const char* n : {"Alpha", "alpine", "beta", "gamma"})
    Create(std::string(R"({"consumableResourceName": ")") + n + R"(", "totalQuantity": 1})");
  Json filter = {{"filters", {{{"name", "CONSUMABLE_RESOURCE_NAME"}, {"values", {"al*"}}}}}};
  Result<Json> listed = resources_.List(filter, {});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ((*listed)["consumableResources"].size(), 2u);
  EXPECT_EQ((*listed)["consumableResources"][0]["consumableResourceName"], "Alpha");
  // Pages of one, followed to the end.
  std::vector<std::string> seen;
  Json req = {{"maxResults", 1}};
  for (int i = 0; i < 10; ++i) {
    Result<Json> page = resources_.List(req, {});
    ASSERT_TRUE(page.ok());
    for (const Json& r : (*page)["consumableResources"])
      seen.push_back(r["consumableResourceName"]);
    if (!page->contains("nextToken")) break;
    req["nextToken"] = (*page)["nextToken"];
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"Alpha", "alpine", "beta", "gamma"}));
  EXPECT_FALSE(resources_.List(Json{{"nextToken", "garbage"}}, {}).ok());
  EXPECT_FALSE(
      resources_.List(Json{{"filters", {{{"name", "JOB_NAME"}, {"values", {"a"}}}}}}, {}).ok());
}

TEST_F(ConsumableResourcesTest, DeleteTagsAndLoadRoundTrip) {
  Create(R"({"consumableResourceName": "lic", "totalQuantity": 2})");
  ConsumableResources::Change c;
  ASSERT_TRUE(resources_.ChangeTags(ArnOf("lic"), Json{{"tags", {{"k", "v"}}}}, false, &c).ok());
  EXPECT_EQ((*resources_.Tags(ArnOf("lic")))["tags"]["k"], "v");
  ASSERT_TRUE(resources_.ChangeTags(ArnOf("lic"), Json{{"tagKeys", {"k"}}}, true, &c).ok());
  EXPECT_TRUE((*resources_.Tags(ArnOf("lic")))["tags"].empty());

  ConsumableResources loaded(ArnOf);
  ASSERT_TRUE(loaded.Load({{"lic", c.doc.dump()}}).ok());
  EXPECT_TRUE(loaded.Exists("lic"));
  EXPECT_EQ(loaded.ForScheduler({}).at(0).total, 2);

  ASSERT_TRUE(resources_.Delete(Json{{"consumableResource", "lic"}}, &c).ok());
  EXPECT_TRUE(c.doc.is_null());
  EXPECT_EQ(c.arn, ArnOf("lic"));
  EXPECT_FALSE(resources_.Exists("lic"));
}

}  // namespace
}  // namespace lote::control
