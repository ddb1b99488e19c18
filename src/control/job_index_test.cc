#include "control/job_index.h"

#include <gtest/gtest.h>

namespace lote::control {
namespace {

Job JobWith(const std::string& id, JobStatus status) {
  Job job;
  job.id = id;
  job.queue_arn = "arn:q";
  job.status = status;
  return job;
}

Job Running(const std::string& id, int64_t started_at) {
  Job job = JobWith(id, JobStatus::kRunning);
  job.timeout_seconds = 10;
  job.parameters[kProgressTimeoutKey] = "30";
  Attempt a;
  a.started_at = started_at;
  job.attempts.push_back(a);
  return job;
}

TEST(JobIndex, ARunningJobIsIndexedUntilItEnds) {
  JobIndex index;
  const Job running = Running("r", 1000);
  index.Update(nullptr, running);
  EXPECT_TRUE(index.DueTimeouts(10'999).empty());
  EXPECT_EQ(index.DueTimeouts(11'000), std::vector<std::string>{"r"});
  EXPECT_EQ(index.HangWatched(), std::set<std::string>{"r"});
  EXPECT_EQ(index.Holding(), std::set<std::string>{"r"});
  Job ended = running;
  ended.status = JobStatus::kSucceeded;
  index.Update(&running, ended);
  EXPECT_TRUE(index.DueTimeouts(1'000'000).empty());
  EXPECT_TRUE(index.HangWatched().empty());
  EXPECT_TRUE(index.Holding().empty());
  // Only counted now (lote_jobs).
  JobIndex only_ended;
  only_ended.Update(nullptr, ended);
  EXPECT_EQ(index, only_ended);
  EXPECT_EQ(index.CountsByQueue().size(), 1u);
  EXPECT_EQ(index.CountsByQueue().begin()->second, 1);
}

TEST(JobIndex, WaitersAreWokenByTheJobTheyWaitOnAndLeaveWhenRunnable) {
  JobIndex index;
  const Job a = JobWith("a", JobStatus::kRunnable);
  Job b = JobWith("b", JobStatus::kSubmitted);
  b.wait_for = {"a", "m#1"};  // a job and a node of a multi-node job
  index.Update(nullptr, a);
  index.Update(nullptr, b);
  EXPECT_EQ(index.TakeDependencyCandidates(), std::vector<std::string>{"b"});  // new
  EXPECT_TRUE(index.TakeDependencyCandidates().empty());
  EXPECT_EQ(index.WaitersOf("a"), std::set<std::string>{"b"});
  EXPECT_EQ(index.WaitersOf("m"), std::set<std::string>{"b"});
  EXPECT_EQ(index.RunnableByQueue().at("arn:q"), std::set<std::string>{"a"});
  Job a2 = a;
  a2.tags["k"] = "v";  // no status change: nobody to re-evaluate
  index.Update(&a, a2);
  EXPECT_TRUE(index.TakeDependencyCandidates().empty());
  Job a3 = a2;
  a3.status = JobStatus::kFailed;
  index.Update(&a2, a3);
  EXPECT_EQ(index.TakeDependencyCandidates(), std::vector<std::string>{"b"});
  EXPECT_FALSE(index.RunnableByQueue().count("arn:q"));
  Job b2 = b;
  b2.status = JobStatus::kFailed;
  index.Update(&b, b2);
  EXPECT_TRUE(index.WaitersOf("a").empty());
  EXPECT_TRUE(index.WaitersOf("m").empty());
}

TEST(JobIndex, ArrayChildrenAreCountedPerParent) {
  JobIndex index;
  Job parent = JobWith("p", JobStatus::kPending);
  parent.array = ArrayInfo{3, -1, {}, 0};
  index.Update(nullptr, parent);
  std::vector<Job> children;
  for (int32_t i = 0; i < 3; ++i) {
    Job child = JobWith(ArrayChildId("p", i), JobStatus::kRunnable);
    child.array = ArrayInfo{3, i, {}, 0};
    index.Update(nullptr, child);
    children.push_back(child);
  }
  EXPECT_EQ(index.TakeChangedArrayParents(), std::vector<std::string>{"p"});
  EXPECT_EQ(index.ArrayChildCounts("p").at("RUNNABLE"), 3);
  Job done = children[1];
  done.status = JobStatus::kSucceeded;
  index.Update(&children[1], done);
  EXPECT_EQ(index.TakeChangedArrayParents(), std::vector<std::string>{"p"});
  EXPECT_EQ(index.ArrayChildCounts("p").at("RUNNABLE"), 2);
  EXPECT_EQ(index.ArrayChildCounts("p").at("SUCCEEDED"), 1);
  // The parent itself is never a scheduling candidate.
  EXPECT_EQ(index.RunnableByQueue().at("arn:q").size(), 2u);
}

// ListJobs' order per queue and shown status: top-level jobs by (createdAt,
// id); array children left out; a job moves with its status; a STARTING job
// the backend holds pending is listed as RUNNABLE (what ListJobs shows).
TEST(JobIndex, QueueListingsFollowTheShownStatusInCreatedOrder) {
  JobIndex index;
  auto at = [](const std::string& id, JobStatus status, int64_t created) {
    Job job = JobWith(id, status);
    job.created_at = created;
    return job;
  };
  index.Update(nullptr, at("b", JobStatus::kRunnable, 20));
  index.Update(nullptr, at("a", JobStatus::kRunnable, 20));
  index.Update(nullptr, at("c", JobStatus::kRunnable, 10));
  Job child = at(ArrayChildId("c", 0), JobStatus::kRunnable, 10);
  child.array = ArrayInfo{1, 0, {}, 0};
  index.Update(nullptr, child);
  const JobIndex::Listed* runnable = index.ListedJobs("arn:q", JobStatus::kRunnable);
  ASSERT_NE(runnable, nullptr);
  EXPECT_EQ(*runnable, (JobIndex::Listed{{10, "c"}, {20, "a"}, {20, "b"}}));
  EXPECT_EQ(index.ListedJobs("arn:q", JobStatus::kSucceeded), nullptr);
  EXPECT_EQ(index.ListedJobs("arn:other", JobStatus::kRunnable), nullptr);
  Job before = at("a", JobStatus::kRunnable, 20);
  Job pending = at("a", JobStatus::kStarting, 20);
  Attempt held;
  held.pending_reason = "the backend holds it";
  pending.attempts.push_back(held);
  index.Update(&before, pending);
  EXPECT_EQ(index.ListedJobs("arn:q", JobStatus::kStarting), nullptr);
  EXPECT_EQ(index.ListedJobs("arn:q", JobStatus::kRunnable)->size(), 3u);
  Job done = at("a", JobStatus::kSucceeded, 20);
  index.Update(&pending, done);
  EXPECT_EQ(*index.ListedJobs("arn:q", JobStatus::kSucceeded), (JobIndex::Listed{{20, "a"}}));
  EXPECT_EQ(*index.ListedJobs("arn:q", JobStatus::kRunnable),
            (JobIndex::Listed{{10, "c"}, {20, "b"}}));
  JobTable table;
  for (const Job& j :
       {at("b", JobStatus::kRunnable, 20), done, at("c", JobStatus::kRunnable, 10), child})
    table[j.id] = j;
  JobIndex rebuilt;
  rebuilt.Rebuild(table);
  EXPECT_EQ(index, rebuilt);
}

// What a sequence of changes leaves is what a restart (Rebuild) finds.
TEST(JobIndex, ARebuildFromTheTableEqualsTheIndexKeptByChanges) {
  JobTable jobs;
  JobIndex kept;
  auto change = [&](const Job& after) {
    auto it = jobs.find(after.id);
    kept.Update(it == jobs.end() ? nullptr : &it->second, after);
    jobs[after.id] = after;
  };
  Job w = JobWith("w", JobStatus::kPending);
  w.wait_for = {"r"};
  change(Running("r", 5));
  change(w);
  change(JobWith("q", JobStatus::kRunnable));
  Job r = Running("r", 5);
  r.status = JobStatus::kSucceeded;
  change(r);
  w.status = JobStatus::kRunnable;
  change(w);
  change(Running("s", 9));
  JobIndex rebuilt;
  rebuilt.Rebuild(jobs);
  EXPECT_EQ(kept, rebuilt);
  EXPECT_EQ(rebuilt.RunnableByQueue().at("arn:q"), (std::set<std::string>{"q", "w"}));
  EXPECT_EQ(rebuilt.Holding(), std::set<std::string>{"s"});
}

}  // namespace
}  // namespace lote::control
