// Durable state of the lote server: one SQLite database ($LOTE_HOME/lote.db) in
// WAL mode with synchronous=FULL.
//
// Contract:
// - Writes are WriteBatch objects. A batch is applied atomically (all of its
//   rows or none) and is on disk when Write()/Wait() returns OK: a response
//   sent after that can never be lost, even to SIGKILL or power loss.
// - One writer thread applies queued batches in the order they were
//   enqueued and groups every batch waiting at that moment into one SQLite
//   transaction (group commit), so concurrent callers share one fsync.
//   Each batch runs inside its own savepoint: a batch that fails (e.g. a
//   constraint) fails alone and the others in the group still commit.
// - If the disk fails a transaction (full, I/O error) nothing of its group is
//   kept: that group and every batch queued at that moment return
//   Unavailable (the disk full named as such); later batches are tried
//   again, so the store resumes by itself once space is back. Reads go on
//   meanwhile. failure_count() and EnqueueUnlessFailed let a caller whose
//   memory runs ahead of its batches roll it back before it queues more.
// - Reads (Load, JobEvents, FindJob) use a separate connection and see only
//   committed data. Callers keep their own in-memory state, loaded once with
//   Load().
// - Thread safety: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <variant>
#include <vector>

#include "common/metrics.h"
#include "common/status.h"

struct sqlite3;

