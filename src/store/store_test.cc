#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "store/schema.h"

namespace lote::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/lote_store_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/lote.db";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // The database an older lote left: the migrations up to `version`, then
  // `rows` (SQL), for a test of the migrations after it.
  void WriteDatabaseAt(int32_t version, const std::string& rows) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
    std::string sql =
        "CREATE TABLE schema_version (version INTEGER NOT NULL);"
        "INSERT INTO schema_version (version) VALUES (" +
        std::to_string(version) + ");";
    for (const Migration& m : Migrations())
      if (m.version <= version) sql += std::string(m.sql);
    sql += rows;
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
    sqlite3_close(db);
  }
  std::string dir_;
  std::string path_;
};

ResourceRow Queue(const std::string& name, const std::string& doc) {
  return ResourceRow{
      ResourceKind::kJobQueue, "arn:aws:batch:us-east-1:0:job-queue/" + name, name, 0, doc, 1};
}

TEST_F(StoreTest, FreshDatabaseIsAtLatestSchemaVersion) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->schema_version(), LatestSchemaVersion());
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->resources.empty());
}

// IAM users and the audit trail survive a reopen; the audit is
// filtered by principal and time and keeps commit order.
// Version 4 moves the owners version 3 kept in job_owners into their jobs'
// docs (array children too) and drops the table.
TEST_F(StoreTest, MigrationFourMovesJobOwnersIntoJobs) {
  WriteDatabaseAt(3,
                  R"(INSERT INTO jobs VALUES ('j1', 'n', 'arn:q', 'RUNNING', 1, 1, '{"id":"j1"}');
            INSERT INTO jobs VALUES ('j1:0', 'n', 'arn:q', 'RUNNING', 1, 1, '{"id":"j1:0"}');
            INSERT INTO jobs VALUES ('j2', 'n', 'arn:q', 'RUNNING', 1, 1, '{"id":"j2"}');
            INSERT INTO job_owners VALUES ('j1', 'alice', 'arn:q');)");
  if (HasFatalFailure()) return;
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_EQ((*store)->schema_version(), LatestSchemaVersion());
  for (const char* id : {"j1", "j1:0", "j2"}) {
    auto row = (*store)->FindJob(id);
    ASSERT_TRUE(row.ok() && row->has_value()) << id;
    EXPECT_EQ((*row)->doc.find(R"("owner":"alice")") != std::string::npos, std::string(id) != "j2")
        << (*row)->doc;
  }
}

TEST_F(StoreTest, IamRowsAndAuditSurviveReopen) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    WriteBatch b;
    b.PutIamUser(IamUserRow{"alice", R"({"UserName":"alice"})", 5});
    b.PutIamUser(IamUserRow{"bob", R"({"UserName":"bob"})", 6});
    b.AppendAudit(AuditRow{0, 100, "alice", "batch:SubmitJob", "arn:q", "Allowed", "r1"});
    b.AppendAudit(AuditRow{0, 200, "bob", "batch:SubmitJob", "arn:q", "AccessDenied", "r2"});
    b.AppendAudit(AuditRow{0, 300, "alice", "batch:CancelJob", "arn:j", "Allowed", "r3"});
    ASSERT_TRUE((*store)->Write(std::move(b)).ok());
    WriteBatch d;
    d.DeleteIamUser("bob");
    ASSERT_TRUE((*store)->Write(std::move(d)).ok());
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto iam = (*store)->LoadIam();
  ASSERT_TRUE(iam.ok()) << iam.status().ToString();
  ASSERT_EQ(iam->users.size(), 1u);
  EXPECT_EQ(iam->users[0].name, "alice");
  auto all = (*store)->Audit(AuditQuery{});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[1].result, "AccessDenied");
  EXPECT_LT((*all)[0].seq, (*all)[1].seq);
  auto alice = (*store)->Audit(AuditQuery{"alice", 150});
  ASSERT_TRUE(alice.ok());
  ASSERT_EQ(alice->size(), 1u);
  EXPECT_EQ((*alice)[0].request_id, "r3");
}

