#include "cli/job_logs.h"

#include <gtest/gtest.h>

#include <deque>

namespace lote::cli {
namespace {

Json Attempt(const std::string& stream, int64_t started, int64_t stopped) {
  return Json{
      {"container", {{"logStreamName", stream}}}, {"startedAt", started}, {"stoppedAt", stopped}};
}

TEST(PlanJobLogs, SingleNodeAttemptsAndTheOneInProgress) {
  Json job = {
      {"jobId", "j1"},
      {"status", "RUNNING"},
      {"startedAt", 5000},
      {"retryStrategy", {{"attempts", 3}}},
      {"attempts", {Attempt("d/default/a1", 1000, 2000), Attempt("d/default/a2", 3000, 4000)}},
      {"container", {{"image", "host"}, {"logStreamName", "d/default/a3"}}}};
  Result<JobLogPlan> plan = PlanJobLogs(job, {});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_FALSE(plan->multi_node);
  EXPECT_EQ(plan->max_attempts, 3);
  EXPECT_EQ(plan->status, "RUNNING");
  EXPECT_FALSE(plan->Final());
  ASSERT_EQ(plan->streams.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(plan->streams[i].attempt, i + 1);
    EXPECT_EQ(plan->streams[i].node, 0);
    EXPECT_EQ(plan->streams[i].stream, "d/default/a" + std::to_string(i + 1));
  }
  ASSERT_EQ(plan->attempts.size(), 3u);
  EXPECT_EQ(plan->attempts[0].started_at_ms, 1000);
  EXPECT_EQ(plan->attempts[1].started_at_ms, 3000);
  EXPECT_EQ(plan->attempts[2].started_at_ms, 5000);
}

TEST(PlanJobLogs, BetweenAttemptsTheContainerRepeatsTheLastStream) {
  // RUNNABLE again after a failed attempt: the container reports the finished
  // attempt's stream, which must not count as a new attempt.
  Json job = {{"jobId", "j1"},
              {"status", "RUNNABLE"},
              {"startedAt", 1000},
              {"attempts", {Attempt("d/default/a1", 1000, 2000)}},
              {"container", {{"logStreamName", "d/default/a1"}}}};
  Result<JobLogPlan> plan = PlanJobLogs(job, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->streams.size(), 1u);
  ASSERT_EQ(plan->attempts.size(), 1u);
  EXPECT_EQ(plan->attempts[0].number, 1);
}

TEST(PlanJobLogs, StartingAttemptHasNoStartTimeYet) {
  Json job = {{"jobId", "j1"},
              {"status", "STARTING"},
              {"startedAt", 1000},  // the previous attempt's
              {"attempts", {Attempt("s1", 1000, 2000)}},
              {"container", {{"logStreamName", "s2"}}}};
  Result<JobLogPlan> plan = PlanJobLogs(job, {});
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->attempts.size(), 2u);
  EXPECT_EQ(plan->attempts[1].number, 2);
  EXPECT_EQ(plan->attempts[1].started_at_ms, 0);
}

TEST(PlanJobLogs, MultiNodeReadsEveryNodeView) {
  Json parent = {{"jobId", "mn"},
                 {"status", "SUCCEEDED"},
                 {"startedAt", 300},
                 {"nodeProperties", {{"numNodes", 2}, {"mainNode", 0}}},
                 {"attempts", {Attempt("n0a1", 100, 200), Attempt("n0a2", 300, 400)}}};
  auto view = [](int node, const std::string& a1, const std::string& a2) {
    return Json{{"jobId", "mn#" + std::to_string(node)},
                {"nodeDetails", {{"nodeIndex", node}, {"isMainNode", node == 0}}},
                {"nodeProperties", {{"numNodes", 2}}},
                {"attempts", {Attempt(a1, 100, 200), Attempt(a2, 300, 400)}},
                {"container", {{"logStreamName", a2}}}};
  };
  Result<JobLogPlan> plan =
      PlanJobLogs(parent, {view(1, "n1a1", "n1a2"), view(0, "n0a1", "n0a2"), Json{{"junk", 1}}});
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_TRUE(plan->multi_node);
  EXPECT_EQ(plan->num_nodes, 2);
  EXPECT_TRUE(plan->Final());
  std::vector<std::string> names;
  for (const StreamRef& s : plan->streams) {
    names.push_back(std::to_string(s.attempt) + ":" + std::to_string(s.node) + ":" + s.stream);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"1:0:n0a1", "1:1:n1a1", "2:0:n0a2", "2:1:n1a2"}));
  ASSERT_EQ(plan->attempts.size(), 2u);
  EXPECT_EQ(plan->attempts[1].started_at_ms, 300);

  // A node view on its own is a single stream without node prefixes.
  Result<JobLogPlan> one = PlanJobLogs(view(1, "n1a1", "n1a2"), {});
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->multi_node);
  EXPECT_EQ(one->streams.size(), 2u);
}

