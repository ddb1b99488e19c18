// lote's own node operations (not part of AWS Batch; docs/api.md):
// ReleaseNode (POST /v1/releasenode, {"node": NAME}) ends a node's bad-node
// quarantine at once (`lote nodes release NODE`). What is quarantined is shown
// by DescribeComputeEnvironments as the extra key loteQuarantinedNodes.
#pragma once

#include "api/router.h"
#include "control/job_loop.h"

namespace lote::api {

// `jobs` must outlive the router.
void RegisterNodes(ApiRouter* router, control::JobLoop* jobs);

}  // namespace lote::api
