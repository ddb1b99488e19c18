// iam::AuditLog: the audit trail (schema version 3, table audit_events):
// every mutation and every refused call, with time, principal, operation (the
// IAM action), resource and result.
//
// Record() enqueues the row behind every write queued before it and returns
// without waiting for the disk: a mutation's row commits in the same group
// as the mutation's own write or the next one (SIGKILL between the two can
// lose the row, never reorder rows). Query() first waits for every row
// recorded before it, so it sees each call that has been answered.
// Thread safety: every method may be called concurrently.
#pragma once

#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "store/store.h"

namespace lote::iam {

class AuditLog {
 public:
  AuditLog(store::Store* store, const Clock* clock) : store_(store), clock_(clock) {}

  // row.time_ms is set here when 0.
  void Record(store::AuditRow row);
  Result<std::vector<store::AuditRow>> Query(const store::AuditQuery& query);

 private:
  store::Store* store_;
  const Clock* clock_;
};

}  // namespace lote::iam
