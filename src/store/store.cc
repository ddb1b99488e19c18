#include "store/store.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "common/thread_name.h"
#include "store/schema.h"

namespace lote::store {

namespace {

Status SqlError(sqlite3* db, std::string_view what) {
  return Status::Internal("sqlite " + std::string(what) + ": " + sqlite3_errmsg(db));
}

Status Exec(sqlite3* db, std::string_view sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db, std::string(sql).c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return Status::Internal("sqlite: " + msg + " (in: " + std::string(sql.substr(0, 80)) + ")");
  }
  return Status::Ok();
}

// Whether the last error of `db` is the disk's (full, I/O), not the batch's.
bool DiskFault(sqlite3* db) {
  const int code = sqlite3_extended_errcode(db) & 0xff;
  return code == SQLITE_FULL || code == SQLITE_IOERR || code == SQLITE_CANTOPEN ||
         code == SQLITE_READONLY || code == SQLITE_CORRUPT || code == SQLITE_BUSY;
}

// A prepared statement, reset after each use.
class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Status status() const { return rc_ == SQLITE_OK ? Status::Ok() : SqlError(db_, "prepare"); }
  Stmt& Bind(int i, std::string_view text) {
    sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  // Binds `values` to ?1..?N in order, then runs a statement that returns no
  // rows.
  template <typename... Values>
  Status Run(const Values&... values) {
    int index = 0;
    (Bind(++index, values), ...);
    return Run();
  }
  // Runs a statement that returns no rows.
  Status Run() {
    int rc = sqlite3_step(stmt_);
    Status st = (rc == SQLITE_DONE || rc == SQLITE_ROW) ? Status::Ok() : SqlError(db_, "step");
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return st;
  }
  // Ready to run again (bindings cleared).
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  // Steps a query: true for a row, false at the end (check status()).
  bool Next() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) rc_ = rc;
    return false;
  }
  std::string Text(int col) const {
    const unsigned char* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

// The statement for `sql` on `db`, prepared once per thread. Only a store's
// writer thread runs writes, each on its own connection (a thread that ends
// finalizes its statements before the store closes the connection).
Stmt& PreparedOnThisThread(sqlite3* db, std::string_view sql) {
  static thread_local std::map<std::string, std::unique_ptr<Stmt>, std::less<>> prepared;
  auto it = prepared.find(sql);
  if (it == prepared.end())
    it = prepared.emplace(std::string(sql), std::make_unique<Stmt>(db, sql)).first;
  return *it->second;
}

// Runs `sql` (PreparedOnThisThread) with `values` bound to ?1..?N.
template <typename... Values>
Status RunPrepared(sqlite3* db, std::string_view sql, const Values&... values) {
  Stmt& stmt = PreparedOnThisThread(db, sql);
  RETURN_IF_ERROR(stmt.status());
  return stmt.Run(values...);
}

// The database holds every job's environment (secrets included): only the
// server's user may read it. SQLite gives the -wal and -shm files the
// database file's mode, so the file is made 0600 before SQLite opens it, and
// files left by an older server are narrowed to 0600.
Status MakePrivate(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return Status::Ok();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return Status::Unavailable("cannot open database " + path + ": " + std::strerror(errno));
  }
  ::close(fd);
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    const std::string file = path + suffix;
    if (::chmod(file.c_str(), 0600) != 0 && errno != ENOENT) {
      return Status::Unavailable("cannot make " + file +
                                 " private (mode 0600): " + std::strerror(errno));
    }
  }
  return Status::Ok();
}

Result<sqlite3*> OpenConnection(const std::string& path, bool durable) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return Status::Unavailable("cannot open database " + path + ": " + msg +
                               " (check that the folder exists and is writable)");
  }
  sqlite3_busy_timeout(db, 10000);
  Status st = Exec(db, "PRAGMA journal_mode=WAL");
  if (st.ok()) st = Exec(db, durable ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=OFF");
  if (st.ok()) st = Exec(db, "PRAGMA foreign_keys=ON");
  if (!st.ok()) {
    sqlite3_close(db);
    return st;
  }
  return db;
}

