#include "common/recipe_config.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>

namespace lote {
namespace {

TEST(RecipeConfigTest, ParsesKeysQuotesExportsAndComments) {
  auto c = RecipeConfig::Parse(
      "# the recipe's keys\n"
      "export REGION=us-west-2\n"
      "SUBNET=\"subnet-1 2\"\n"
      "SG='${LITERAL}'\n"
      "STEPS=40  # a comment\n"
      "\n"
      "EMPTY=\n",
      "/tmp/ex/config.txt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Get("REGION"), "us-west-2");
  EXPECT_EQ(c->Get("SUBNET"), "subnet-1 2");
  EXPECT_EQ(c->Get("SG"), "${LITERAL}");
  EXPECT_EQ(c->RequireInt("STEPS").value(), 40);
  EXPECT_EQ(c->Get("EMPTY"), "");
  EXPECT_FALSE(c->Get("MISSING").has_value());
  EXPECT_EQ(c->dir(), "/tmp/ex");
  EXPECT_EQ(c->entries().size(), 5u);
  EXPECT_EQ(c->ResolvePath("model/tiny.json"), "/tmp/ex/model/tiny.json");
  EXPECT_EQ(c->ResolvePath("file:///x"), "file:///x");
}

TEST(RecipeConfigTest, ExpandsEarlierKeysBuiltinsEnvironmentAndDefaults) {
  setenv("LOTE_RECIPE_TEST_VAR", "from-env", 1);
  unsetenv("LOTE_RECIPE_TEST_UNSET");
  auto c = RecipeConfig::Parse(
      "PREFIX=demo\n"
      "CE_NAME=${PREFIX}-ce\n"
      "BARE=$PREFIX-x\n"
      "DATA=file://${CONFIG_DIR}/build/data\n"
      "ENV=${LOTE_RECIPE_TEST_VAR}\n"
      "DEF=${LOTE_RECIPE_TEST_UNSET:-${PREFIX}/fallback}\n"
      "BIN_DIR=${LOTE_BIN_DIR}\n",
      "/tmp/ex/config.txt");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->Get("CE_NAME"), "demo-ce");
  EXPECT_EQ(c->Get("BARE"), "demo-x");
  EXPECT_EQ(c->Get("DATA"), "file:///tmp/ex/build/data");
  EXPECT_EQ(c->Get("ENV"), "from-env");
  EXPECT_EQ(c->Get("DEF"), "demo/fallback");
  EXPECT_EQ(*c->Get("BIN_DIR") + "/" + std::filesystem::path(SelfBinary()).filename().string(),
            SelfBinary());
}

TEST(RecipeConfigTest, UndefinedVariablesAndBadLinesAreErrorsNamingTheLine) {
  unsetenv("LOTE_RECIPE_TEST_UNSET");
  auto undefined = RecipeConfig::Parse("A=1\nB=${LOTE_RECIPE_TEST_UNSET}/x\n", "c.txt");
  ASSERT_FALSE(undefined.ok());
  EXPECT_NE(undefined.status().message().find("c.txt:2"), std::string::npos);
  EXPECT_NE(undefined.status().message().find("${LOTE_RECIPE_TEST_UNSET} is not defined"),
            std::string::npos);
  EXPECT_FALSE(RecipeConfig::Parse("just words\n", "c.txt").ok());
  EXPECT_FALSE(RecipeConfig::Parse("1BAD=x\n", "c.txt").ok());
  EXPECT_FALSE(RecipeConfig::Parse("A=\"open\n", "c.txt").ok());
  EXPECT_FALSE(RecipeConfig::Parse("A=${B\n", "c.txt").ok());
  auto c = RecipeConfig::Parse("N=abc\nF=maybe\n", "c.txt");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->RequireInt("N").ok());
  EXPECT_FALSE(c->RequireInt("MISSING").ok());
  EXPECT_FALSE(c->GetBool("F", false).ok());
  EXPECT_TRUE(c->GetBool("MISSING", true).value());
}

TEST(RecipeConfigTest, TemplatesExpandBracedNamesOnlyAndNameTheUndefinedOnes) {
  unsetenv("LOTE_RECIPE_TEST_UNSET");
  auto c = RecipeConfig::Parse("CE_NAME=demo-ce\nNODES=4\n", "/w/config.txt");
  ASSERT_TRUE(c.ok());
  auto out = RenderTemplate(
      "{\"name\": \"${CE_NAME}\",\n \"cmd\": \"echo $AWS_BATCH_JOB_NODE_INDEX ${NODES}\"}",
      "templates/ce.json", *c);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, "{\"name\": \"demo-ce\",\n \"cmd\": \"echo $AWS_BATCH_JOB_NODE_INDEX 4\"}");
  // The recipe's NEURON_COMPILE_CACHE_URI, or lote's COMPILE_CACHE_URI.
  auto either = RenderTemplate("${LOTE_RECIPE_TEST_UNSET:-${CE_NAME}}", "t.json", *c);
  ASSERT_TRUE(either.ok()) << either.status().ToString();
  EXPECT_EQ(*either, "demo-ce");
  auto bad = RenderTemplate("{\n\"a\": \"${LOTE_RECIPE_TEST_UNSET}\"\n}", "templates/jd.json", *c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("templates/jd.json:2: ${LOTE_RECIPE_TEST_UNSET}"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace lote
