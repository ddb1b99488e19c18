#include "store/store.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
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
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  std::string sql =
      "CREATE TABLE schema_version (version INTEGER NOT NULL);"
      "INSERT INTO schema_version (version) VALUES (3);";
  for (const Migration& m : Migrations())
    if (m.version <= 3) sql += std::string(m.sql);
  sql += R"(INSERT INTO jobs VALUES ('j1', 'n', 'arn:q', 'RUNNING', 1, 1, '{"id":"j1"}');
            INSERT INTO jobs VALUES ('j1:0', 'n', 'arn:q', 'RUNNING', 1, 1, '{"id":"j1:0"}');
            INSERT INTO jobs VALUES ('j2', 'n', 'arn:q', 'RUNNING', 1, 1, '{"id":"j2"}');
            INSERT INTO job_owners VALUES ('j1', 'alice', 'arn:q');)";
  char* err = nullptr;
  ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
  sqlite3_close(db);
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
