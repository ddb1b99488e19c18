// AWS Batch operations on the router.
//
// RegisterBatchControlPlane registers every resource operation of
// control::ControlPlane, and registers every other operation of the Batch
// model (SubmitJob, DescribeJobs, ListJobs, CancelJob, TerminateJob, ...)
// as a stub answering ClientException "not supported yet". The job layer
// (next issue) replaces those stubs by registering its own handlers for the
// same paths with ApiRouter::RegisterRestOperation, e.g.
//   router->RegisterRestOperation({"SubmitJob", "POST", "/v1/submitjob", {},
//       [jobs](const Json& r) { return jobs->SubmitJob(r); }});
#pragma once

#include "api/router.h"
#include "control/control_plane.h"
#include "control/job_loop.h"

namespace lote::api {

// Largest SubmitJob request body accepted (AWS Batch's job payload quota).
inline constexpr size_t kMaxSubmitJobBytes = 30 * 1024;

// `control` must outlive the router.
void RegisterBatchControlPlane(ApiRouter* router, control::ControlPlane* control);

// The operations that involve both the resources and the jobs, registered
// once: TagResource, UntagResource, ListTagsForResource (a job ARN's tags go
// to `jobs`, every other ARN's to `control`) and DeleteJobQueue (which also
// terminates the queue's jobs). `jobs` may be null (no job layer); both must
// outlive the router.
void RegisterBatchSharedOperations(ApiRouter* router, control::ControlPlane* control,
                                   control::JobLoop* jobs);

// lote's own job operations, outside the Batch model (docs/api.md, "lote's
// own operations"), signed and authorized like Batch's (IAM actions
// batch:InjectFault, batch:DumpJob): POST /v1/lote/injectfault (a fault for a
// running job's node, docs/faults.md) and POST /v1/lote/dumpjob (stack dumps
// of a running job's nodes). `jobs` must outlive the router.
// The consumable resource operations (Create/Describe/Update/Delete/List
// ConsumableResource(s), ListJobsByConsumableResource), answered by the job loop.
void RegisterConsumableResources(ApiRouter* router, control::JobLoop* jobs);

void RegisterLoteJobOperations(ApiRouter* router, control::JobLoop* jobs);

}  // namespace lote::api