Result<int32_t> Migrate(sqlite3* db) {
  RETURN_IF_ERROR(Exec(db, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"));
  int32_t version = 0;
  bool has_row = false;
  {
    Stmt q(db, "SELECT version FROM schema_version");
    RETURN_IF_ERROR(q.status());
    if (q.Next()) {
      version = static_cast<int32_t>(q.Int(0));
      has_row = true;
    }
    RETURN_IF_ERROR(q.status());
  }
  if (!has_row) RETURN_IF_ERROR(Exec(db, "INSERT INTO schema_version (version) VALUES (0)"));
  if (version > LatestSchemaVersion()) {
    return Status::FailedPrecondition("database schema version " + std::to_string(version) +
                                      " is newer than this lote binary knows (" +
                                      std::to_string(LatestSchemaVersion()) +
                                      "); run a newer lote or point --home at another folder");
  }
  const bool upgrade = version > 0;  // an existing database, not a new one
  for (const Migration& m : Migrations()) {
    if (m.version <= version) continue;
    // An upgrade can take a while on a big store (version 7 reads every job
    // row: about 90 s at 1,000,000 jobs); the server listens after it.
    const auto began = std::chrono::steady_clock::now();
    if (upgrade) spdlog::info("store: upgrading the database to schema version {}", m.version);
    RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
    Status st = Exec(db, m.sql);
    if (st.ok()) {
      st = Exec(db, "UPDATE schema_version SET version = " + std::to_string(m.version));
    }
    if (st.ok()) st = Exec(db, "COMMIT");
    if (!st.ok()) {
      (void)Exec(db, "ROLLBACK");
      return st.WithContext("schema migration to version " + std::to_string(m.version));
    }
    if (upgrade) {
      spdlog::info("store: schema version {} in {:.1f} s", m.version,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    }
    version = m.version;
  }
  return version;
}

}  // namespace

const char* ResourceTable(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kComputeEnvironment:
      return "compute_environments";
    case ResourceKind::kJobQueue:
      return "job_queues";
    case ResourceKind::kJobDefinition:
      return "job_definitions";
    case ResourceKind::kSchedulingPolicy:
      return "scheduling_policies";
    case ResourceKind::kPlacementGroup:
      return "placement_groups";
    case ResourceKind::kLaunchTemplate:
      return "launch_templates";
    case ResourceKind::kSsmParameter:
      return "ssm_parameters";
    case ResourceKind::kConsumableResource:
      return "consumable_resources";
    case ResourceKind::kServiceEnvironment:
      return "service_environments";
    case ResourceKind::kQuotaShare:
      return "quota_shares";
  }
  return "";
}

void WriteBatch::PutResource(ResourceRow row) { ops_.emplace_back(std::move(row)); }
void WriteBatch::DeleteResource(ResourceKind kind, std::string arn) {
  ops_.emplace_back(DeleteResourceOp{kind, std::move(arn)});
}
void WriteBatch::PutTag(std::string resource_arn, std::string key, std::string value) {
  ops_.emplace_back(TagRow{std::move(resource_arn), std::move(key), std::move(value)});
}
void WriteBatch::DeleteTag(std::string resource_arn, std::string key) {
  ops_.emplace_back(DeleteTagOp{std::move(resource_arn), std::move(key)});
}
void WriteBatch::DeleteAllTags(std::string resource_arn) {
  ops_.emplace_back(DeleteAllTagsOp{std::move(resource_arn)});
}
void WriteBatch::PutJob(JobRow row) { ops_.emplace_back(std::move(row)); }
void WriteBatch::DeleteJob(std::string job_id) {
  ops_.emplace_back(DeleteJobOp{std::move(job_id)});
}
void WriteBatch::PutAttempt(AttemptRow row) { ops_.emplace_back(std::move(row)); }
void WriteBatch::AppendJobEvent(JobEvent event) { ops_.emplace_back(std::move(event)); }
void WriteBatch::PutIamUser(IamUserRow row) { ops_.emplace_back(std::move(row)); }
void WriteBatch::DeleteIamUser(std::string name) {
  ops_.emplace_back(DeleteIamUserOp{std::move(name)});
}
void WriteBatch::AppendAudit(AuditRow row) { ops_.emplace_back(std::move(row)); }
void WriteBatch::PutNodeRelease(NodeReleaseRow row) { ops_.emplace_back(std::move(row)); }

Result<std::unique_ptr<Store>> Store::Open(const std::string& path, StoreOptions options) {
  RETURN_IF_ERROR(MakePrivate(path));
  ASSIGN_OR_RETURN(sqlite3 * writer, OpenConnection(path, options.durable));
  Result<int32_t> version = Migrate(writer);
  if (!version.ok()) {
    sqlite3_close(writer);
    return version.status();
  }
  Result<sqlite3*> reader = OpenConnection(path, options.durable);
  if (!reader.ok()) {
    sqlite3_close(writer);
    return reader.status();
  }
  return std::unique_ptr<Store>(new Store(writer, *reader, path, options, *version));
}

Store::Store(sqlite3* writer, sqlite3* reader, std::string path, StoreOptions options,
             int32_t schema_version)
    : writer_db_(writer),
      reader_db_(reader),
      path_(std::move(path)),
      options_(options),
      schema_version_(schema_version) {
  if (options_.metrics != nullptr) {
    commit_seconds_ = options_.metrics->GetHistogram(
        "lote_store_commit_seconds",
        "Wall time of one store transaction (a group of batches, fsync included).",
        metrics::LatencyBuckets());
    write_failures_ = options_.metrics->GetCounter(
        "lote_store_write_failures_total",
        "Store transactions that failed (the disk full, an I/O error); their batches were "
        "refused.");
  }
  writer_ = NamedThread("lote-store", [this] { WriterLoop(); });
}

Store::~Store() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  writer_.join();
  sqlite3_close(reader_db_);
  sqlite3_close(writer_db_);
}

