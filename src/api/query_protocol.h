// The AWS Query protocol as EC2 and STS speak it: form-encoded requests
// (`Action=...&Version=...&Name.1=...`), XML answers.
//
// Requests are turned into JSON trees so handlers read them like the other
// protocols: "A.B" nests objects, a numeric segment ("Filter.2.Value.1")
// makes a list (1-based, in index order). Answers are JSON trees written as
// XML: an object member becomes an element of that name, a list's elements
// become <item> children, a boolean true/false. Handlers therefore answer with
// the model's locationNames (EC2: "placementGroupSet": [...]).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "api/s3_xml.h"
#include "common/json.h"
#include "common/status.h"

namespace lote::api {

// "a=1&b=x+y" → decoded pairs ('+' is a space).
std::vector<std::pair<std::string, std::string>> ParseFormEncoded(const std::string& raw);

// The pairs (less Action and Version) as a JSON tree, as described above.
// InvalidArgument when one name is used both as a value and as a parent, or a
// list index is not a number from 1 to 1000.
Result<Json> UnflattenQuery(const std::vector<std::pair<std::string, std::string>>& pairs);

// XML text escaping: XmlEscape (api/s3_xml.h).

// `value`'s members as XML elements (see the file comment).
void AppendXml(const Json& value, std::string* out);

}  // namespace lote::api