// The database holds job environments (secrets): it and its -wal and -shm
// files are the server user's alone (0600), also when an older server left
// them readable.
TEST_F(StoreTest, DatabaseFilesArePrivate) {
  auto mode_of = [](const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 ? static_cast<int>(st.st_mode & 07777) : -1;
  };
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    WriteBatch b;
    b.PutResource(Queue("q1", R"({"a":1})"));
    ASSERT_TRUE((*store)->Write(std::move(b)).ok());
    for (const char* suffix : {"", "-wal", "-shm"})
      EXPECT_EQ(mode_of(path_ + suffix), 0600) << suffix;
  }
  ASSERT_EQ(::chmod(path_.c_str(), 0644), 0);
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  for (const char* suffix : {"", "-wal", "-shm"})
    EXPECT_EQ(mode_of(path_ + suffix), 0600) << suffix;
}

TEST_F(StoreTest, CommittedWritesSurviveReopen) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok());
    WriteBatch b;
    b.PutResource(Queue("q1", R"({"a":1})"));
    b.PutTag("arn:aws:batch:us-east-1:0:job-queue/q1", "team", "ml");
    ASSERT_TRUE((*store)->Write(std::move(b)).ok());
    WriteBatch d;
    d.PutResource(ResourceRow{ResourceKind::kJobDefinition, "arn:jd/x:1", "x", 1, "{}", 2});
    d.PutResource(ResourceRow{ResourceKind::kJobDefinition, "arn:jd/x:2", "x", 2, "{}", 2});
    ASSERT_TRUE((*store)->Write(std::move(d)).ok());
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->resources.size(), 3u);
  EXPECT_EQ(snap->resources[0].kind, ResourceKind::kJobQueue);
  EXPECT_EQ(snap->resources[0].doc, R"({"a":1})");
  EXPECT_EQ(snap->resources[1].revision, 1);
  EXPECT_EQ(snap->resources[2].revision, 2);
  ASSERT_EQ(snap->tags.size(), 1u);
  EXPECT_EQ(snap->tags[0].value, "ml");
}

TEST_F(StoreTest, DeletesRemoveRowsAndTags) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  b.PutResource(Queue("q1", "{}"));
  b.PutTag("arn:aws:batch:us-east-1:0:job-queue/q1", "k", "v");
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  WriteBatch d;
  d.DeleteResource(ResourceKind::kJobQueue, "arn:aws:batch:us-east-1:0:job-queue/q1");
  d.DeleteAllTags("arn:aws:batch:us-east-1:0:job-queue/q1");
  ASSERT_TRUE((*store)->Write(std::move(d)).ok());
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->resources.empty());
  EXPECT_TRUE(snap->tags.empty());
}

TEST_F(StoreTest, FailingBatchFailsAloneAndAtomically) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch first;
  first.AppendJobEvent(JobEvent{"job-1", 1, 10, "SUBMITTED", "{}"});
  ASSERT_TRUE((*store)->Write(std::move(first)).ok());
  // The duplicate (job-1, 1) violates the primary key: the whole batch,
  // including its job row, must be rolled back; the next batch still commits.
  WriteBatch bad;
  bad.PutJob(JobRow{"job-1", "n", "q", "RUNNABLE", 1, 2, "{}"});
  bad.AppendJobEvent(JobEvent{"job-1", 1, 11, "RUNNABLE", "{}"});
  WriteBatch good;
  good.AppendJobEvent(JobEvent{"job-1", 2, 12, "RUNNABLE", R"({"x":1})"});
  auto t_bad = (*store)->Enqueue(std::move(bad));
  auto t_good = (*store)->Enqueue(std::move(good));
  ASSERT_TRUE(t_bad.ok() && t_good.ok());
  EXPECT_FALSE((*store)->Wait(*t_bad).ok());
  EXPECT_TRUE((*store)->Wait(*t_good).ok());
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_TRUE(snap->jobs.empty());
  auto events = (*store)->JobEvents("job-1");
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].type, "RUNNABLE");
  EXPECT_EQ((*events)[1].payload, R"({"x":1})");
}

