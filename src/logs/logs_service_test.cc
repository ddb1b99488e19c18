#include "logs/logs_service.h"

#include <gtest/gtest.h>

#include <set>

#include "logs/stream_names.h"
#include "logs/test_util.h"

namespace lote::logs {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'700'000'000'000;
constexpr int64_t kHour = 3'600'000;
constexpr int64_t kDay = 24 * kHour;

class LogsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LogStoreOptions o;
    o.root = dir_.path() + "/logs";
    o.clock = &clock_;
    o.segment_bytes = 1 << 20;
    auto s = LogStore::Open(o);
    ASSERT_TRUE(s.ok());
    store_ = std::move(*s);
    svc_ = std::make_unique<LogsService>(store_.get(), &clock_);
  }
  Json Ok(std::string_view op, const Json& req) {
    auto r = svc_->Call(op, req);
    EXPECT_TRUE(r.ok()) << op << ": " << r.status().ToString();
    return r.ok() ? *r : Json();
  }
  StatusCode Err(std::string_view op, const Json& req) {
    auto r = svc_->Call(op, req);
    EXPECT_FALSE(r.ok()) << op << " unexpectedly succeeded: " << req.dump();
    return r.ok() ? StatusCode::kOk : r.status().code();
  }
  void Put(const std::string& g, const std::string& s, int from, int to, int64_t ts0,
           int64_t step = 1) {
    Json events = Json::array();
    for (int i = from; i < to; ++i) {
      events.push_back(
          {{"timestamp", ts0 + (i - from) * step}, {"message", "event " + std::to_string(i)}});
    }
    Json r = Ok("PutLogEvents", {{"logGroupName", g}, {"logStreamName", s}, {"logEvents", events}});
    EXPECT_FALSE(r.contains("rejectedLogEventsInfo")) << r.dump();
  }

  TempDir dir_;
  FakeClock clock_{kT0};
  std::unique_ptr<LogStore> store_;
  std::unique_ptr<LogsService> svc_;
};

