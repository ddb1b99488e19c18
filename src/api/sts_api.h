// STS GetCallerIdentity (Query protocol, XML, SigV4 service "sts"): the call
// users make first to check their credentials.
#pragma once

#include <string>

#include "api/router.h"

namespace lote::api {

// Account and ARN of the signer ("arn:aws:iam::<account>:user/<principal>"),
// UserId its access key id.
void RegisterSts(ApiRouter* router, std::string account_id);

}  // namespace lote::api