TEST_F(StoreTest, JobEventsAreAppendOnly) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  b.AppendJobEvent(JobEvent{"j", 1, 10, "SUBMITTED", "{}"});
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  store->reset();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  int rc = sqlite3_exec(db, "UPDATE job_events SET type = 'X'", nullptr, nullptr, &err);
  EXPECT_NE(rc, SQLITE_OK);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(err).find("append-only"), std::string::npos);
  sqlite3_free(err);
  sqlite3_close(db);
}

// A lagging row's later events: only those after the seq it holds, in order,
// none of another job's.
TEST_F(StoreTest, JobEventsAfterASeqAreTheLaterOnesOfThatJob) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  for (int64_t seq = 1; seq <= 4; ++seq)
    b.AppendJobEvent(JobEvent{"a", seq, seq, "T" + std::to_string(seq), "{}"});
  b.AppendJobEvent(JobEvent{"b", 3, 3, "other", "{}"});
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  auto later = (*store)->JobEvents("a", 2);
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->size(), 2u);
  EXPECT_EQ((*later)[0].seq, 3);
  EXPECT_EQ((*later)[0].type, "T3");
  EXPECT_EQ((*later)[1].seq, 4);
  auto all = (*store)->JobEvents("a");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 4u);
  auto none = (*store)->JobEvents("a", 4);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Start-up's read: each unfinished job whose row lags comes with the events
// its row does not hold; a current row (row_seq 0) and finished jobs with none.
TEST_F(StoreTest, UnfinishedJobsComeWithTheEventsTheirRowsLack) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  JobRow waiting{"w", "n", "q", "SUBMITTED", 1, 1, "{}"};
  waiting.row_seq = 1;
  JobRow current{"x", "n", "q", "RUNNABLE", 2, 2, "{}"};
  JobRow done{"y", "n", "q", "SUCCEEDED", 3, 3, "{}"};
  done.row_seq = 1;
  for (const JobRow& row : {waiting, current, done}) b.PutJob(row);
  for (int64_t seq = 1; seq <= 3; ++seq) {
    b.AppendJobEvent(JobEvent{"w", seq, seq, "T" + std::to_string(seq), "{}"});
    b.AppendJobEvent(JobEvent{"y", seq, seq, "T", "{}"});
  }
  for (int64_t seq = 1; seq <= 2; ++seq) b.AppendJobEvent(JobEvent{"x", seq, seq, "T", "{}"});
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  auto unfinished = (*store)->LoadUnfinishedJobs();
  ASSERT_TRUE(unfinished.ok()) << unfinished.status().ToString();
  ASSERT_EQ(unfinished->size(), 2u);
  const UnfinishedJob& w = (*unfinished)[0];
  EXPECT_EQ(w.row.job_id, "w");
  EXPECT_EQ(w.last_seq, 3);
  ASSERT_EQ(w.later_events.size(), 2u);
  EXPECT_EQ(w.later_events[0].seq, 2);
  EXPECT_EQ(w.later_events[0].type, "T2");
  EXPECT_EQ(w.later_events[1].seq, 3);
  EXPECT_EQ((*unfinished)[1].row.job_id, "x");
  EXPECT_TRUE((*unfinished)[1].later_events.empty());
}

TEST_F(StoreTest, LastJobEventSeqsEqualTheLastOfEachJobsEvents) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  for (int64_t seq = 1; seq <= 3; ++seq) b.AppendJobEvent(JobEvent{"a", seq, seq, "T", "{}"});
  b.AppendJobEvent(JobEvent{"b", 1, 1, "T", "{}"});
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  auto seqs = (*store)->LastJobEventSeqs();
  ASSERT_TRUE(seqs.ok()) << seqs.status().ToString();
  ASSERT_EQ(seqs->size(), 2u);
  for (const std::string id : {"a", "b"}) {
    auto events = (*store)->JobEvents(id);
    ASSERT_TRUE(events.ok());
    EXPECT_EQ(seqs->at(id), events->back().seq) << id;
  }
}

