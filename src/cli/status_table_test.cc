#include "cli/status_table.h"

#include <gtest/gtest.h>

namespace lote::cli {
namespace {

TEST(ProgressBar, FillsByFraction) {
  EXPECT_EQ(ProgressBar(0.0, 10), "[..........]   0%");
  EXPECT_EQ(ProgressBar(0.47, 10), "[####......]  47%");
  EXPECT_EQ(ProgressBar(1.0, 10), "[##########] 100%");
  EXPECT_EQ(ProgressBar(1.7, 10), "[##########] 100%");
  EXPECT_EQ(ProgressBar(-1.0, 4), "[....]   0%");
  EXPECT_EQ(ProgressBar(std::nullopt, 4), "[    ]     ");
  EXPECT_EQ(ProgressBar(0.5, 20).size(), ProgressBar(std::nullopt, 20).size());
}

TEST(JobRowFromJson, ReadsProgressOfAMultiNodeJob) {
  Json job = {{"jobId", "j1"},
              {"jobName", "train"},
              {"status", "RUNNING"},
              {"nodeProperties", {{"numNodes", 4}, {"mainNode", 1}}},
              {"progress",
               {{"nodes",
                 {{{"node", 0}, {"step", 471}, {"loss", 9.5}, {"lastProgressAt", 1000}},
                  {{"node", 1}, {"step", 470}, {"loss", 2.31416}, {"lastProgressAt", 2000}}}},
                {"step", 470},
                {"total_steps", 1000},
                {"etaSeconds", 200},
                {"lastProgressAt", 2000}}}};
  JobRow row = JobRowFromJson(job, "q", 14'500);
  EXPECT_EQ(row.queue, "q");
  EXPECT_EQ(row.job_id, "j1");
  EXPECT_EQ(row.name, "train");
  EXPECT_EQ(row.size, "4 nodes");
  ASSERT_TRUE(row.fraction);
  EXPECT_DOUBLE_EQ(*row.fraction, 0.47);
  EXPECT_EQ(row.steps, "470/1000");
  ASSERT_TRUE(row.loss);
  EXPECT_DOUBLE_EQ(*row.loss, 2.31416);  // the main node's
  EXPECT_EQ(row.eta_seconds, 200);
  EXPECT_EQ(row.quiet_seconds, 12);
}

TEST(JobRowFromJson, NoProgressAndArrays) {
  JobRow plain = JobRowFromJson(Json{{"jobId", "p"}, {"status", "RUNNABLE"}}, "q", 0);
  EXPECT_EQ(plain.size, "1");
  EXPECT_FALSE(plain.fraction);
  EXPECT_TRUE(plain.steps.empty());
  EXPECT_FALSE(plain.loss);
  EXPECT_FALSE(plain.eta_seconds);
  EXPECT_FALSE(plain.quiet_seconds);

  JobRow empty = JobRowFromJson(Json{{"jobId", "p"}, {"progress", Json::object()}}, "q", 0);
  EXPECT_FALSE(empty.fraction);

  Json array = {
      {"jobId", "a"},
      {"status", "PENDING"},
      {"arrayProperties",
       {{"size", 8}, {"statusSummary", {{"SUCCEEDED", 3}, {"FAILED", 1}, {"RUNNING", 2}}}}}};
  JobRow row = JobRowFromJson(array, "q", 0);
  EXPECT_EQ(row.size, "array 8");
  EXPECT_DOUBLE_EQ(*row.fraction, 0.5);
  EXPECT_EQ(row.steps, "4/8");

  // A step without a total still shows; the loss of any node when the main has none.
  Json partial = {{"jobId", "x"},
                  {"progress", {{"step", 12}, {"nodes", {{{"node", 2}, {"loss", 1.5}}}}}}};
  row = JobRowFromJson(partial, "q", 0);
  EXPECT_EQ(row.steps, "12");
  EXPECT_FALSE(row.fraction);
  EXPECT_DOUBLE_EQ(*row.loss, 1.5);
}

TEST(RenderStatusTable, AlignedColumnsAndEmptyQueues) {
  JobRow a;
  a.queue = "train-q";
  a.job_id = "1111";
  a.name = "llama";
  a.status = "RUNNING";
  a.size = "4 nodes";
  a.fraction = 0.25;
  a.steps = "250/1000";
  a.loss = 2.5;
  a.eta_seconds = 3725;
  a.quiet_seconds = 3;
  JobRow b;
  b.queue = "train-q";
  b.job_id = "22";
  b.name = "eval";
  b.status = "RUNNABLE";
  b.size = "1";
  std::string table = RenderStatusTable({"train-q", "idle"}, {a, b});
  EXPECT_EQ(table,
            "QUEUE    JOB ID  NAME   STATUS    SIZE     PROGRESS                     STEP      "
            "LOSS    ETA    LAST PROGRESS\n"
            "train-q  1111    llama  RUNNING   4 nodes  [#####...............]  25%  250/1000  "
            "2.5000  1h02m  3s ago\n"
            "train-q  22      eval   RUNNABLE  1        [                    ]       -         "
            "-       -      -\n"
            "idle     (no active jobs)\n");
  // Plain text only: no escape sequences for terminals.
  EXPECT_EQ(table.find('\x1b'), std::string::npos);
  EXPECT_EQ(RenderStatusTable({}, {}),
            "QUEUE  JOB ID  NAME  STATUS  SIZE  PROGRESS  STEP  LOSS  ETA  LAST PROGRESS\n");
}

}  // namespace
}  // namespace lote::cli