Result<Store::Ticket> Store::Enqueue(WriteBatch batch) {
  uint64_t seen;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seen = failure_count_;
  }
  return EnqueueUnlessFailed(std::move(batch), seen);
}

Result<Store::Ticket> Store::EnqueueUnlessFailed(WriteBatch batch, uint64_t failures_seen,
                                                 Ticket* committed_through) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return Status::Unavailable("the store is shutting down; retry after restart");
  if (failure_count_ != failures_seen)
    return Status::Unavailable(last_failure_.message() +
                               " (an earlier write failed; this change was not stored)");
  if (committed_through != nullptr) *committed_through = finished_through_;
  Ticket t = next_ticket_++;
  queue_.emplace_back(t, std::move(batch));
  work_cv_.notify_one();
  return t;
}

uint64_t Store::failure_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_count_;
}

Store::Ticket Store::finished_through() const {
  std::lock_guard<std::mutex> lock(mu_);
  return finished_through_;
}

Status Store::Wait(Ticket ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  if (finished_through_ < ticket) {
    std::condition_variable done;
    auto waiting = waiters_.emplace(ticket, &done);
    done.wait(lock, [&] { return finished_through_ >= ticket; });
    waiters_.erase(waiting);
  }
  auto it = failures_.find(ticket);
  if (it == failures_.end()) return Status::Ok();
  Status st = it->second;
  failures_.erase(it);
  return st;
}

Status Store::Write(WriteBatch batch) {
  ASSIGN_OR_RETURN(Ticket t, Enqueue(std::move(batch)));
  return Wait(t);
}

StoreStats Store::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status Store::ApplyBatch(const WriteBatch& batch) {
  auto run = [&](const std::string& sql, const auto&... values) -> Status {
    return RunPrepared(writer_db_, sql, values...);
  };
  for (const WriteBatch::Op& op : batch.ops_) {
    Status st;
    if (auto* r = std::get_if<ResourceRow>(&op)) {
      st = run(std::string("INSERT OR REPLACE INTO ") + ResourceTable(r->kind) +
                   " (arn, name, revision, doc, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
               r->arn, r->name, r->revision, r->doc, r->updated_ms);
    } else if (auto* d = std::get_if<WriteBatch::DeleteResourceOp>(&op)) {
      st = run(std::string("DELETE FROM ") + ResourceTable(d->kind) + " WHERE arn = ?1", d->arn);
    } else if (auto* t = std::get_if<TagRow>(&op)) {
      st = run("INSERT OR REPLACE INTO tags (resource_arn, key, value) VALUES (?1, ?2, ?3)",
               t->resource_arn, t->key, t->value);
    } else if (auto* dt = std::get_if<WriteBatch::DeleteTagOp>(&op)) {
      st = run("DELETE FROM tags WHERE resource_arn = ?1 AND key = ?2", dt->resource_arn, dt->key);
    } else if (auto* da = std::get_if<WriteBatch::DeleteAllTagsOp>(&op)) {
      st = run("DELETE FROM tags WHERE resource_arn = ?1", da->resource_arn);
    } else if (auto* j = std::get_if<JobRow>(&op)) {
      // An upsert, not INSERT OR REPLACE: a job written again (each change of
      // its state) keeps its row, and only the indexes over the columns that
      // can change are touched (REPLACE deletes and inserts the row: every
      // index). The other columns are the job's from its submission on.
      st = run(
          "INSERT INTO jobs (job_id, name, queue_arn, status, created_ms, updated_ms, doc, "
          "parent_id, array_index, stopped_ms, node_failed_ms, definition_name, definition_arn, "
          "share_identifier, row_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, "
          "?13, ?14, ?15) "
          "ON CONFLICT (job_id) DO UPDATE SET status = excluded.status, updated_ms = "
          "excluded.updated_ms, doc = excluded.doc, stopped_ms = excluded.stopped_ms, "
          "node_failed_ms = excluded.node_failed_ms, row_seq = excluded.row_seq",
          j->job_id, j->name, j->queue_arn, j->status, j->created_ms, j->updated_ms, j->doc,
          j->parent_id, static_cast<int64_t>(j->array_index), j->stopped_ms, j->node_failed_ms,
          j->definition_name, j->definition_arn, j->share_identifier, j->row_seq);
    } else if (auto* dj = std::get_if<WriteBatch::DeleteJobOp>(&op)) {
      // Children are "<id>:<index>": the range [id + ':', id + ';') of the keys.
      st = run("DELETE FROM jobs WHERE job_id = ?1", dj->job_id);
      if (st.ok())
        st = run("DELETE FROM jobs WHERE parent_id = ?1 AND parent_id != ''", dj->job_id);
      if (st.ok())
        st = run(
            "DELETE FROM job_events WHERE job_id = ?1 OR (job_id >= ?1 || ':' AND job_id < ?1 || "
            "';')",
            dj->job_id);
      if (st.ok())
        st =
            run("DELETE FROM attempts WHERE job_id = ?1 OR (job_id >= ?1 || ':' AND job_id < ?1 || "
                "';')",
                dj->job_id);
    } else if (auto* a = std::get_if<AttemptRow>(&op)) {
      st = run("INSERT OR REPLACE INTO attempts (job_id, attempt, doc) VALUES (?1, ?2, ?3)",
               a->job_id, static_cast<int64_t>(a->attempt), a->doc);
    } else if (auto* e = std::get_if<JobEvent>(&op)) {
      st = run(
          "INSERT INTO job_events (job_id, seq, time_ms, type, payload) VALUES (?1, ?2, ?3, ?4, "
          "?5)",
          e->job_id, e->seq, e->time_ms, e->type, e->payload);
    } else if (auto* u = std::get_if<IamUserRow>(&op)) {
      st = run("INSERT OR REPLACE INTO iam_users (name, doc, updated_ms) VALUES (?1, ?2, ?3)",
               u->name, u->doc, u->updated_ms);
    } else if (auto* du = std::get_if<WriteBatch::DeleteIamUserOp>(&op)) {
      st = run("DELETE FROM iam_users WHERE name = ?1", du->name);
    } else if (auto* au = std::get_if<AuditRow>(&op)) {
      st = run(
          "INSERT INTO audit_events (time_ms, principal, operation, resource, result, request_id) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
          au->time_ms, au->principal, au->operation, au->resource, au->result, au->request_id);
    } else if (auto* nr = std::get_if<NodeReleaseRow>(&op)) {
      st = run("INSERT OR REPLACE INTO node_releases (node, released_ms) VALUES (?1, ?2)", nr->node,
               nr->released_ms);
    }
    RETURN_IF_ERROR(st);
  }
  return Status::Ok();
}

