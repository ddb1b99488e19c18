#include "api/query_protocol.h"

#include <cstdlib>
#include <map>

#include "api/s3_xml.h"
#include "common/sigv4.h"

namespace lote::api {

namespace {

constexpr long kMaxListIndex = 1000;

bool IsIndex(const std::string& segment) {
  if (segment.empty() || segment.size() > 4) return false;
  for (char c : segment)
    if (c < '0' || c > '9') return false;
  return true;
}

// A node of the tree while it is built: lists are kept as index → node maps
// until every pair is placed, so "X.2" may come before "X.1".
struct Node {
  bool is_leaf = false;
  std::string value;
  std::map<std::string, Node> members;  // object members, or list indexes (as numbers)
  bool is_list = false;
};

Status Place(Node* root, const std::string& name, const std::string& value) {
  Node* at = root;
  size_t pos = 0;
  while (true) {
    size_t dot = name.find('.', pos);
    std::string segment =
        name.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (segment.empty())
      return Status::InvalidArgument("parameter '" + name + "' has an empty part");
    const bool index = IsIndex(segment);
    if (at->is_leaf) {
      return Status::InvalidArgument("parameter '" + name + "' is both a value and has members");
    }
    if (!at->members.empty() && at->is_list != index) {
      return Status::InvalidArgument("parameter '" + name +
                                     "' mixes list indexes and member names");
    }
    if (index) {
      long n = std::strtol(segment.c_str(), nullptr, 10);
      if (n < 1 || n > kMaxListIndex) {
        return Status::InvalidArgument("parameter '" + name + "' has list index " + segment +
                                       "; indexes run from 1 to " + std::to_string(kMaxListIndex));
      }
      at->is_list = true;
      segment = std::to_string(n);
      segment.insert(0, 4 - segment.size(), '0');  // map order = numeric order
    }
    at = &at->members[segment];
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  if (at->is_leaf || !at->members.empty()) {
    return Status::InvalidArgument("parameter '" + name + "' is given twice");
  }
  at->is_leaf = true;
  at->value = value;
  return Status::Ok();
}

Json ToJson(const Node& node) {
  if (node.is_leaf) return node.value;
  if (node.is_list) {
    Json list = Json::array();
    for (const auto& [_, member] : node.members) list.push_back(ToJson(member));
    return list;
  }
  Json object = Json::object();
  for (const auto& [name, member] : node.members) object[name] = ToJson(member);
  return object;
}

void AppendElement(const std::string& name, const Json& value, std::string* out) {
  *out += "<" + name + ">";
  AppendXml(value, out);
  *out += "</" + name + ">";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ParseFormEncoded(const std::string& raw) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t pos = 0;
  while (pos < raw.size()) {
    size_t amp = raw.find('&', pos);
    std::string part = raw.substr(pos, amp == std::string::npos ? std::string::npos : amp - pos);
    if (!part.empty()) {
      size_t eq = part.find('=');
      std::string k = part.substr(0, eq);
      std::string v = eq == std::string::npos ? "" : part.substr(eq + 1);
      for (char& c : k)
        if (c == '+') c = ' ';
      for (char& c : v)
        if (c == '+') c = ' ';
      out.emplace_back(sigv4::UriDecode(k), sigv4::UriDecode(v));
    }
    if (amp == std::string::npos) break;
    pos = amp + 1;
  }
  return out;
}

Result<Json> UnflattenQuery(const std::vector<std::pair<std::string, std::string>>& pairs) {
  Node root;
  for (const auto& [name, value] : pairs) {
    if (name == "Action" || name == "Version") continue;
    RETURN_IF_ERROR(Place(&root, name, value));
  }
  if (root.is_list) return Status::InvalidArgument("a parameter name cannot start with a number");
  Json tree = ToJson(root);
  return tree.is_object() ? tree : Json::object();
}

void AppendXml(const Json& value, std::string* out) {
  if (value.is_object()) {
    for (const auto& [name, member] : value.items()) {
      if (!member.is_null()) AppendElement(name, member, out);
    }
  } else if (value.is_array()) {
    for (const Json& item : value) AppendElement("item", item, out);
  } else if (value.is_string()) {
    *out += XmlEscape(value.get<std::string>());
  } else if (value.is_boolean()) {
    *out += value.get<bool>() ? "true" : "false";
  } else if (!value.is_null()) {
    *out += value.dump();
  }
}

}  // namespace lote::api