TEST(PlanJobLogs, ArrayParentNamesItsChildren) {
  Json job = {{"jobId", "arr"},
              {"status", "PENDING"},
              {"arrayProperties", {{"size", 10}, {"statusSummary", Json::object()}}}};
  Result<JobLogPlan> plan = PlanJobLogs(job, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("lote logs arr:INDEX"), std::string::npos);
  EXPECT_NE(plan.status().message().find("0 to 9"), std::string::npos);
}

TEST(FilterPlan, KeepsTheChosenNodeAndAttempt) {
  JobLogPlan plan;
  plan.job_id = "mn";
  plan.multi_node = true;
  plan.num_nodes = 3;
  plan.attempts = {{1, 10}, {2, 20}};
  for (int a = 1; a <= 2; ++a) {
    for (int n = 0; n < 3; ++n) plan.streams.push_back({a, n, "s" + std::to_string(a * 10 + n)});
  }
  JobLogPlan by_node = plan;
  ASSERT_TRUE(FilterPlan(&by_node, 2, std::nullopt).ok());
  ASSERT_EQ(by_node.streams.size(), 2u);
  EXPECT_EQ(by_node.streams[0].stream, "s12");
  EXPECT_EQ(by_node.streams[1].stream, "s22");
  EXPECT_EQ(by_node.attempts.size(), 2u);

  JobLogPlan by_attempt = plan;
  ASSERT_TRUE(FilterPlan(&by_attempt, std::nullopt, 2).ok());
  EXPECT_EQ(by_attempt.streams.size(), 3u);
  ASSERT_EQ(by_attempt.attempts.size(), 1u);
  EXPECT_EQ(by_attempt.attempts[0].number, 2);

  JobLogPlan none = plan;
  ASSERT_TRUE(FilterPlan(&none, 1, 3).ok());  // an attempt that may still come
  EXPECT_TRUE(none.streams.empty());
  EXPECT_TRUE(none.attempts.empty());

  JobLogPlan bad = plan;
  Status s = FilterPlan(&bad, 3, std::nullopt);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--node 0 to 2"), std::string::npos) << s.message();
  s = FilterPlan(&bad, std::nullopt, 0);
  EXPECT_NE(s.message().find("counts from 1"), std::string::npos) << s.message();

  JobLogPlan single;
  single.job_id = "one";
  single.streams = {{1, 0, "x"}};
  EXPECT_TRUE(FilterPlan(&single, 0, std::nullopt).ok());
  s = FilterPlan(&single, 1, std::nullopt);
  EXPECT_NE(s.message().find("single-node"), std::string::npos) << s.message();
}

TEST(ExitCodeForStatus, OnlyFailedIsNonZero) {
  EXPECT_EQ(ExitCodeForStatus("SUCCEEDED"), 0);
  EXPECT_EQ(ExitCodeForStatus("FAILED"), 1);
  EXPECT_EQ(ExitCodeForStatus("RUNNING"), 0);
}

// Pages handed out in order; more can be appended between drains. Counts
// calls so tests can see that pages are pulled lazily.
class FakePages : public PageSource {
 public:
  explicit FakePages(std::deque<std::vector<LogLine>>* pages, int* calls)
      : pages_(pages), calls_(calls) {}
  Result<std::vector<LogLine>> NextPage() override {
    ++*calls_;
    if (pages_->empty()) return std::vector<LogLine>{};
    std::vector<LogLine> page = std::move(pages_->front());
    pages_->pop_front();
    return page;
  }

 private:
  std::deque<std::vector<LogLine>>* pages_;
  int* calls_;
};

class FailingPages : public PageSource {
 public:
  Result<std::vector<LogLine>> NextPage() override { return Status::Unavailable("server down"); }
};

std::vector<LogLine> Lines(std::initializer_list<std::pair<int64_t, const char*>> items) {
  std::vector<LogLine> out;
  for (const auto& [ts, msg] : items) out.push_back({ts, msg});
  return out;
}