// Version 5 adds the columns the reads of finished jobs use, filled from the
// rows that were there: array children's parent and index, when a finished
// job ended, the end of its last NODE_LOST / HANG attempt.
TEST_F(StoreTest, MigrationFiveFillsTheColumnsOfFinishedJobs) {
  WriteDatabaseAt(4, R"(INSERT INTO jobs VALUES ('a', 'n', 'arn:q', 'SUCCEEDED', 1, 60,
              '{"stoppedAt":50,"attempts":[{"stoppedAt":40,"failureCategory":"NODE_LOST"},
                                           {"stoppedAt":50,"failureCategory":""}]}');
            INSERT INTO jobs VALUES ('a:12', 'n', 'arn:q', 'FAILED', 1, 70, '{"stoppedAt":0}');
            INSERT INTO jobs VALUES ('b', 'n', 'arn:q', 'RUNNING', 1, 1, '{"attempts":[]}');)");
  if (HasFatalFailure()) return;
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->FindJobs({"a", "a:12", "b", "nope"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 3u);
  std::map<std::string, JobRow> by_id;
  for (const JobRow& r : *rows) by_id[r.job_id] = r;
  EXPECT_EQ(by_id["a"].parent_id, "");
  EXPECT_EQ(by_id["a"].array_index, -1);
  EXPECT_EQ(by_id["a"].stopped_ms, 50);
  EXPECT_EQ(by_id["a"].node_failed_ms, 40);
  EXPECT_EQ(by_id["a:12"].parent_id, "a");
  EXPECT_EQ(by_id["a:12"].array_index, 12);
  EXPECT_EQ(by_id["a:12"].stopped_ms, 70);  // no stoppedAt: when its row last changed
  EXPECT_EQ(by_id["b"].stopped_ms, 0);
  EXPECT_EQ(by_id["b"].node_failed_ms, 0);
}

JobRow Finished(const std::string& id, const std::string& queue, const std::string& status,
                int64_t created, int64_t stopped) {
  JobRow row{id, "n", queue, status, created, stopped, "{\"id\":\"" + id + "\"}"};
  if (auto colon = id.find(':'); colon != std::string::npos) {
    row.parent_id = id.substr(0, colon);
    row.array_index = std::stoi(id.substr(colon + 1));
  }
  if (status == "SUCCEEDED" || status == "FAILED") row.stopped_ms = stopped;
  return row;
}

std::vector<std::string> Ids(const Result<std::vector<JobRow>>& rows) {
  std::vector<std::string> ids;
  if (rows.ok())
    for (const JobRow& r : *rows) ids.push_back(r.job_id);
  return ids;
}

