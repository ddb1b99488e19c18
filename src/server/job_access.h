// The per-principal parts of the job operations, around the job loop's own:
// SubmitJob records its caller as the job's owner (in the job, so it is
// stored with it), DescribeJobs and ListJobs answer only the jobs the caller
// may read (iam::MayReadJob; docs/api.md, "Principals and policies"), and
// CancelJob/TerminateJob's authorization asks the job for its owner.
// With no caller (--insecure-no-auth) jobs have no owner and nothing is
// filtered. Thread safety: the handlers are as thread safe as the loop.
#pragma once

#include "api/iam_access.h"
#include "api/router.h"
#include "control/control_plane.h"
#include "control/job_loop.h"

namespace lote::server {

api::JsonHandler SubmitAsCaller(control::JobLoop* loop);
api::JsonHandler DescribeReadableJobs(control::JobLoop* loop, const api::IamAccessControl* access);
api::JsonHandler ListReadableJobs(control::JobLoop* loop, const control::ControlPlane* control,
                                  const api::IamAccessControl* access);
// The owner and queue of a job by any id form (DescribeJobs' record of it).
api::JobOwnerLookup JobOwnersOf(control::JobLoop* loop);

}  // namespace lote::server