namespace lote::store {

// The resource tables. Each row is keyed by the resource's ARN and holds its
// JSON document (the AWS "detail" shape, without tags).
enum class ResourceKind : int32_t {
  kComputeEnvironment,
  kJobQueue,
  kJobDefinition,
  kSchedulingPolicy,
  kPlacementGroup,      // EC2 (schema version 2)
  kLaunchTemplate,      // EC2: one row per template, every version in its doc
  kSsmParameter,        // SSM Parameter Store: one row per name, its history in its doc
  kConsumableResource,  // Batch consumable resources (schema version 9); the job loop's
  kServiceEnvironment,  // Batch service environments (schema version 9)
  kQuotaShare,          // Batch quota shares, named "<queue>/<share>" (schema version 9)
};
const char* ResourceTable(ResourceKind kind);

struct ResourceRow {
  ResourceKind kind = ResourceKind::kComputeEnvironment;
  std::string arn;
  std::string name;
  int64_t revision = 0;  // job definitions only; 0 otherwise
  std::string doc;       // JSON text
  int64_t updated_ms = 0;
};

struct TagRow {
  std::string resource_arn;
  std::string key;
  std::string value;
};

// A job: its materialized document plus the columns its reads filter on
// (schema version 5 added the last four). The document can always be rebuilt
// from job_events. A finished job's row is its current state; an unfinished
// job's may lag behind its events (row_seq): the job is that document with
// the later events applied.
struct JobRow {
  std::string job_id;
  std::string name;
  std::string queue_arn;
  std::string status;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::string doc;             // JSON text
  std::string parent_id = {};  // an array child's parent; "" for a top-level job
  int32_t array_index = -1;
  int64_t stopped_ms = 0;      // SUCCEEDED or FAILED: when it ended; 0 otherwise
  int64_t node_failed_ms = 0;  // end of its last NODE_LOST or HANG attempt; 0: none
  // What ListJobs filters on (JOB_DEFINITION, SHARE_IDENTIFIER); JOB_NAME
  // reads lower(name).
  std::string definition_name = {};
  std::string definition_arn = {};
  std::string share_identifier = {};
  // The seq of the last event the document holds; 0: every event (rows
  // written before schema version 8, and rows a test writes by hand).
  int64_t row_seq = 0;
};

// How many jobs one queue has in one status.
struct JobCount {
  std::string queue_arn;
  std::string status;
  int64_t count = 0;
};

// A page of finished (SUCCEEDED / FAILED) jobs, in a fixed order, after a
// key: the ListJobs reads the job loop does not answer from memory.
struct FinishedJobsQuery {
  // Exactly one: a queue's top-level jobs, or one array parent's children.
  std::string queue_arn;
  std::string parent_id;
  // One of "SUCCEEDED" / "FAILED"; empty: both.
  std::string status;
  // Queue listings: by (created_ms, job_id), ascending or newest first (then
  // job_id ascending); children: by array_index ascending.
  bool newest_first = false;
  // Rows strictly after this key in that order (after_index for children).
  std::optional<std::pair<int64_t, std::string>> after;
  int32_t after_index = -1;
  // Queue listings: created_ms bounds (exclusive); 0 = none.
  int64_t created_after = 0;
  int64_t created_before = 0;
  // Queue listings, ListJobs' other filters (empty: none). A value that ends
  // with '*' matches as a prefix (its text before the '*'), as AWS does.
  std::string name_lower;        // JOB_NAME, lower-case: lower(name)
  std::string definition_name;   // JOB_DEFINITION by name
  std::string definition_arn;    // JOB_DEFINITION by ARN (exact)
  std::string share_identifier;  // SHARE_IDENTIFIER (exact)
  int64_t limit = 100;
};

// A finished top-level job whose retention ran out, with its array children.
struct ExpiredJob {
  std::string job_id;
  std::vector<JobCount> counts;  // rows per queue and status, children included
  int64_t rows = 0;              // 1 + its children
};
// What one retention batch deletes.
struct ExpiredJobs {
  std::vector<ExpiredJob> jobs;
  int64_t rows = 0;  // children included
};

// One attempt of a job (one per try; multi-node attempts hold all nodes).
struct AttemptRow {
  std::string job_id;
  int32_t attempt = 0;
  std::string doc;  // JSON text
};

// An entry of the append-only job event log: (job_id, seq) is unique and seq
// starts at 1 and increases by one per job. Rows are never updated.
struct JobEvent {
  std::string job_id;
  int64_t seq = 0;
  int64_t time_ms = 0;
  std::string type;     // e.g. "SUBMITTED", "RUNNABLE", "STARTING", "NODE_EXITED"
  std::string payload;  // JSON text
};

// A job the store holds that is not SUCCEEDED or FAILED, with the seq of its
// last committed event (what the job loop keeps in memory).
struct UnfinishedJob {
  JobRow row;
  int64_t last_seq = 0;
  // The events after those its row holds (row.row_seq > 0), in seq order.
  std::vector<JobEvent> later_events;
};

// An IAM user: its whole document (policies, Unix users, access keys with
// sealed secrets) as JSON text (schema version 3).
struct IamUserRow {
  std::string name;
  std::string doc;
  int64_t updated_ms = 0;
};

// A bad-node quarantine ended by hand (`lote nodes release`, schema version
// 6): the node's failures at or before released_ms no longer count, also
// after a restart. One row per node (the last release).
struct NodeReleaseRow {
  std::string node;
  int64_t released_ms = 0;
};

// One entry of the append-only audit trail; seq is assigned on insert
// (ascending in commit order).
struct AuditRow {
  int64_t seq = 0;
  int64_t time_ms = 0;
  std::string principal;  // user name, "anonymous" when unauthenticated
  std::string operation;  // IAM action, "batch:SubmitJob"
  std::string resource;   // ARN(s), comma separated, or "*"
  std::string result;     // "Allowed", "AccessDenied", or the error code
  std::string request_id;
};

struct AuditQuery {
  std::string principal;  // empty: every principal
  int64_t since_ms = 0;   // rows with time_ms >= since_ms
  int64_t after_seq = 0;  // rows with seq > after_seq (paging)
  int64_t limit = 1000;
};

// What the IAM layer loads at start-up.
struct IamSnapshot {
  std::vector<IamUserRow> users;  // by name
};

// A set of row changes applied atomically.
class WriteBatch {
 public:
  void PutResource(ResourceRow row);
  void DeleteResource(ResourceKind kind, std::string arn);
  void PutTag(std::string resource_arn, std::string key, std::string value);
  void DeleteTag(std::string resource_arn, std::string key);
  void DeleteAllTags(std::string resource_arn);
  void PutJob(JobRow row);
  // The job's row, events and attempts, and those of its array children
  // ("<job_id>:<index>"): retention.
  void DeleteJob(std::string job_id);
  void PutAttempt(AttemptRow row);
  void AppendJobEvent(JobEvent event);
  void PutIamUser(IamUserRow row);
  void DeleteIamUser(std::string name);
  void AppendAudit(AuditRow row);  // row.seq is ignored
  void PutNodeRelease(NodeReleaseRow row);

  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }

