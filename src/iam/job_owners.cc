#include "iam/job_owners.h"

namespace lote::iam {

Result<std::unique_ptr<JobOwners>> JobOwners::Open(store::Store* store) {
  std::unique_ptr<JobOwners> owners(new JobOwners(store));
  ASSIGN_OR_RETURN(store::IamSnapshot snap, store->LoadIam());
  for (store::JobOwnerRow& row : snap.job_owners) {
    owners->owners_[row.job_id] = JobOwner{std::move(row.principal), std::move(row.queue_arn)};
  }
  return owners;
}

Status JobOwners::Record(const std::string& job_id, JobOwner owner) {
  store::WriteBatch batch;
  batch.PutJobOwner(store::JobOwnerRow{job_id, owner.principal, owner.queue_arn});
  RETURN_IF_ERROR(store_->Enqueue(std::move(batch)).status());
  std::lock_guard<std::mutex> lock(mu_);
  owners_[job_id] = std::move(owner);
  return Status::Ok();
}

std::optional<JobOwner> JobOwners::Find(const std::string& job_id) const {
  const std::string parent = job_id.substr(0, job_id.find_first_of(":#"));
  std::lock_guard<std::mutex> lock(mu_);
  auto it = owners_.find(parent);
  if (it == owners_.end()) return std::nullopt;
  return it->second;
}

}  // namespace lote::iam