void Store::WriterLoop() {
  std::vector<std::pair<Ticket, WriteBatch>> group;
  for (;;) {
    group.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping and drained
      while (!queue_.empty() && group.size() < options_.max_group) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const auto began = std::chrono::steady_clock::now();
    std::vector<Status> results(group.size());
    const bool failed = !CommitGroup(group, &results);  // the disk failed the whole group
    if (commit_seconds_ != nullptr && !failed)
      commit_seconds_->Observe(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count());
    std::lock_guard<std::mutex> lock(mu_);
    Ticket last = group.back().first;
    for (size_t i = 0; i < group.size(); ++i)
      if (!results[i].ok()) failures_[group[i].first] = results[i];
    if (failed) {
      // What is queued now was queued before its writers knew: it may build
      // on what failed, so it fails too (see Enqueue).
      ++failure_count_;
      last_failure_ = results.back();
      if (write_failures_ != nullptr) write_failures_->Add();
      for (auto& [ticket, batch] : queue_) failures_[ticket] = results.back();
      if (!queue_.empty()) last = queue_.back().first;
      queue_.clear();
    }
    if (!failed) {
      ++stats_.commits;
      stats_.batches += static_cast<int64_t>(group.size());
    }
    finished_through_ = last;
    for (auto w = waiters_.begin(); w != waiters_.end() && w->first <= last; ++w)
      w->second->notify_one();
  }
}

bool Store::CommitGroup(const std::vector<std::pair<Ticket, WriteBatch>>& group,
                        std::vector<Status>* results) {
  // The transaction's own statements too are prepared once (sqlite3_exec
  // parsed them again for every batch).
  auto exec = [&](std::string_view sql) { return RunPrepared(writer_db_, sql); };
  auto fail_all = [&](const Status& st) {
    const Status why = WriteFailure(st);
    (void)exec("ROLLBACK");
    std::fill(results->begin(), results->end(), why);
    return false;
  };
  Status st = exec("BEGIN IMMEDIATE");
  if (!st.ok()) return fail_all(st);
  for (size_t i = 0; i < group.size(); ++i) {
    st = exec("SAVEPOINT batch");
    if (st.ok()) st = ApplyBatch(group[i].second);
    if (st.ok()) st = exec("RELEASE batch");
    if (st.ok()) continue;
    // The disk (full, I/O error): nothing of the group is kept. A batch
    // the database refuses (a constraint) fails alone.
    if (DiskFault(writer_db_)) return fail_all(st);
    (void)exec("ROLLBACK TO batch");
    (void)exec("RELEASE batch");
    (*results)[i] = st;
  }
  st = exec("COMMIT");
  if (!st.ok()) return fail_all(st);
  return true;
}

