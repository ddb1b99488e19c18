// The SSM parameters a job definition's `secrets` name (containerProperties
// and every node range's container): SubmitJob needs ssm:GetParameters on
// each of them, since the job's nodes will see their values.
// Thread safety: pure.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"

namespace lote::iam {

// Every `secrets[].valueFrom` of `definition` (a parameter name or ARN), in
// order, duplicates kept.
std::vector<std::string> JobDefinitionSecrets(const Json& definition);

}  // namespace lote::iam
