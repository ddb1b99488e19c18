// EC2, the subset Batch users' scripts call (Query protocol, XML answers,
// SigV4 service "ec2"): placement groups, launch templates and their
// versions, DescribeInstanceTypes. See docs/api.md, "EC2".
#pragma once

#include "api/router.h"
#include "control/control_plane.h"

namespace lote::api {

// EC2's error code for a failed `action`: NotFound, AlreadyExists and
// FailedPrecondition become the resource's own codes
// (InvalidPlacementGroup.Unknown, InvalidLaunchTemplateName.AlreadyExistsException, ...),
// InvalidArgument InvalidParameterValue, our faults InternalError (500).
ApiError Ec2ErrorFromStatus(const std::string& action, const Status& status);

// `control` must outlive the router.
void RegisterEc2(ApiRouter* router, control::ControlPlane* control);

}  // namespace lote::api