Status Store::WriteFailure(const Status& sqlite_status) const {
  const int code = sqlite3_extended_errcode(writer_db_) & 0xff;
  if (code == SQLITE_FULL) {
    return Status::Unavailable("no space left for the server's database (" + path_ +
                               "): the change was not stored; free space on that filesystem and "
                               "retry (lote server resumes writing by itself)");
  }
  return Status::Unavailable("the server's database could not store the change (" +
                             sqlite_status.message() + "); retry later");
}

namespace {

// The columns of a JobRow, in its order (RowAt reads them from `first`).
constexpr const char* kJobColumns =
    "job_id, name, queue_arn, status, created_ms, updated_ms, doc, parent_id, array_index, "
    "stopped_ms, node_failed_ms, definition_name, definition_arn, share_identifier, row_seq";
constexpr int kJobColumnCount = 15;

JobRow RowAt(const Stmt& q, int first = 0) {
  return JobRow{q.Text(first),      q.Text(first + 1),  q.Text(first + 2),
                q.Text(first + 3),  q.Int(first + 4),   q.Int(first + 5),
                q.Text(first + 6),  q.Text(first + 7),  static_cast<int32_t>(q.Int(first + 8)),
                q.Int(first + 9),   q.Int(first + 10),  q.Text(first + 11),
                q.Text(first + 12), q.Text(first + 13), q.Int(first + 14)};
}

// The smallest text above every text that begins with `prefix` (byte order,
// SQLite's BINARY collation); empty when there is none (all bytes 0xff).
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (!prefix.empty()) prefix.back() = static_cast<char>(prefix.back() + 1);
  return prefix;
}

// Runs `q` (its values bound) and appends every row.
Status AppendRows(Stmt& q, std::vector<JobRow>* rows) {
  RETURN_IF_ERROR(q.status());
  while (q.Next()) rows->push_back(RowAt(q));
  return q.status();
}

// A read transaction on `db` while it lives: its reads see one snapshot.
class ReadTransaction {
 public:
  explicit ReadTransaction(sqlite3* db) : db_(db), status_(Exec(db, "BEGIN")) {}
  ~ReadTransaction() {
    if (status_.ok()) (void)Exec(db_, "COMMIT");
  }
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;
  const Status& status() const { return status_; }

 private:
  sqlite3* db_;
  Status status_;
};

}  // namespace

Result<Snapshot> Store::Load(bool with_jobs) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Snapshot snap;
  ReadTransaction snapshot(reader_db_);
  RETURN_IF_ERROR(snapshot.status());
  for (ResourceKind kind : {ResourceKind::kComputeEnvironment, ResourceKind::kJobQueue,
                            ResourceKind::kJobDefinition, ResourceKind::kSchedulingPolicy,
                            ResourceKind::kPlacementGroup, ResourceKind::kLaunchTemplate,
                            ResourceKind::kSsmParameter, ResourceKind::kConsumableResource,
                            ResourceKind::kServiceEnvironment, ResourceKind::kQuotaShare}) {
    Stmt q(reader_db_, std::string("SELECT arn, name, revision, doc, updated_ms FROM ") +
                           ResourceTable(kind) + " ORDER BY name, revision");
    RETURN_IF_ERROR(q.status());
    while (q.Next()) {
      snap.resources.push_back(
          ResourceRow{kind, q.Text(0), q.Text(1), q.Int(2), q.Text(3), q.Int(4)});
    }
    RETURN_IF_ERROR(q.status());
  }
  {
    Stmt q(reader_db_, "SELECT resource_arn, key, value FROM tags ORDER BY resource_arn, key");
    RETURN_IF_ERROR(q.status());
    while (q.Next()) snap.tags.push_back(TagRow{q.Text(0), q.Text(1), q.Text(2)});
    RETURN_IF_ERROR(q.status());
  }
  if (!with_jobs) {
    return snap;
  }
  {
    Stmt q(reader_db_,
           std::string("SELECT ") + kJobColumns + " FROM jobs ORDER BY created_ms, job_id");
    RETURN_IF_ERROR(q.status());
    while (q.Next()) snap.jobs.push_back(RowAt(q));
    RETURN_IF_ERROR(q.status());
  }
  {
    Stmt q(reader_db_, "SELECT job_id, attempt, doc FROM attempts ORDER BY job_id, attempt");
    RETURN_IF_ERROR(q.status());
    while (q.Next()) {
      snap.attempts.push_back(AttemptRow{q.Text(0), static_cast<int32_t>(q.Int(1)), q.Text(2)});
    }
    RETURN_IF_ERROR(q.status());
  }
  return snap;
}