 private:
  friend class Store;
  struct DeleteResourceOp {
    ResourceKind kind;
    std::string arn;
  };
  struct DeleteTagOp {
    std::string resource_arn;
    std::string key;
  };
  struct DeleteAllTagsOp {
    std::string resource_arn;
  };
  struct DeleteIamUserOp {
    std::string name;
  };
  struct DeleteJobOp {
    std::string job_id;
  };
  using Op = std::variant<ResourceRow, DeleteResourceOp, TagRow, DeleteTagOp, DeleteAllTagsOp,
                          JobRow, AttemptRow, JobEvent, IamUserRow, DeleteIamUserOp, AuditRow,
                          DeleteJobOp, NodeReleaseRow>;
  std::vector<Op> ops_;
};

// Everything committed, as loaded at start-up.
struct Snapshot {
  std::vector<ResourceRow> resources;  // ordered by kind, name, revision
  std::vector<TagRow> tags;
  std::vector<JobRow> jobs;
  std::vector<AttemptRow> attempts;
};

struct StoreOptions {
  // synchronous=FULL (fsync on every commit). Only tests of unrelated logic may
  // turn it off; the server always runs with it on.
  bool durable = true;
  // Upper bound of batches grouped into one transaction.
  size_t max_group = 512;
  // Where lote_store_commit_seconds and lote_store_write_failures_total go
  // (may be null: none).
  metrics::Registry* metrics = nullptr;
};

struct StoreStats {
  int64_t batches = 0;  // batches committed
  int64_t commits = 0;  // transactions committed (batches / commits = group size)
};

class Store {
 public:
  using Ticket = uint64_t;

  // Opens (creating if needed) the database at `path` and migrates its schema
  // to the newest version. FailedPrecondition if the file was written by a
  // newer lote (a schema version this binary does not know).
  static Result<std::unique_ptr<Store>> Open(const std::string& path, StoreOptions options = {});
  ~Store();  // commits what is queued, then stops the writer thread
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Queues `batch` behind every batch queued before it; never waits for disk.
  // Callers that need a global order (the control plane) enqueue under their
  // own lock and Wait() outside it.
  //
  // A transaction the disk fails (full, an I/O error) fails every batch of
  // its group and every batch queued at that time (they may build on them),
  // each with Unavailable saying why; the store goes on with the batches
  // queued later (it resumes by itself once space is back) and keeps
  // answering reads. failure_count() counts such failures.
  Result<Ticket> Enqueue(WriteBatch batch);
  // Enqueue, unless a write failed since failure_count() was
  // `failures_seen` (then Unavailable, nothing queued): a caller whose
  // memory follows its batches learns of the failure before it queues more.
  // On success `*committed_through` (may be null) is the ticket up to which
  // every batch is committed.
  Result<Ticket> EnqueueUnlessFailed(WriteBatch batch, uint64_t failures_seen,
                                     Ticket* committed_through = nullptr);
  uint64_t failure_count() const;
  // Every ticket up to this one has a final result (committed, unless
  // failure_count() changed since the caller last read it).
  Ticket finished_through() const;
  // Blocks until the batch with `ticket` is committed (OK) or failed.
  Status Wait(Ticket ticket);
  // Enqueue + Wait.
  Status Write(WriteBatch batch);

