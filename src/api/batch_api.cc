#include "api/batch_api.h"

#include <cctype>

namespace lote::api {

namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

void RegisterBatchControlPlane(ApiRouter* router, control::ControlPlane* cp) {
  // AWS Batch's quota on a job payload (the SubmitJob request: overrides,
  // parameters, tags) is 30 KiB; a job definition is at most 24 KiB (checked
  // by the control plane) and every other request is far smaller.
  router->SetBodyLimit("Batch.SubmitJob", kMaxSubmitJobBytes);
  // Operations of the Batch model that lote does not implement (yet): the job
  // operations arrive with the job layer and replace these stubs.
  for (const char* name : {"SubmitJob",
                           "DescribeJobs",
                           "ListJobs",
                           "CancelJob",
                           "TerminateJob",
                           "UpdateServiceJob",
                           "GetJobQueueSnapshot",
                           "CreateConsumableResource",
                           "DeleteConsumableResource",
                           "DescribeConsumableResource",
                           "ListConsumableResources",
                           "UpdateConsumableResource",
                           "ListJobsByConsumableResource",
                           "CreateServiceEnvironment",
                           "DeleteServiceEnvironment",
                           "DescribeServiceEnvironments",
                           "UpdateServiceEnvironment",
                           "SubmitServiceJob",
                           "DescribeServiceJob",
                           "ListServiceJobs",
                           "TerminateServiceJob",
                           "CreateQuotaShare",
                           "DeleteQuotaShare",
                           "DescribeQuotaShare",
                           "ListQuotaShares",
                           "UpdateQuotaShare"}) {
    std::string op = name;
    router->RegisterRestOperation({op,
                                   "POST",
                                   "/v1/" + Lower(op),
                                   {},
                                   [op](const Json&) -> Result<Json> {
                                     return Status::Unimplemented(
                                         op +
                                         " is not supported by this lote server; see docs/api.md "
                                         "for the supported operations");
                                   },
                                   /*nonblocking=*/true});
  }
  using Method = Result<Json> (control::ControlPlane::*)(const Json&);
  struct Entry {
    const char* name;
    Method method;
  };
  const Entry entries[] = {
      {"CreateComputeEnvironment", &control::ControlPlane::CreateComputeEnvironment},
      {"DescribeComputeEnvironments", &control::ControlPlane::DescribeComputeEnvironments},
      {"UpdateComputeEnvironment", &control::ControlPlane::UpdateComputeEnvironment},
      {"DeleteComputeEnvironment", &control::ControlPlane::DeleteComputeEnvironment},
      {"CreateJobQueue", &control::ControlPlane::CreateJobQueue},
      {"DescribeJobQueues", &control::ControlPlane::DescribeJobQueues},
      {"UpdateJobQueue", &control::ControlPlane::UpdateJobQueue},
      {"RegisterJobDefinition", &control::ControlPlane::RegisterJobDefinition},
      {"DescribeJobDefinitions", &control::ControlPlane::DescribeJobDefinitions},
      {"DeregisterJobDefinition", &control::ControlPlane::DeregisterJobDefinition},
      {"CreateSchedulingPolicy", &control::ControlPlane::CreateSchedulingPolicy},
      {"DescribeSchedulingPolicies", &control::ControlPlane::DescribeSchedulingPolicies},
      {"ListSchedulingPolicies", &control::ControlPlane::ListSchedulingPolicies},
      {"UpdateSchedulingPolicy", &control::ControlPlane::UpdateSchedulingPolicy},
      {"DeleteSchedulingPolicy", &control::ControlPlane::DeleteSchedulingPolicy},
      {"CreateServiceEnvironment", &control::ControlPlane::CreateServiceEnvironment},
      {"DescribeServiceEnvironments", &control::ControlPlane::DescribeServiceEnvironments},
      {"UpdateServiceEnvironment", &control::ControlPlane::UpdateServiceEnvironment},
      {"DeleteServiceEnvironment", &control::ControlPlane::DeleteServiceEnvironment},
      {"CreateQuotaShare", &control::ControlPlane::CreateQuotaShare},
      {"DescribeQuotaShare", &control::ControlPlane::DescribeQuotaShare},
      {"UpdateQuotaShare", &control::ControlPlane::UpdateQuotaShare},
      {"DeleteQuotaShare", &control::ControlPlane::DeleteQuotaShare},
      {"ListQuotaShares", &control::ControlPlane::ListQuotaShares},
  };
  for (const Entry& e : entries) {
    Method m = e.method;
    // Reads are served from memory under a short lock: they may run on an
    // I/O thread. Mutations wait for a commit: the handler pool.
    const std::string name = e.name;
    const bool read = name.rfind("Describe", 0) == 0 || name.rfind("List", 0) == 0;
    router->RegisterRestOperation({name,
                                   "POST",
                                   "/v1/" + Lower(name),
                                   {},
                                   [cp, m](const Json& r) { return (cp->*m)(r); },
                                   read});
  }
}

void RegisterBatchSharedOperations(ApiRouter* router, control::ControlPlane* cp,
                                   control::JobLoop* jobs) {
  router->RegisterRestOperation(
      {"DeleteJobQueue", "POST", "/v1/deletejobqueue", {}, [cp, jobs](const Json& r) {
         return jobs != nullptr ? jobs->DeleteJobQueue(r) : cp->DeleteJobQueue(r);
       }});
  // Tags of jobs and of consumable resources live with the job loop; every
  // other ARN is the control plane's.
  auto is_job = [jobs](const Json& r) { return jobs != nullptr && jobs->IsJobArn(r); };
  auto is_consumable = [jobs](const Json& r) {
    return jobs != nullptr && control::JobLoop::IsConsumableResourceArn(r);
  };
  router->RegisterRestOperation({"TagResource",
                                 "POST",
                                 "/v1/tags/{resourceArn}",
                                 {},
                                 [cp, jobs, is_job, is_consumable](const Json& r) {
                                   if (is_consumable(r))
                                     return jobs->ChangeConsumableResourceTags(r, false);
                                   return is_job(r) ? jobs->ChangeJobTags(r, /*untag=*/false)
                                                    : cp->TagResource(r);
                                 }});
  router->RegisterRestOperation({"ListTagsForResource",
                                 "GET",
                                 "/v1/tags/{resourceArn}",
                                 {},
                                 [cp, jobs, is_job, is_consumable](const Json& r) {
                                   if (is_consumable(r)) return jobs->ListConsumableResourceTags(r);
                                   return is_job(r) ? jobs->ListJobTags(r)
                                                    : cp->ListTagsForResource(r);
                                 },
                                 /*nonblocking=*/true});
  router->RegisterRestOperation({"UntagResource",
                                 "DELETE",
                                 "/v1/tags/{resourceArn}",
                                 {"tagKeys"},
                                 [cp, jobs, is_job, is_consumable](const Json& r) {
                                   if (is_consumable(r))
                                     return jobs->ChangeConsumableResourceTags(r, true);
                                   return is_job(r) ? jobs->ChangeJobTags(r, /*untag=*/true)
                                                    : cp->UntagResource(r);
                                 }});
}

void RegisterConsumableResources(ApiRouter* router, control::JobLoop* jobs) {
  using Method = Result<Json> (control::JobLoop::*)(const Json&);
  struct Entry {
    const char* name;
    Method method;
  };
  const Entry entries[] = {
      {"CreateConsumableResource", &control::JobLoop::CreateConsumableResource},
      {"DescribeConsumableResource", &control::JobLoop::DescribeConsumableResource},
      {"UpdateConsumableResource", &control::JobLoop::UpdateConsumableResource},
      {"DeleteConsumableResource", &control::JobLoop::DeleteConsumableResource},
      {"ListConsumableResources", &control::JobLoop::ListConsumableResources},
      {"ListJobsByConsumableResource", &control::JobLoop::ListJobsByConsumableResource},
  };
  for (const Entry& e : entries) {
    Method m = e.method;
    const std::string name = e.name;
    // Reads take the job loop's lock briefly; mutations wait for a commit.
    const bool read = name.rfind("Describe", 0) == 0 || name.rfind("List", 0) == 0;
    router->RegisterRestOperation({name,
                                   "POST",
                                   "/v1/" + Lower(name),
                                   {},
                                   [jobs, m](const Json& r) { return (jobs->*m)(r); },
                                   read});
  }
}

void RegisterLoteJobOperations(ApiRouter* router, control::JobLoop* jobs) {
  router->RegisterRestOperation(
      {"InjectFault", "POST", "/v1/lote/injectfault", {}, [jobs](const Json& r) {
         return jobs->InjectFault(r);
       }});
  // Blocks while gdb runs (seconds): the handler pool.
  router->RegisterRestOperation({"DumpJob", "POST", "/v1/lote/dumpjob", {}, [jobs](const Json& r) {
                                   return jobs->DumpJob(r);
                                 }});
}

}  // namespace lote::api