Result<std::vector<JobEvent>> Store::JobEvents(const std::string& job_id, int64_t after_seq) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_,
         "SELECT job_id, seq, time_ms, type, payload FROM job_events WHERE job_id = ?1 AND seq > "
         "?2 ORDER BY seq");
  RETURN_IF_ERROR(q.status());
  q.Bind(1, job_id);
  q.Bind(2, after_seq);
  std::vector<JobEvent> events;
  while (q.Next()) events.push_back(JobEvent{q.Text(0), q.Int(1), q.Int(2), q.Text(3), q.Text(4)});
  RETURN_IF_ERROR(q.status());
  return events;
}

Result<std::unordered_map<std::string, int64_t>> Store::LastJobEventSeqs() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_, "SELECT job_id, MAX(seq) FROM job_events GROUP BY job_id");
  RETURN_IF_ERROR(q.status());
  std::unordered_map<std::string, int64_t> seqs;
  while (q.Next()) seqs.emplace(q.Text(0), q.Int(1));
  RETURN_IF_ERROR(q.status());
  return seqs;
}

Result<std::optional<JobRow>> Store::FindJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE job_id = ?1");
  RETURN_IF_ERROR(q.status());
  q.Bind(1, job_id);
  std::optional<JobRow> row;
  if (q.Next()) row = RowAt(q);
  RETURN_IF_ERROR(q.status());
  return row;
}

Result<std::vector<JobRow>> Store::FindJobs(const std::vector<std::string>& job_ids) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  std::vector<JobRow> rows;
  if (job_ids.empty()) return rows;
  Stmt q(reader_db_, std::string("SELECT ") + kJobColumns + " FROM jobs WHERE job_id = ?1");
  RETURN_IF_ERROR(q.status());
  for (const std::string& id : job_ids) {
    q.Bind(1, id);
    if (q.Next()) rows.push_back(RowAt(q));
    RETURN_IF_ERROR(q.status());
    q.Reset();
  }
  return rows;
}

Result<int64_t> Store::LastJobEventSeq(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_, "SELECT COALESCE(MAX(seq), 0) FROM job_events WHERE job_id = ?1");
  RETURN_IF_ERROR(q.status());
  q.Bind(1, job_id);
  int64_t seq = 0;
  if (q.Next()) seq = q.Int(0);
  RETURN_IF_ERROR(q.status());
  return seq;
}

Result<std::vector<UnfinishedJob>> Store::LoadUnfinishedJobs() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  ReadTransaction snapshot(reader_db_);  // both reads see one snapshot
  RETURN_IF_ERROR(snapshot.status());
  std::vector<UnfinishedJob> jobs;
  std::unordered_map<std::string, size_t> index_of;
  {
    Stmt q(reader_db_,
           std::string("SELECT ") + kJobColumns +
               ", (SELECT COALESCE(MAX(e.seq), 0) FROM job_events AS e WHERE e.job_id = "
               "jobs.job_id) FROM jobs WHERE status NOT IN ('SUCCEEDED', 'FAILED') "
               "ORDER BY created_ms, job_id");
    RETURN_IF_ERROR(q.status());
    while (q.Next()) {
      index_of.emplace(q.Text(0), jobs.size());
      jobs.push_back(UnfinishedJob{RowAt(q), q.Int(kJobColumnCount), {}});
    }
    RETURN_IF_ERROR(q.status());
  }
  {
    // The events each lagging row does not hold, in one read (a query per
    // job cost a start-up with 20,000 waiting jobs half as long again).
    Stmt q(reader_db_,
           "SELECT e.job_id, e.seq, e.time_ms, e.type, e.payload FROM jobs AS j JOIN job_events "
           "AS e ON e.job_id = j.job_id AND e.seq > j.row_seq WHERE j.status NOT IN "
           "('SUCCEEDED', 'FAILED') AND j.row_seq > 0 ORDER BY e.job_id, e.seq");
    RETURN_IF_ERROR(q.status());
    while (q.Next()) {
      auto it = index_of.find(q.Text(0));
      if (it == index_of.end()) continue;
      jobs[it->second].later_events.push_back(
          JobEvent{q.Text(0), q.Int(1), q.Int(2), q.Text(3), q.Text(4)});
    }
    RETURN_IF_ERROR(q.status());
  }
  return jobs;
}

Result<std::vector<JobRow>> Store::RecentlyEndedJobs(int64_t since_ms, int64_t limit) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_, std::string("SELECT ") + kJobColumns +
                         " FROM jobs WHERE status IN ('SUCCEEDED', 'FAILED') AND stopped_ms >= ?1 "
                         "ORDER BY stopped_ms DESC LIMIT ?2");
  q.Bind(1, since_ms).Bind(2, limit);
  std::vector<JobRow> rows;
  RETURN_IF_ERROR(AppendRows(q, &rows));
  return rows;
}

