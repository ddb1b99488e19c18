// iam::JobOwners: the principal that submitted each job and the queue it was
// submitted to (schema version 3, table job_owners), so that CancelJob and
// TerminateJob can tell a principal's own jobs from another's.
//
// Record() is durable once the batch it enqueues commits; Find() sees it at
// once. Thread safety: every method may be called concurrently.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/status.h"
#include "store/store.h"

namespace lote::iam {

struct JobOwner {
  std::string principal;
  std::string queue_arn;
};

class JobOwners {
 public:
  // Loads what the store holds.
  static Result<std::unique_ptr<JobOwners>> Open(store::Store* store);

  Status Record(const std::string& job_id, JobOwner owner);
  // The owner of `job_id`; a child job ("ID:3", "ID#1", "ID:3#1") is its
  // parent's.
  std::optional<JobOwner> Find(const std::string& job_id) const;

 private:
  explicit JobOwners(store::Store* store) : store_(store) {}

  store::Store* store_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, JobOwner> owners_;  // protected by mu_
};

}  // namespace lote::iam