TEST_F(LogsServiceTest, GroupsCreateDescribePaginateDelete) {
  for (int i = 0; i < 7; ++i)
    Ok("CreateLogGroup", {{"logGroupName", "/lote/g" + std::to_string(i)}});
  Ok("CreateLogGroup", {{"logGroupName", "other"}});
  EXPECT_EQ(Err("CreateLogGroup", {{"logGroupName", "/lote/g1"}}), StatusCode::kAlreadyExists);
  EXPECT_EQ(Err("CreateLogGroup", {{"logGroupName", "bad:name"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("CreateLogGroup", {{"logGroupName", "aws/reserved"}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("CreateLogGroup", Json::object()), StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("CreateLogGroup", {{"logGroupName", 5}}), StatusCode::kInvalidArgument);

  std::vector<std::string> names;
  Json req = {{"logGroupNamePrefix", "/lote/"}, {"limit", 3}};
  for (;;) {
    Json r = Ok("DescribeLogGroups", req);
    for (const auto& g : r["logGroups"]) names.push_back(g["logGroupName"]);
    if (!r.contains("nextToken")) break;
    req["nextToken"] = r["nextToken"];
  }
  ASSERT_EQ(names.size(), 7u);
  EXPECT_EQ(names.front(), "/lote/g0");
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  Json one = Ok("DescribeLogGroups", {{"logGroupNamePattern", "OTH"}});
  ASSERT_EQ(one["logGroups"].size(), 1u);
  EXPECT_EQ(one["logGroups"][0]["arn"], "arn:aws:logs:us-east-1:000000000000:log-group:other:*");
  EXPECT_EQ(one["logGroups"][0]["creationTime"], kT0);
  EXPECT_EQ(Err("DescribeLogGroups", {{"nextToken", "garbage!"}}), StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("DescribeLogGroups", {{"limit", 51}}), StatusCode::kInvalidArgument);

  Ok("PutRetentionPolicy", {{"logGroupName", "other"}, {"retentionInDays", 14}});
  EXPECT_EQ(Err("PutRetentionPolicy", {{"logGroupName", "other"}, {"retentionInDays", 2}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("PutRetentionPolicy", {{"logGroupName", "nope"}, {"retentionInDays", 1}}),
            StatusCode::kNotFound);
  EXPECT_EQ(
      Ok("DescribeLogGroups", {{"logGroupNamePrefix", "other"}})["logGroups"][0]["retentionInDays"],
      14);
  Ok("DeleteRetentionPolicy", {{"logGroupName", "other"}});
  EXPECT_FALSE(Ok("DescribeLogGroups", {{"logGroupNamePrefix", "other"}})["logGroups"][0].contains(
      "retentionInDays"));

  Ok("DeleteLogGroup", {{"logGroupName", "other"}});
  EXPECT_EQ(Err("DeleteLogGroup", {{"logGroupName", "other"}}), StatusCode::kNotFound);
  EXPECT_EQ(Err("NoSuchOperation", Json::object()), StatusCode::kUnimplemented);
  EXPECT_TRUE(LogsService::Supports("GetLogEvents"));
}

TEST_F(LogsServiceTest, StreamsOrderingAndPagination) {
  Ok("CreateLogGroup", {{"logGroupName", "g"}});
  EXPECT_EQ(Err("CreateLogStream", {{"logGroupName", "nope"}, {"logStreamName", "s"}}),
            StatusCode::kNotFound);
  EXPECT_EQ(Err("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", "a:b"}}),
            StatusCode::kInvalidArgument);
  for (std::string s : {"c", "a", "b", "d"})
    Ok("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", s}});
  EXPECT_EQ(Err("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", "a"}}),
            StatusCode::kAlreadyExists);
  Put("g", "b", 0, 1, kT0 + 30);
  Put("g", "d", 0, 1, kT0 + 10);
  Put("g", "a", 0, 1, kT0 + 20);

  auto names = [&](Json req) {
    std::vector<std::string> out;
    req["logGroupName"] = "g";
    req["limit"] = 2;
    for (;;) {
      Json r = Ok("DescribeLogStreams", req);
      for (const auto& s : r["logStreams"]) out.push_back(s["logStreamName"]);
      if (!r.contains("nextToken")) break;
      req["nextToken"] = r["nextToken"];
    }
    return out;
  };
  EXPECT_EQ(names(Json::object()), (std::vector<std::string>{"a", "b", "c", "d"}));
  EXPECT_EQ(names({{"descending", true}}), (std::vector<std::string>{"d", "c", "b", "a"}));
  EXPECT_EQ(names({{"orderBy", "LastEventTime"}}), (std::vector<std::string>{"c", "d", "a", "b"}));
  EXPECT_EQ(names({{"orderBy", "LastEventTime"}, {"descending", true}}),
            (std::vector<std::string>{"b", "a", "d", "c"}));
  EXPECT_EQ(names({{"logStreamNamePrefix", "b"}}), (std::vector<std::string>{"b"}));
  EXPECT_EQ(
      Err("DescribeLogStreams",
          {{"logGroupName", "g"}, {"orderBy", "LastEventTime"}, {"logStreamNamePrefix", "a"}}),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("DescribeLogStreams", {{"logGroupName", "nope"}}), StatusCode::kNotFound);
  EXPECT_EQ(Err("DescribeLogStreams", Json::object()), StatusCode::kInvalidArgument);

  Json r = Ok("DescribeLogStreams",
              {{"logGroupIdentifier", "arn:aws:logs:us-east-1:000000000000:log-group:g:*"},
               {"logStreamNamePrefix", "b"}});
  ASSERT_EQ(r["logStreams"].size(), 1u);
  const Json& b = r["logStreams"][0];
  EXPECT_EQ(b["firstEventTimestamp"], kT0 + 30);
  EXPECT_EQ(b["lastEventTimestamp"], kT0 + 30);
  EXPECT_EQ(b["lastIngestionTime"], kT0);
  EXPECT_EQ(b["arn"], "arn:aws:logs:us-east-1:000000000000:log-group:g:log-stream:b");

  Ok("DeleteLogStream", {{"logGroupName", "g"}, {"logStreamName", "b"}});
  EXPECT_EQ(Err("DeleteLogStream", {{"logGroupName", "g"}, {"logStreamName", "b"}}),
            StatusCode::kNotFound);
  EXPECT_EQ(names(Json::object()), (std::vector<std::string>{"a", "c", "d"}));
}

TEST_F(LogsServiceTest, PutLogEventsRulesAndRejections) {
  Ok("CreateLogGroup", {{"logGroupName", "g"}});
  Ok("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", "s"}});
  auto put = [&](Json events, std::string stream = "s") {
    return svc_->Call("PutLogEvents", {{"logGroupName", "g"},
                                       {"logStreamName", stream},
                                       {"logEvents", events},
                                       {"sequenceToken", "anything-is-ignored"}});
  };
  EXPECT_TRUE(
      put(Json::array({{{"timestamp", kT0}, {"message", "x"}}}), "missing").status().IsNotFound());
  EXPECT_TRUE(put(Json::array()).status().IsInvalidArgument());
  EXPECT_TRUE(
      put(Json::array({{{"timestamp", kT0}, {"message", ""}}})).status().IsInvalidArgument());
  EXPECT_TRUE(put(Json::array({{{"timestamp", kT0 + 5}, {"message", "b"}},
                               {{"timestamp", kT0}, {"message", "a"}}}))
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(put(Json::array({{{"timestamp", kT0}, {"message", std::string(1 << 20, 'x')}}}))
                  .status()
                  .IsInvalidArgument());
  EXPECT_TRUE(put(Json::array({{{"message", "no timestamp"}}})).status().IsInvalidArgument());

  auto r = put(Json::array({{{"timestamp", kT0 - 15 * kDay}, {"message", "too old"}},
                            {{"timestamp", kT0 - 1}, {"message", "ok 1"}},
                            {{"timestamp", kT0 + kHour}, {"message", "ok 2"}},
                            {{"timestamp", kT0 + 3 * kHour}, {"message", "too new"}}}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["rejectedLogEventsInfo"]["tooOldLogEventEndIndex"], 1);
  EXPECT_EQ((*r)["rejectedLogEventsInfo"]["tooNewLogEventStartIndex"], 3);
  EXPECT_TRUE((*r).contains("nextSequenceToken"));

  Ok("PutRetentionPolicy", {{"logGroupName", "g"}, {"retentionInDays", 1}});
  r = put(Json::array({{{"timestamp", kT0 - 2 * kDay}, {"message", "expired"}},
                       {{"timestamp", kT0}, {"message", "ok 3"}}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["rejectedLogEventsInfo"]["expiredLogEventEndIndex"], 1);

  Json got =
      Ok("GetLogEvents", {{"logGroupName", "g"}, {"logStreamName", "s"}, {"startFromHead", true}});
  std::vector<std::string> msgs;
  for (const auto& e : got["events"]) msgs.push_back(e["message"]);
  EXPECT_EQ(msgs, (std::vector<std::string>{"ok 1", "ok 2", "ok 3"}));
}

// Token pagination over a stream of 100,000 events, as the CLI pages.
TEST_F(LogsServiceTest, GetLogEventsTokensOverHundredThousandEvents) {
  Ok("CreateLogGroup", {{"logGroupName", "g"}});
  Ok("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", "s"}});
  constexpr int kN = 100'000;
  for (int i = 0; i < kN; i += 10'000) Put("g", "s", i, i + 10'000, kT0 - kHour + i, 1);

  // Forward from the head: pages of up to 10,000, until the token repeats.
  Json req = {{"logGroupName", "g"}, {"logStreamName", "s"}, {"startFromHead", true}};
  int next = 0, pages = 0;
  std::string last_token;
  for (;;) {
    Json r = Ok("GetLogEvents", req);
    ++pages;
    for (const auto& e : r["events"]) {
      ASSERT_EQ(e["message"], "event " + std::to_string(next));
      ++next;
    }
    std::string fwd = r["nextForwardToken"];
    ASSERT_TRUE(fwd.starts_with("f/"));
    ASSERT_TRUE(std::string(r["nextBackwardToken"]).starts_with("b/"));
    if (req.contains("nextToken") && fwd == req["nextToken"]) {
      EXPECT_TRUE(r["events"].empty());
      last_token = fwd;
      break;
    }
    req["nextToken"] = fwd;
    ASSERT_LT(pages, 100);
  }
  EXPECT_EQ(next, kN);
  EXPECT_EQ(pages, 11);  // 10 full pages, then the same token with nothing new

  // New events appear after the saved forward token.
  Put("g", "s", kN, kN + 3, kT0);
  Json more = Ok("GetLogEvents",
                 {{"logGroupName", "g"}, {"logStreamName", "s"}, {"nextToken", last_token}});
  ASSERT_EQ(more["events"].size(), 3u);
  EXPECT_EQ(more["events"][0]["message"], "event 100000");

  // Default (startFromHead false): the latest events, then backward pages.
  Json tail = Ok("GetLogEvents", {{"logGroupName", "g"}, {"logStreamName", "s"}, {"limit", 100}});
  ASSERT_EQ(tail["events"].size(), 100u);
  EXPECT_EQ(tail["events"][99]["message"], "event 100002");
  EXPECT_EQ(tail["events"][0]["message"], "event 99903");
  Json back = {
      {"logGroupName", "g"}, {"logStreamName", "s"}, {"nextToken", tail["nextBackwardToken"]}};
  int expect = 99902, total = 100;
  for (;;) {
    Json r = Ok("GetLogEvents", back);
    for (auto it = r["events"].rbegin(); it != r["events"].rend(); ++it) {
      ASSERT_EQ((*it)["message"], "event " + std::to_string(expect));
      --expect;
      ++total;
    }
    if (r["nextBackwardToken"] == back["nextToken"]) break;
    back["nextToken"] = r["nextBackwardToken"];
  }
  EXPECT_EQ(total, kN + 3);
  EXPECT_EQ(expect, -1);

  // A time range, and a bad token.
  Json range = Ok("GetLogEvents", {{"logGroupName", "g"},
                                   {"logStreamName", "s"},
                                   {"startFromHead", true},
                                   {"startTime", kT0 - kHour + 500},
                                   {"endTime", kT0 - kHour + 510}});
  ASSERT_EQ(range["events"].size(), 10u);
  EXPECT_EQ(range["events"][0]["message"], "event 500");
  EXPECT_EQ(range["events"][0]["timestamp"], kT0 - kHour + 500);
  EXPECT_EQ(range["events"][0]["ingestionTime"], kT0);
  EXPECT_EQ(
      Err("GetLogEvents", {{"logGroupName", "g"}, {"logStreamName", "s"}, {"nextToken", "x/123"}}),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("GetLogEvents", {{"logGroupName", "g"}, {"logStreamName", "nope"}}),
            StatusCode::kNotFound);
  // An empty stream: tokens exist and repeat.
  Ok("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", "empty"}});
  Json e1 = Ok("GetLogEvents",
               {{"logGroupName", "g"}, {"logStreamName", "empty"}, {"startFromHead", true}});
  Json e2 = Ok(
      "GetLogEvents",
      {{"logGroupName", "g"}, {"logStreamName", "empty"}, {"nextToken", e1["nextForwardToken"]}});
  EXPECT_EQ(e1["nextForwardToken"], e2["nextForwardToken"]);
}