Result<std::vector<JobRow>> Store::JobsWithNodeFailuresSince(int64_t since_ms) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_, std::string("SELECT ") + kJobColumns +
                         " FROM jobs WHERE node_failed_ms > 0 AND node_failed_ms >= ?1");
  q.Bind(1, since_ms);
  std::vector<JobRow> rows;
  RETURN_IF_ERROR(AppendRows(q, &rows));
  return rows;
}

Result<std::vector<JobCount>> Store::CountFinishedJobs() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  // jobs_listed covers (queue_arn, status): one pass over the index.
  Stmt q(reader_db_,
         "SELECT queue_arn, status, COUNT(*) FROM jobs INDEXED BY jobs_listed "
         "WHERE status IN ('SUCCEEDED', 'FAILED') GROUP BY queue_arn, status");
  RETURN_IF_ERROR(q.status());
  std::vector<JobCount> counts;
  while (q.Next()) counts.push_back(JobCount{q.Text(0), q.Text(1), q.Int(2)});
  RETURN_IF_ERROR(q.status());
  return counts;
}

Result<std::map<std::string, int64_t>> Store::FinishedChildCounts(const std::string& parent_id) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_,
         "SELECT status, COUNT(*) FROM jobs WHERE parent_id = ?1 AND parent_id != '' AND status "
         "IN ('SUCCEEDED', 'FAILED') GROUP BY status");
  RETURN_IF_ERROR(q.status());
  q.Bind(1, parent_id);
  std::map<std::string, int64_t> counts;
  while (q.Next()) counts[q.Text(0)] = q.Int(1);
  RETURN_IF_ERROR(q.status());
  return counts;
}

Result<std::vector<JobRow>> Store::ListFinishedJobs(const FinishedJobsQuery& query) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  std::vector<JobRow> rows;
  const std::string select = std::string("SELECT ") + kJobColumns + " FROM jobs WHERE ";
  if (!query.parent_id.empty()) {
    // Children: by index (jobs_children), either status.
    std::string sql = select + "parent_id = ?1 AND parent_id != '' AND array_index > ?2 AND " +
                      (query.status.empty() ? "status IN ('SUCCEEDED', 'FAILED')" : "status = ?3") +
                      " ORDER BY array_index LIMIT ?4";
    Stmt q(reader_db_, sql);
    q.Bind(1, query.parent_id)
        .Bind(2, static_cast<int64_t>(query.after_index))
        .Bind(3, query.status)
        .Bind(4, query.limit);
    RETURN_IF_ERROR(AppendRows(q, &rows));
    return rows;
  }
  // A queue: one range per status, merged in the answer's order. ListJobs'
  // filters are terms of the query: a name or a definition reads a range of
  // its partial index (jobs_finished_by_name, jobs_finished_by_definition,
  // whose WHERE the query repeats so that SQLite may use them), else
  // jobs_listed.
  std::string sql = select +
                    "queue_arn = ?1 AND status = ?2 AND parent_id = '' AND "
                    "status IN ('SUCCEEDED', 'FAILED')";
  std::vector<std::string> values;  // bound from ?8 on
  auto match = [&](const std::string& column, const std::string& value) {
    if (value.empty()) return;
    if (value.back() != '*') {
      values.push_back(value);
      sql += " AND " + column + " = ?" + std::to_string(7 + values.size());
      return;
    }
    const std::string prefix = value.substr(0, value.size() - 1);
    if (prefix.empty()) return;  // "*": every value
    values.push_back(prefix);
    sql += " AND " + column + " >= ?" + std::to_string(7 + values.size());
    if (std::string end = PrefixEnd(prefix); !end.empty()) {
      values.push_back(end);
      sql += " AND " + column + " < ?" + std::to_string(7 + values.size());
    }
  };
  match("lower(name)", query.name_lower);
  match("definition_name", query.definition_name);
  if (!query.definition_arn.empty()) {
    values.push_back(query.definition_arn);
    sql += " AND definition_arn = ?" + std::to_string(7 + values.size());
  }
  if (!query.share_identifier.empty()) {
    values.push_back(query.share_identifier);
    sql += " AND share_identifier = ?" + std::to_string(7 + values.size());
  }
  if (query.after) {
    sql += query.newest_first ? " AND created_ms <= ?3 AND (created_ms < ?3 OR job_id > ?4)"
                              : " AND created_ms >= ?3 AND (created_ms > ?3 OR job_id > ?4)";
  }
  if (query.created_after > 0) sql += " AND created_ms > ?5";
  if (query.created_before > 0) sql += " AND created_ms < ?6";
  sql += query.newest_first ? " ORDER BY created_ms DESC, job_id" : " ORDER BY created_ms, job_id";
  sql += " LIMIT ?7";
  Stmt q(reader_db_, sql);
  RETURN_IF_ERROR(q.status());
  const std::vector<std::string> statuses = query.status.empty()
                                                ? std::vector<std::string>{"SUCCEEDED", "FAILED"}
                                                : std::vector<std::string>{query.status};
  for (const std::string& status : statuses) {
    q.Bind(1, query.queue_arn).Bind(2, status);
    if (query.after) q.Bind(3, query.after->first).Bind(4, query.after->second);
    if (query.created_after > 0) q.Bind(5, query.created_after);
    if (query.created_before > 0) q.Bind(6, query.created_before);
    q.Bind(7, query.limit);
    for (size_t i = 0; i < values.size(); ++i) q.Bind(static_cast<int>(8 + i), values[i]);
    while (q.Next()) rows.push_back(RowAt(q));
    RETURN_IF_ERROR(q.status());
    q.Reset();
  }
  auto before = [&](const JobRow& a, const JobRow& b) {
    if (a.created_ms != b.created_ms)
      return query.newest_first ? a.created_ms > b.created_ms : a.created_ms < b.created_ms;
    return a.job_id < b.job_id;
  };
  std::sort(rows.begin(), rows.end(), before);
  if (rows.size() > static_cast<size_t>(query.limit)) rows.resize(static_cast<size_t>(query.limit));
  return rows;
}