// The reads of finished jobs: pages after a key (not an offset), children by
// index, counts, the unfinished jobs alone, and retention's batches.
TEST_F(StoreTest, FinishedJobsAreListedAfterAKeyCountedAndExpire) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  for (int i = 0; i < 5; ++i)
    b.PutJob(Finished("s" + std::to_string(i), "q1", "SUCCEEDED", 10 + i, 100 + i));
  b.PutJob(Finished("f0", "q1", "FAILED", 11, 200));
  b.PutJob(Finished("r0", "q1", "RUNNING", 12, 0));
  b.PutJob(Finished("o0", "q2", "SUCCEEDED", 10, 300));
  b.PutJob(Finished("p", "q1", "SUCCEEDED", 20, 50));  // an array parent, the oldest end
  b.PutJob(Finished("p:0", "q1", "SUCCEEDED", 20, 40));
  b.PutJob(Finished("p:1", "q1", "FAILED", 20, 45));
  b.PutJob(Finished("p:2", "q1", "FAILED", 20, 45));
  for (const char* id : {"s0", "p", "p:1", "r0"})
    for (int64_t seq = 1; seq <= 3; ++seq) b.AppendJobEvent(JobEvent{id, seq, seq, "T", "{}"});
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());

  FinishedJobsQuery q;
  q.queue_arn = "q1";
  q.status = "SUCCEEDED";
  q.limit = 3;
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(q)), (std::vector<std::string>{"s0", "s1", "s2"}));
  q.after = std::make_pair(int64_t{12}, std::string("s2"));
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(q)), (std::vector<std::string>{"s3", "s4", "p"}));
  q.status.clear();  // both, merged in one order
  q.after = std::make_pair(int64_t{10}, std::string("s0"));
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(q)), (std::vector<std::string>{"f0", "s1", "s2"}));
  q.newest_first = true;
  q.after.reset();
  q.created_before = 14;
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(q)), (std::vector<std::string>{"s3", "s2", "f0"}));
  q.after = std::make_pair(int64_t{11}, std::string("f0"));
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(q)), (std::vector<std::string>{"s1", "s0"}));

  FinishedJobsQuery children;
  children.parent_id = "p";
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(children)),
            (std::vector<std::string>{"p:0", "p:1", "p:2"}));
  children.status = "FAILED";
  children.after_index = 1;
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(children)), (std::vector<std::string>{"p:2"}));

  auto unfinished = (*store)->LoadUnfinishedJobs();
  ASSERT_TRUE(unfinished.ok()) << unfinished.status().ToString();
  ASSERT_EQ(unfinished->size(), 1u);
  EXPECT_EQ((*unfinished)[0].row.job_id, "r0");
  EXPECT_EQ((*unfinished)[0].last_seq, 3);
  EXPECT_EQ(*(*store)->LastJobEventSeq("p:1"), 3);
  EXPECT_EQ(*(*store)->LastJobEventSeq("nope"), 0);

  auto counts = (*store)->CountFinishedJobs();
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  std::map<std::pair<std::string, std::string>, int64_t> by_key;
  for (const JobCount& c : *counts) by_key[{c.queue_arn, c.status}] = c.count;
  EXPECT_EQ(by_key,
            (std::map<std::pair<std::string, std::string>, int64_t>{
                {{"q1", "SUCCEEDED"}, 7}, {{"q1", "FAILED"}, 3}, {{"q2", "SUCCEEDED"}, 1}}));
  EXPECT_EQ(*(*store)->FinishedChildCounts("p"),
            (std::map<std::string, int64_t>{{"SUCCEEDED", 1}, {"FAILED", 2}}));
  EXPECT_EQ(Ids((*store)->RecentlyEndedJobs(200, 10)), (std::vector<std::string>{"o0", "f0"}));

  // Retention: the oldest end first, an array with its children, about max_rows rows.
  auto expired = (*store)->FindExpiredJobs(102, 5);
  ASSERT_TRUE(expired.ok()) << expired.status().ToString();
  ASSERT_EQ(expired->jobs.size(), 2u);  // p (4 rows), then s0; s1 would pass 5
  EXPECT_EQ(expired->jobs[0].job_id, "p");
  EXPECT_EQ(expired->jobs[0].rows, 4);
  EXPECT_EQ(expired->jobs[1].job_id, "s0");
  EXPECT_EQ(expired->rows, 5);
  WriteBatch del;
  for (const ExpiredJob& job : expired->jobs) del.DeleteJob(job.job_id);
  ASSERT_TRUE((*store)->Write(std::move(del)).ok());
  EXPECT_EQ(Ids((*store)->FindJobs({"p", "p:0", "p:1", "p:2", "s0", "s1"})),
            (std::vector<std::string>{"s1"}));
  for (const char* id : {"p", "p:1", "s0"}) {
    auto events = (*store)->JobEvents(id);
    ASSERT_TRUE(events.ok());
    EXPECT_TRUE(events->empty()) << id;
  }
  EXPECT_EQ((*(*store)->JobEvents("r0")).size(), 3u);
  // Nothing ended before 0.
  EXPECT_TRUE((*store)->FindExpiredJobs(0, 5)->jobs.empty());
}