  // All committed rows (at start-up; without jobs: resources and tags only,
  // jobs and attempts left empty, as the control plane reloads them).
  Result<Snapshot> Load(bool with_jobs = true);
  // A job's events in seq order, those after `after_seq` (0: all).
  Result<std::vector<JobEvent>> JobEvents(const std::string& job_id, int64_t after_seq = 0);
  // Per job with events: the seq of its last committed event (one query:
  // start-up reads this instead of every job's events).
  Result<std::unordered_map<std::string, int64_t>> LastJobEventSeqs();
  // A job's committed row, or nullopt when it has none.
  Result<std::optional<JobRow>> FindJob(const std::string& job_id);
  // The committed rows of those of `job_ids` that have one (any order).
  Result<std::vector<JobRow>> FindJobs(const std::vector<std::string>& job_ids);
  // The seq of a job's last committed event (0: none).
  Result<int64_t> LastJobEventSeq(const std::string& job_id);
  // The jobs not SUCCEEDED or FAILED (the jobs_unfinished index) with their
  // last event seqs, by (created_ms, job_id).
  Result<std::vector<UnfinishedJob>> LoadUnfinishedJobs();
  // Finished jobs (children included) that ended at or after `since_ms`,
  // the latest first, at most `limit`.
  Result<std::vector<JobRow>> RecentlyEndedJobs(int64_t since_ms, int64_t limit);
  // Jobs with a NODE_LOST or HANG attempt that ended at or after `since_ms`.
  Result<std::vector<JobRow>> JobsWithNodeFailuresSince(int64_t since_ms);
  // Per queue and status: how many SUCCEEDED and FAILED jobs (children
  // included).
  Result<std::vector<JobCount>> CountFinishedJobs();
  // Per status: how many of `parent_id`'s array children are SUCCEEDED or FAILED.
  Result<std::map<std::string, int64_t>> FinishedChildCounts(const std::string& parent_id);
  // One page of finished jobs (FinishedJobsQuery).
  Result<std::vector<JobRow>> ListFinishedJobs(const FinishedJobsQuery& query);
  // Top-level finished jobs that ended before `ended_before_ms`, the oldest
  // first, with their children, until about `max_rows` rows (at least one job).
  Result<ExpiredJobs> FindExpiredJobs(int64_t ended_before_ms, int64_t max_rows);
  // IAM users and job owners (call once at start-up).
  Result<IamSnapshot> LoadIam();
  // Every stored node release (NodeReleaseRow), by node.
  Result<std::vector<NodeReleaseRow>> LoadNodeReleases();
  // Committed audit rows matching `query`, ascending by seq.
  Result<std::vector<AuditRow>> Audit(const AuditQuery& query);

  int32_t schema_version() const { return schema_version_; }
  StoreStats stats() const;

 private:
  Store(sqlite3* writer, sqlite3* reader, std::string path, StoreOptions options,
        int32_t schema_version);
  void WriterLoop();
  // One transaction over `group`, a status per batch in `results` (sized
  // like it). False when the disk failed it as a whole (every batch failed).
  bool CommitGroup(const std::vector<std::pair<Ticket, WriteBatch>>& group,
                   std::vector<Status>* results);
  Status ApplyBatch(const WriteBatch& batch);
  // A failed write as the callers see it (the disk full named as such).
  Status WriteFailure(const Status& sqlite_status) const;

  sqlite3* writer_db_;  // used only by the writer thread after construction
  sqlite3* reader_db_;  // guarded by reader_mu_
  const std::string path_;
  const StoreOptions options_;
  const int32_t schema_version_;
  metrics::Histogram* commit_seconds_ = nullptr;  // null without metrics
  metrics::Counter* write_failures_ = nullptr;

  std::mutex reader_mu_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // signalled when a batch is queued or on stop
  // Protected by mu_: the threads in Wait, by the ticket each waits for; a
  // commit wakes only those it finished (not every waiter, each commit).
  std::multimap<Ticket, std::condition_variable*> waiters_;
  std::deque<std::pair<Ticket, WriteBatch>> queue_;
  Ticket next_ticket_ = 1;
  Ticket finished_through_ = 0;  // every ticket <= this has a final result
  std::map<Ticket, Status> failures_;
  uint64_t failure_count_ = 0;
  Status last_failure_;  // the latest of them
  bool stopping_ = false;
  StoreStats stats_;

  std::thread writer_;
};

}  // namespace lote::store