Result<ExpiredJobs> Store::FindExpiredJobs(int64_t ended_before_ms, int64_t max_rows) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  ExpiredJobs out;
  Stmt top(reader_db_,
           "SELECT job_id, queue_arn, status FROM jobs WHERE status IN ('SUCCEEDED', 'FAILED') "
           "AND stopped_ms < ?1 AND parent_id = '' ORDER BY stopped_ms LIMIT ?2");
  Stmt children(reader_db_,
                "SELECT queue_arn, status, COUNT(*) FROM jobs WHERE parent_id = ?1 AND "
                "parent_id != '' GROUP BY queue_arn, status");
  RETURN_IF_ERROR(top.status());
  RETURN_IF_ERROR(children.status());
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> found;
  top.Bind(1, ended_before_ms).Bind(2, std::max<int64_t>(1, max_rows));
  while (top.Next()) found.push_back({top.Text(0), {top.Text(1), top.Text(2)}});
  RETURN_IF_ERROR(top.status());
  for (const auto& [id, queue_status] : found) {
    std::map<std::pair<std::string, std::string>, int64_t> counts{{queue_status, 1}};
    int64_t rows = 1;
    children.Bind(1, id);
    while (children.Next()) {
      counts[{children.Text(0), children.Text(1)}] += children.Int(2);
      rows += children.Int(2);
    }
    RETURN_IF_ERROR(children.status());
    children.Reset();
    // An array and its children go together, even past max_rows when alone.
    if (!out.jobs.empty() && out.rows + rows > max_rows) break;
    ExpiredJob job{id, {}, rows};
    for (const auto& [key, n] : counts) job.counts.push_back(JobCount{key.first, key.second, n});
    out.jobs.push_back(std::move(job));
    out.rows += rows;
  }
  return out;
}

Result<IamSnapshot> Store::LoadIam() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  IamSnapshot snap;
  Stmt q(reader_db_, "SELECT name, doc, updated_ms FROM iam_users ORDER BY name");
  RETURN_IF_ERROR(q.status());
  while (q.Next()) snap.users.push_back(IamUserRow{q.Text(0), q.Text(1), q.Int(2)});
  RETURN_IF_ERROR(q.status());
  return snap;
}

Result<std::vector<NodeReleaseRow>> Store::LoadNodeReleases() {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_, "SELECT node, released_ms FROM node_releases ORDER BY node");
  RETURN_IF_ERROR(q.status());
  std::vector<NodeReleaseRow> rows;
  while (q.Next()) rows.push_back(NodeReleaseRow{q.Text(0), q.Int(1)});
  RETURN_IF_ERROR(q.status());
  return rows;
}

Result<std::vector<AuditRow>> Store::Audit(const AuditQuery& query) {
  std::lock_guard<std::mutex> lock(reader_mu_);
  Stmt q(reader_db_,
         "SELECT seq, time_ms, principal, operation, resource, result, request_id FROM "
         "audit_events WHERE seq > ?1 AND time_ms >= ?2 AND (?3 = '' OR principal = ?3) "
         "ORDER BY seq LIMIT ?4");
  RETURN_IF_ERROR(q.status());
  q.Bind(1, query.after_seq).Bind(2, query.since_ms).Bind(3, query.principal).Bind(4, query.limit);
  std::vector<AuditRow> rows;
  while (q.Next()) {
    rows.push_back(
        AuditRow{q.Int(0), q.Int(1), q.Text(2), q.Text(3), q.Text(4), q.Text(5), q.Text(6)});
  }
  RETURN_IF_ERROR(q.status());
  return rows;
}

}  // namespace lote::store
