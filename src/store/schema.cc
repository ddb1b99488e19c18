#include "store/schema.h"

namespace lote::store {

namespace {

// Version 1: control-plane resources, tags, and the job tables of the job
// lifecycle (jobs, attempts, append-only job_events).
constexpr std::string_view kV1 = R"sql(
CREATE TABLE compute_environments (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE job_queues (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE scheduling_policies (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE job_definitions (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL,
  UNIQUE (name, revision)
);
CREATE TABLE tags (
  resource_arn TEXT NOT NULL,
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  PRIMARY KEY (resource_arn, key)
) WITHOUT ROWID;
CREATE TABLE jobs (
  job_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  queue_arn TEXT NOT NULL,
  status TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  doc TEXT NOT NULL
);
CREATE INDEX jobs_by_queue_status ON jobs (queue_arn, status, created_ms);
CREATE TABLE attempts (
  job_id TEXT NOT NULL,
  attempt INTEGER NOT NULL,
  doc TEXT NOT NULL,
  PRIMARY KEY (job_id, attempt)
) WITHOUT ROWID;
CREATE TABLE job_events (
  job_id TEXT NOT NULL,
  seq INTEGER NOT NULL CHECK (seq >= 1),
  time_ms INTEGER NOT NULL,
  type TEXT NOT NULL,
  payload TEXT NOT NULL,
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER job_events_append_only BEFORE UPDATE ON job_events
BEGIN
  SELECT RAISE(ABORT, 'job_events is append-only: rows are never updated');
END;
)sql";

// Version 2: the EC2 resources Batch users' scripts create (placement
// groups, launch templates with their versions) and SSM parameters
// (SecureString values encrypted, never plain text).
constexpr std::string_view kV2 = R"sql(
CREATE TABLE placement_groups (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE launch_templates (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE ssm_parameters (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
)sql";

// Version 3: IAM users (their policies, allowed Unix users and access keys,
// secrets sealed with the server's key, in one JSON document per user), the
// principal that submitted each job, and the audit trail (append-only).
constexpr std::string_view kV3 = R"sql(
CREATE TABLE iam_users (
  name TEXT PRIMARY KEY,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE job_owners (
  job_id TEXT PRIMARY KEY,
  principal TEXT NOT NULL,
  queue_arn TEXT NOT NULL
);
CREATE TABLE audit_events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  time_ms INTEGER NOT NULL,
  principal TEXT NOT NULL,
  operation TEXT NOT NULL,
  resource TEXT NOT NULL,
  result TEXT NOT NULL,
  request_id TEXT NOT NULL
);
CREATE INDEX audit_events_by_principal ON audit_events (principal, seq);
CREATE INDEX audit_events_by_time ON audit_events (time_ms);
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
BEGIN
  SELECT RAISE(ABORT, 'audit_events is append-only: rows are never updated');
END;
)sql";

// Version 4: a job's owner is part of the job (its doc's "owner", written
// with the job itself); the owners version 3 kept apart move into their jobs
// (array children included) and job_owners goes.
constexpr std::string_view kV4 = R"sql(
UPDATE jobs SET doc = json_set(doc, '$.owner', o.principal)
  FROM job_owners AS o
  WHERE jobs.job_id = o.job_id OR jobs.job_id LIKE o.job_id || ':%';
DROP TABLE job_owners;
)sql";

// Version 5: finished jobs live in the store only (the job loop keeps the
// unfinished ones in memory), so the reads of finished jobs get their own
// columns and indexes: `parent_id` / `array_index` (array children; '' and
// -1 for a top-level job), `stopped_ms` (when a SUCCEEDED or FAILED job
// ended: retention), `node_failed_ms` (the end of its last attempt that
// failed NODE_LOST or HANG: the quarantine's rebuild). ListJobs of a queue's
// finished jobs reads jobs_listed in (createdAt, jobId) order; start-up reads
// jobs_unfinished only.
constexpr std::string_view kV5 = R"sql(
ALTER TABLE jobs ADD COLUMN parent_id TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN array_index INTEGER NOT NULL DEFAULT -1;
ALTER TABLE jobs ADD COLUMN stopped_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN node_failed_ms INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET parent_id = substr(job_id, 1, instr(job_id, ':') - 1),
                array_index = CAST(substr(job_id, instr(job_id, ':') + 1) AS INTEGER)
  WHERE instr(job_id, ':') > 0;
UPDATE jobs SET stopped_ms = COALESCE(NULLIF(json_extract(doc, '$.stoppedAt'), 0), updated_ms)
  WHERE status IN ('SUCCEEDED', 'FAILED');
UPDATE jobs SET node_failed_ms = COALESCE((
    SELECT MAX(json_extract(a.value, '$.stoppedAt')) FROM json_each(jobs.doc, '$.attempts') AS a
    WHERE json_extract(a.value, '$.failureCategory') IN ('NODE_LOST', 'HANG')), 0)
  WHERE json_valid(doc);
DROP INDEX jobs_by_queue_status;
CREATE INDEX jobs_listed ON jobs (queue_arn, status, parent_id, created_ms, job_id);
CREATE INDEX jobs_children ON jobs (parent_id, array_index) WHERE parent_id != '';
CREATE INDEX jobs_unfinished ON jobs (status) WHERE status NOT IN ('SUCCEEDED', 'FAILED');
CREATE INDEX jobs_ended ON jobs (stopped_ms) WHERE status IN ('SUCCEEDED', 'FAILED');
CREATE INDEX jobs_node_failed ON jobs (node_failed_ms) WHERE node_failed_ms > 0;
)sql";

// Version 6 (issue 24): bad-node quarantines released by hand, so that a
// release outlives a restart (the quarantine itself is rebuilt from the
// stored attempts; failures at or before released_ms do not count).
constexpr std::string_view kV6 = R"sql(
CREATE TABLE node_releases (
  node TEXT PRIMARY KEY,
  released_ms INTEGER NOT NULL
);
)sql";

// Version 7 (issue 22): ListJobs' filters over the finished jobs are read
// from indexes, not by parsing every finished row of the queue: JOB_NAME
// (case-insensitive, exact or a prefix) from lower(name), JOB_DEFINITION from
// the definition's name (its ARN is checked on the rows of that name), and
// SHARE_IDENTIFIER as a column. The indexes are partial, over the finished
// top-level jobs, so the writes of waiting and running jobs do not pay for
// them.
constexpr std::string_view kV7 = R"sql(
ALTER TABLE jobs ADD COLUMN definition_name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN definition_arn TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN share_identifier TEXT NOT NULL DEFAULT '';
UPDATE jobs SET definition_name = COALESCE(json_extract(doc, '$.jobDefinitionName'), ''),
                definition_arn = COALESCE(json_extract(doc, '$.jobDefinition'), ''),
                share_identifier = COALESCE(json_extract(doc, '$.shareIdentifier'), '')
  WHERE json_valid(doc);
CREATE INDEX jobs_finished_by_name ON jobs (queue_arn, status, lower(name), created_ms)
  WHERE parent_id = '' AND status IN ('SUCCEEDED', 'FAILED');
CREATE INDEX jobs_finished_by_definition ON jobs (queue_arn, status, definition_name, created_ms)
  WHERE parent_id = '' AND status IN ('SUCCEEDED', 'FAILED');
)sql";

// Version 8 (issue 22): the seq of the last event a job's row holds. The
// job loop rewrites the row of an unfinished job only now and then (its
// dependencies resolved, its scheduling, launch, start, wait reasons and
// progress are events stored as they come): the rows written per job fall
// from one per change to its submission and its end.
constexpr std::string_view kV8 = R"sql(
ALTER TABLE jobs ADD COLUMN row_seq INTEGER NOT NULL DEFAULT 0;
)sql";

// Version 9: AWS Batch consumable resources (their total, type, tags and the
// recent clientTokens of their updates in one document per resource; written
// by the job loop in the same batches as the jobs that use them) and service
// environments (SageMaker training capacity of SAGEMAKER_TRAINING queues) and
// quota shares (virtual queues of such a queue; name "<queue>/<share>").
constexpr std::string_view kV9 = R"sql(
CREATE TABLE consumable_resources (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE service_environments (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
CREATE TABLE quota_shares (
  arn TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  revision INTEGER NOT NULL DEFAULT 0,
  doc TEXT NOT NULL,
  updated_ms INTEGER NOT NULL
);
)sql";

}  // namespace

const std::vector<Migration>& Migrations() {
  static const std::vector<Migration> kMigrations = {
      {1, kV1}, {2, kV2}, {3, kV3}, {4, kV4}, {5, kV5}, {6, kV6}, {7, kV7}, {8, kV8}, {9, kV9},
  };
  return kMigrations;
}

int32_t LatestSchemaVersion() { return Migrations().back().version; }

}  // namespace lote::store