TEST_F(StoreTest, MigrationSevenFillsTheListFilterColumns) {
  WriteDatabaseAt(6,
                  R"(INSERT INTO jobs (job_id, name, queue_arn, status, created_ms, updated_ms, doc)
              VALUES ('a', 'Train', 'arn:q', 'SUCCEEDED', 1, 60,
              '{"jobDefinition":"arn:aws:batch:r:1:job-definition/llama:3",
                "jobDefinitionName":"llama","shareIdentifier":"blue"}');
            INSERT INTO jobs (job_id, name, queue_arn, status, created_ms, updated_ms, doc)
              VALUES ('b', 'x', 'arn:q', 'SUCCEEDED', 1, 60, 'not json');)");
  if (HasFatalFailure()) return;
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->FindJobs({"a", "b"});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  std::map<std::string, JobRow> by_id;
  for (const JobRow& r : *rows) by_id[r.job_id] = r;
  EXPECT_EQ(by_id["a"].definition_name, "llama");
  EXPECT_EQ(by_id["a"].definition_arn, "arn:aws:batch:r:1:job-definition/llama:3");
  EXPECT_EQ(by_id["a"].share_identifier, "blue");
  EXPECT_EQ(by_id["b"].definition_name, "");  // an unreadable document keeps the defaults
  FinishedJobsQuery q;
  q.queue_arn = "arn:q";
  q.newest_first = true;
  q.name_lower = "tr*";
  EXPECT_EQ(Ids((*store)->ListFinishedJobs(q)), (std::vector<std::string>{"a"}));
}

// ListJobs' JOB_NAME, JOB_DEFINITION and SHARE_IDENTIFIER filters over the
// finished jobs: terms of the store's query, exact or a prefix ('*'), and the
// partial indexes serve them (no scan of the queue's rows).
TEST_F(StoreTest, FinishedJobsAreFilteredByNameDefinitionAndShare) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  const std::string arn = "arn:aws:batch:r:1:job-definition/";
  auto put = [&](const std::string& id, const std::string& name, const std::string& definition,
                 int revision, const std::string& share, int64_t created) {
    JobRow row = Finished(id, "q1", "SUCCEEDED", created, created + 100);
    row.name = name;
    row.definition_name = definition;
    row.definition_arn = arn + definition + ":" + std::to_string(revision);
    row.share_identifier = share;
    b.PutJob(row);
  };
  put("a", "Train-small", "llama", 1, "blue", 10);
  put("b", "train-big", "llama", 2, "red", 11);
  put("c", "TRAIN", "llama-eval", 1, "", 12);
  put("d", "eval", "mistral", 1, "blue", 13);
  put("e", "trainz", "llama", 1, "", 14);
  b.PutJob(Finished("r", "q1", "RUNNING", 15, 0));  // not finished: never listed here
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());

  auto list = [&](auto set) {
    FinishedJobsQuery q;
    q.queue_arn = "q1";
    q.newest_first = true;
    set(q);
    return Ids((*store)->ListFinishedJobs(q));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.name_lower = "train*"; }), (V{"e", "c", "b", "a"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.name_lower = "train-*"; }), (V{"b", "a"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.name_lower = "train"; }), (V{"c"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.name_lower = "*"; }), (V{"e", "d", "c", "b", "a"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.name_lower = "x*"; }), V{});
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.definition_name = "llama"; }), (V{"e", "b", "a"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.definition_name = "llama*"; }),
            (V{"e", "c", "b", "a"}));
  EXPECT_EQ(list([&](FinishedJobsQuery& q) {
              q.definition_name = "llama";
              q.definition_arn = arn + "llama:2";
            }),
            (V{"b"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) { q.share_identifier = "blue"; }), (V{"d", "a"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) {
              q.name_lower = "train*";
              q.limit = 2;
            }),
            (V{"e", "c"}));
  EXPECT_EQ(list([](FinishedJobsQuery& q) {
              q.name_lower = "train*";
              q.after = std::make_pair(int64_t{12}, std::string("c"));
            }),
            (V{"b", "a"}));

  // The plan of such a query reads the partial indexes.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  auto plan = [&](const std::string& term) {
    std::string text;
    sqlite3_stmt* st = nullptr;
    const std::string sql =
        "EXPLAIN QUERY PLAN SELECT job_id FROM jobs WHERE queue_arn = 'q1' AND status = "
        "'SUCCEEDED' AND parent_id = '' AND status IN ('SUCCEEDED', 'FAILED') AND " +
        term + " ORDER BY created_ms DESC, job_id LIMIT 10";
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
    while (sqlite3_step(st) == SQLITE_ROW)
      text += reinterpret_cast<const char*>(sqlite3_column_text(st, 3)) + std::string("\n");
    sqlite3_finalize(st);
    return text;
  };
  EXPECT_NE(plan("lower(name) >= 'train' AND lower(name) < 'traio'").find("jobs_finished_by_name"),
            std::string::npos);
  EXPECT_NE(plan("definition_name = 'llama'").find("jobs_finished_by_definition"),
            std::string::npos);
  sqlite3_close(db);
}

