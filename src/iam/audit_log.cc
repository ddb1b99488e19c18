#include "iam/audit_log.h"

#include <spdlog/spdlog.h>

namespace lote::iam {

void AuditLog::Record(store::AuditRow row) {
  if (row.time_ms == 0) row.time_ms = clock_->NowMillis();
  store::WriteBatch batch;
  batch.AppendAudit(std::move(row));
  Result<store::Store::Ticket> ticket = store_->Enqueue(std::move(batch));
  if (!ticket.ok()) spdlog::error("audit: {}", ticket.status().ToString());
}

Result<std::vector<store::AuditRow>> AuditLog::Query(const store::AuditQuery& query) {
  // An empty batch orders after every row recorded so far.
  RETURN_IF_ERROR(store_->Write(store::WriteBatch{}));
  return store_->Audit(query);
}

}  // namespace lote::iam
