// SSM Parameter Store over the json protocol (X-Amz-Target AmazonSSM.*,
// SigV4 service "ssm"). See docs/api.md, "SSM".
#pragma once

#include "api/router.h"
#include "control/control_plane.h"

namespace lote::api {

// NotFound → ParameterNotFound, AlreadyExists → ParameterAlreadyExists,
// FailedPrecondition → ParameterVersionNotFound, InvalidArgument and
// ResourceExhausted → ValidationException / ParameterLimitExceeded, our
// faults InternalServerError (500).
ApiError SsmErrorFromStatus(const Status& status);

// `control` must outlive the router.
void RegisterSsm(ApiRouter* router, control::ControlPlane* control);

}  // namespace lote::api
