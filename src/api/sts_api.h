// STS GetCallerIdentity (Query protocol, XML, SigV4 service "sts"): the call
// users make first to check their credentials.
#pragma once

#include <string>

#include "api/router.h"
#include "iam/directory.h"

namespace lote::api {

// Account and ARN of the signer's user ("arn:aws:iam::<account>:user/<name>",
// from `directory`; "user/lote" when there is none, --insecure-no-auth),
// UserId the user's id (else the access key id).
void RegisterSts(ApiRouter* router, std::string account_id,
                 const iam::Directory* directory = nullptr);

}  // namespace lote::api