TEST_F(StoreTest, JobsWithNodeFailuresAreFoundByWhenTheyFailed) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  JobRow old = Finished("old", "q", "FAILED", 1, 10);
  old.node_failed_ms = 10;
  JobRow recent = Finished("recent", "q", "SUCCEEDED", 1, 30);
  recent.node_failed_ms = 25;
  b.PutJob(old);
  b.PutJob(recent);
  b.PutJob(Finished("clean", "q", "FAILED", 1, 40));
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  EXPECT_EQ(Ids((*store)->JobsWithNodeFailuresSince(20)), (std::vector<std::string>{"recent"}));
}

TEST_F(StoreTest, JobsAndAttemptsRoundTrip) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  WriteBatch b;
  b.PutJob(JobRow{"j1", "train", "arn:q", "SUBMITTED", 5, 5, R"({"jobId":"j1"})"});
  b.PutAttempt(AttemptRow{"j1", 0, R"({"exitCode":0})"});
  ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->jobs.size(), 1u);
  EXPECT_EQ(snap->jobs[0].status, "SUBMITTED");
  ASSERT_EQ(snap->attempts.size(), 1u);
  EXPECT_EQ(snap->attempts[0].doc, R"({"exitCode":0})");
}

TEST_F(StoreTest, ConcurrentWritersAreGroupCommitted) {
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok());
  constexpr int kThreads = 8, kPerThread = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        WriteBatch b;
        std::string name = "q" + std::to_string(t) + "_" + std::to_string(i);
        b.PutResource(Queue(name, "{}"));
        EXPECT_TRUE((*store)->Write(std::move(b)).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  auto snap = (*store)->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->resources.size(), static_cast<size_t>(kThreads * kPerThread));
  StoreStats stats = (*store)->stats();
  EXPECT_EQ(stats.batches, kThreads * kPerThread);
  EXPECT_LE(stats.commits, stats.batches);
}

// Version 6: a node's last release replaces the one before; kept across a reopen.
TEST_F(StoreTest, NodeReleasesKeepTheLastReleaseOfEachNode) {
  {
    auto store = Store::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    WriteBatch b;
    b.PutNodeRelease(NodeReleaseRow{"i-b", 10});
    b.PutNodeRelease(NodeReleaseRow{"b1", 20});
    b.PutNodeRelease(NodeReleaseRow{"i-b", 30});
    ASSERT_TRUE((*store)->Write(std::move(b)).ok());
  }
  auto store = Store::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto rows = (*store)->LoadNodeReleases();
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].node, "b1");
  EXPECT_EQ((*rows)[0].released_ms, 20);
  EXPECT_EQ((*rows)[1].node, "i-b");
  EXPECT_EQ((*rows)[1].released_ms, 30);
}

TEST_F(StoreTest, RefusesDatabaseFromNewerVersion) {
  { ASSERT_TRUE(Store::Open(path_).ok()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE schema_version SET version = 999", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = Store::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(store.status().IsFailedPrecondition());
  EXPECT_NE(store.status().message().find("999"), std::string::npos);
}

TEST_F(StoreTest, OpenFailsClearlyForMissingFolder) {
  auto store = Store::Open(dir_ + "/no/such/dir/lote.db");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find("cannot open database"), std::string::npos);
}

}  // namespace
}  // namespace lote::store