TEST_F(LogsServiceTest, FilterLogEventsInterleavesFiltersAndPaginates) {
  Ok("CreateLogGroup", {{"logGroupName", "g"}});
  for (int node = 0; node < 3; ++node) {
    std::string s = "job/default/node" + std::to_string(node);
    Ok("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", s}});
    Json events = Json::array();
    for (int i = 0; i < 50; ++i) {
      std::string msg = "node " + std::to_string(node) + " step " + std::to_string(i) +
                        (i % 10 == 0 ? " ERROR out of memory" : " ok");
      events.push_back({{"timestamp", kT0 - 1000 + i * 3 + node}, {"message", msg}});
    }
    Ok("PutLogEvents", {{"logGroupName", "g"}, {"logStreamName", s}, {"logEvents", events}});
  }
  Ok("CreateLogStream", {{"logGroupName", "g"}, {"logStreamName", "other"}});

  // Everything, in timestamp order across streams, 40 at a time.
  Json req = {{"logGroupName", "g"}, {"logStreamNamePrefix", "job/"}, {"limit", 40}};
  std::vector<Json> all;
  std::set<std::string> ids;
  for (int pages = 0;; ++pages) {
    ASSERT_LT(pages, 20);
    Json r = Ok("FilterLogEvents", req);
    for (const auto& e : r["events"]) {
      all.push_back(e);
      ids.insert(e["eventId"]);
    }
    EXPECT_EQ(r["searchedLogStreams"].size(), 3u);
    if (!r.contains("nextToken")) {
      for (const auto& s : r["searchedLogStreams"]) EXPECT_TRUE(s["searchedCompletely"]);
      break;
    }
    req["nextToken"] = r["nextToken"];
  }
  ASSERT_EQ(all.size(), 150u);
  EXPECT_EQ(ids.size(), 150u);
  for (size_t i = 1; i < all.size(); ++i) ASSERT_LE(all[i - 1]["timestamp"], all[i]["timestamp"]);
  EXPECT_EQ(all[0]["logStreamName"], "job/default/node0");
  EXPECT_EQ(all[1]["logStreamName"], "job/default/node1");

  // Terms and phrases, stream names, inclusive time range.
  Json f =
      Ok("FilterLogEvents", {{"logGroupName", "g"}, {"filterPattern", "ERROR \"out of memory\""}});
  EXPECT_EQ(f["events"].size(), 15u);
  f = Ok("FilterLogEvents", {{"logGroupName", "g"},
                             {"logStreamNames", {"job/default/node2"}},
                             {"filterPattern", "ERROR"},
                             {"startTime", kT0 - 1000},
                             {"endTime", kT0 - 1000 + 30 * 3 + 2}});
  ASSERT_EQ(f["events"].size(), 4u);  // steps 0, 10, 20, 30 of node 2
  EXPECT_EQ(f["events"][3]["message"], "node 2 step 30 ERROR out of memory");
  ASSERT_EQ(f["searchedLogStreams"].size(), 1u);
  // Named streams are searched in name order, once each; a name without a stream is skipped.
  f = Ok("FilterLogEvents",
         {{"logGroupName", "g"},
          {"logStreamNames",
           {"job/default/node1", "no/such/stream", "job/default/node0", "job/default/node1"}},
          {"filterPattern", "\"step 30 ERROR\""}});
  ASSERT_EQ(f["events"].size(), 2u);
  EXPECT_EQ(f["events"][0]["logStreamName"], "job/default/node0");
  EXPECT_EQ(f["events"][1]["logStreamName"], "job/default/node1");
  ASSERT_EQ(f["searchedLogStreams"].size(), 2u);
  EXPECT_EQ(Err("FilterLogEvents", {{"logGroupName", "missing"}, {"logStreamNames", {"a"}}}),
            StatusCode::kNotFound);
  EXPECT_EQ(Err("FilterLogEvents",
                {{"logGroupName", "g"}, {"logStreamNames", {"a"}}, {"logStreamNamePrefix", "a"}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("FilterLogEvents", {{"logGroupName", "g"}, {"filterPattern", "{ $.x = 1 }"}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("FilterLogEvents", {{"logGroupName", "g"}, {"nextToken", "bm9wZQ=="}}),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Err("FilterLogEvents", {{"logGroupName", "missing"}}), StatusCode::kNotFound);
}

TEST(StreamNames, BatchNamingAndValidation) {
  std::string id = NewTaskId();
  EXPECT_EQ(id.size(), 32u);
  EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(NewTaskId(), id);
  auto n = BatchLogStreamName("llama-train", id);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, "llama-train/default/" + id);
  EXPECT_TRUE(BatchLogStreamName("", id).status().IsInvalidArgument());
  EXPECT_TRUE(BatchLogStreamName("bad:def", id).status().IsInvalidArgument());
  EXPECT_TRUE(ValidateLogGroupName(kBatchJobLogGroup).ok());
  EXPECT_FALSE(ValidateLogGroupName("has space").ok());
  EXPECT_FALSE(ValidateLogStreamName(std::string(513, 'a')).ok());
}

}  // namespace
}  // namespace lote::logs