TEST(LogMerger, MergesByAttemptThenTimeThenNodeKeepingStreamOrder) {
  std::deque<std::vector<LogLine>> n0 = {Lines({{10, "a0"}, {30, "c0"}}), Lines({{50, "e0"}})};
  std::deque<std::vector<LogLine>> n1 = {Lines({{10, "a1"}}), Lines({{20, "b1"}, {60, "f1"}})};
  // Timestamps going backwards within a stream do not reorder it.
  std::deque<std::vector<LogLine>> n2 = {Lines({{40, "d2"}, {5, "d2-late-clock"}})};
  std::deque<std::vector<LogLine>> retry = {Lines({{1, "retry0"}})};
  int calls = 0;
  LogMerger merger;
  merger.Add(2, 0, std::make_unique<FakePages>(&retry, &calls));
  merger.Add(1, 0, std::make_unique<FakePages>(&n0, &calls));
  merger.Add(1, 1, std::make_unique<FakePages>(&n1, &calls));
  merger.Add(1, 2, std::make_unique<FakePages>(&n2, &calls));
  std::vector<std::string> got;
  Result<uint64_t> n = merger.Drain([&](int32_t attempt, int32_t node, const LogLine& line) {
    got.push_back(std::to_string(attempt) + "/" + std::to_string(node) + " " + line.message);
  });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 9u);
  EXPECT_EQ(got, (std::vector<std::string>{"1/0 a0", "1/1 a1", "1/1 b1", "1/0 c0", "1/2 d2",
                                           "1/2 d2-late-clock", "1/0 e0", "1/1 f1", "2/0 retry0"}));

  // New output appended later comes out of the next drain, merged again.
  n0.push_back(Lines({{70, "g0"}}));
  n1.push_back(Lines({{65, "g1"}}));
  got.clear();
  n = merger.Drain([&](int32_t, int32_t node, const LogLine& line) {
    got.push_back(std::to_string(node) + " " + line.message);
  });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(got, (std::vector<std::string>{"1 g1", "0 g0"}));
  n = merger.Drain([&](int32_t, int32_t, const LogLine&) {});
  EXPECT_EQ(*n, 0u);
}

TEST(LogMerger, PullsPagesLazily) {
  // One stream of many pages and one short stream: the merge must not read
  // the long stream ahead of what it emits.
  std::deque<std::vector<LogLine>> long_stream;
  for (int p = 0; p < 100; ++p) long_stream.push_back(Lines({{100 + p, "x"}}));
  std::deque<std::vector<LogLine>> short_stream = {Lines({{0, "first"}})};
  int calls = 0;
  LogMerger merger;
  merger.Add(1, 0, std::make_unique<FakePages>(&long_stream, &calls));
  merger.Add(1, 1, std::make_unique<FakePages>(&short_stream, &calls));
  int emitted = 0;
  Result<uint64_t> n = merger.Drain([&](int32_t, int32_t node, const LogLine& line) {
    if (emitted == 0) {
      EXPECT_EQ(node, 1);
      EXPECT_EQ(line.message, "first");
      EXPECT_EQ(long_stream.size(), 99u);  // only its first page was read so far
    }
    ++emitted;
  });
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 101u);
  EXPECT_TRUE(long_stream.empty());
}

TEST(LogMerger, ErrorsStopTheDrain) {
  LogMerger merger;
  merger.Add(1, 0, std::make_unique<FailingPages>());
  Result<uint64_t> n = merger.Drain([](int32_t, int32_t, const LogLine&) {});
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), StatusCode::kUnavailable);
}

TEST(LogPrinter, PrefixesAndAttemptHeaders) {
  std::string out;
  LogPrinter printer(true, true, [&](std::string_view s) { out += s; });
  printer.KnowAttempt({1, 1'796'034'600'000});
  printer.KnowAttempt({2, 0});
  printer.Line(1, 0, {1, "hello"});
  printer.Line(1, 3, {2, "world"});
  printer.KnowAttempt({2, 1'796'034'660'000});  // learned its start time
  printer.Line(2, 1, {3, "again"});
  printer.KnowAttempt({3, 0});
  printer.AnnounceAttempts();  // attempt 3 started but has no output yet
  printer.AnnounceAttempts();  // each header once
  printer.Line(1, 0, {4, "late line of attempt 1"});
  EXPECT_EQ(out,
            "--- attempt 1 (started 2026-11-30T10:30:00Z) ---\n"
            "[node 0] hello\n"
            "[node 3] world\n"
            "--- attempt 2 (started 2026-11-30T10:31:00Z) ---\n"
            "[node 1] again\n"
            "--- attempt 3 (not started yet) ---\n"
            "[node 0] late line of attempt 1\n");
}

TEST(LogPrinter, PlainOutputForSingleNodeSingleAttempt) {
  std::string out;
  LogPrinter printer(false, false, [&](std::string_view s) { out += s; });
  printer.KnowAttempt({1, 5});
  printer.Line(1, 0, {1, "just the line"});
  printer.Line(1, 0, {2, ""});
  printer.AnnounceAttempts();
  EXPECT_EQ(out, "just the line\n\n");
}

}  // namespace
}  // namespace lote::cli
