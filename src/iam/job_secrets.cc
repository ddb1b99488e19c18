#include "iam/job_secrets.h"

namespace lote::iam {

namespace {

void AddSecrets(const Json& container, std::vector<std::string>* out) {
  auto secrets = container.find("secrets");
  if (secrets == container.end() || !secrets->is_array()) return;
  for (const Json& s : *secrets) {
    if (!s.is_object()) continue;
    auto from = s.find("valueFrom");
    if (from != s.end() && from->is_string()) out->push_back(from->get<std::string>());
  }
}

}  // namespace

std::vector<std::string> JobDefinitionSecrets(const Json& definition) {
  std::vector<std::string> out;
  if (!definition.is_object()) return out;
  if (auto c = definition.find("containerProperties"); c != definition.end() && c->is_object())
    AddSecrets(*c, &out);
  if (auto n = definition.find("nodeProperties"); n != definition.end() && n->is_object()) {
    for (const Json& range : n->value("nodeRangeProperties", Json::array())) {
      if (auto c = range.find("container"); c != range.end() && c->is_object())
        AddSecrets(*c, &out);
    }
  }
  return out;
}

}  // namespace lote::iam
