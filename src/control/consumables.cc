#include "control/consumables.h"

#include <algorithm>
#include <cctype>

#include "control/validation.h"

namespace lote::control {

namespace {

constexpr const char* kArnPart = ":consumable-resource/";
// A clientToken of UpdateConsumableResource is honoured this long (AWS: 8 hours).
constexpr int64_t kClientTokenMs = 8LL * 3600 * 1000;
// The most clientTokens one resource remembers (the oldest are forgotten
// first): the document is rewritten whenever a job uses up NON_REPLENISHABLE
// units, so it stays small.
constexpr size_t kMaxClientTokens = 100;
// Totals stay far below what a JSON number holds exactly.
constexpr int64_t kMaxTotal = int64_t{1} << 50;

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// AWS's list filters: case-insensitive, a trailing '*' matches a prefix.
bool NameMatches(const std::string& name, const std::string& pattern) {
  const std::string n = Lower(name);
  std::string p = Lower(pattern);
  if (!p.empty() && p.back() == '*') {
    p.pop_back();
    return n.compare(0, p.size(), p) == 0;
  }
  return n == p;
}

int64_t InUse(const UnitsInUse& in_use, const std::string& name) {
  auto it = in_use.find(name);
  return it == in_use.end() ? 0 : it->second;
}

Result<int64_t> Quantity(const Json& request, const char* key, const std::string& path) {
  ASSIGN_OR_RETURN(std::optional<int64_t> q, OptInt(request, key, path, 0, kMaxTotal));
  return q.value_or(0);
}

}  // namespace

std::string ConsumableNameOf(const std::string& reference) {
  if (reference.rfind("arn:", 0) != 0) return ValidateName("", reference).ok() ? reference : "";
  const size_t at = reference.find(kArnPart);
  if (at == std::string::npos) return "";
  const std::string name = reference.substr(at + std::string(kArnPart).size());
  return ValidateName("", name).ok() ? name : "";
}

Result<std::vector<ConsumableNeed>> ParseConsumableProperties(const Json& properties,
                                                              const std::string& path) {
  std::vector<ConsumableNeed> out;
  if (properties.is_null()) return out;
  RETURN_IF_ERROR(ExpectObject(properties, path));
  auto it = properties.find("consumableResourceList");
  if (it == properties.end() || it->is_null()) return out;
  const std::string list_path = path + ".consumableResourceList";
  if (!it->is_array()) {
    return Status::InvalidArgument(list_path +
                                   " must be a list of {\"consumableResource\": name or ARN, "
                                   "\"quantity\": units}");
  }
  if (it->size() > kMaxConsumablesPerList) {
    return Status::InvalidArgument(list_path + " has " + std::to_string(it->size()) +
                                   " entries; a job may need at most 5 consumable resources");
  }
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& e = (*it)[i];
    const std::string at = list_path + "[" + std::to_string(i) + "]";
    RETURN_IF_ERROR(ExpectObject(e, at));
    ASSIGN_OR_RETURN(std::string ref,
                     ReqString(e, "consumableResource", at + ".consumableResource"));
    ConsumableNeed need;
    need.resource = ref;
    need.name = ConsumableNameOf(ref);
    if (need.name.empty()) {
      return Status::InvalidArgument(at + ".consumableResource '" + ref +
                                     "' is neither a consumable resource name nor its ARN "
                                     "(arn:aws:batch:REGION:ACCOUNT:consumable-resource/NAME)");
    }
    ASSIGN_OR_RETURN(need.quantity, ReqInt(e, "quantity", at + ".quantity", 1, kMaxTotal));
    for (const ConsumableNeed& seen : out) {
      if (seen.name == need.name) {
        return Status::InvalidArgument(list_path + " names consumable resource " + need.name +
                                       " twice; list each resource once with its total quantity");
      }
    }
    out.push_back(std::move(need));
  }
  return out;
}

Json ConsumablePropertiesJson(const std::vector<ConsumableNeed>& list) {
  Json entries = Json::array();
  for (const ConsumableNeed& n : list)
    entries.push_back({{"consumableResource", n.resource}, {"quantity", n.quantity}});
  return Json{{"consumableResourceList", std::move(entries)}};
}

Status ConsumableResources::Load(
    const std::vector<std::pair<std::string, std::string>>& name_and_doc) {
  std::map<std::string, Json> docs;
  for (const auto& [name, text] : name_and_doc) {
    ASSIGN_OR_RETURN(Json doc, ParseJson(text));
    if (!doc.is_object())
      return Status::Internal("stored consumable resource " + name + " is not a JSON object");
    docs[name] = std::move(doc);
  }
  docs_ = std::move(docs);
  return Status::Ok();
}

ConsumableResources::Change ConsumableResources::Put(const std::string& name) {
  const Json& doc = docs_.at(name);
  return Change{name, doc.value("consumableResourceArn", arn_of_(name)), doc};
}

Json ConsumableResources::Detail(const Json& doc, const UnitsInUse& in_use, bool with_tags) const {
  const std::string name = doc.value("consumableResourceName", "");
  const int64_t target = doc.value("totalQuantity", int64_t{0});
  const int64_t used = InUse(in_use, name);
  // Set below what is in use: nothing is available, and the total shown
  // comes down to the one set as the jobs holding units end.
  Json out = {{"consumableResourceName", name},
              {"consumableResourceArn", doc.value("consumableResourceArn", arn_of_(name))},
              {"totalQuantity", std::max(target, used)},
              {"inUseQuantity", used},
              {"availableQuantity", std::max<int64_t>(target - used, 0)},
              {"resourceType", doc.value("resourceType", "REPLENISHABLE")},
              {"createdAt", doc.value("createdAt", int64_t{0})}};
  if (with_tags) out["tags"] = doc.value("tags", Json::object());
  return out;
}

Result<Json> ConsumableResources::Create(const Json& request, int64_t now_ms, Change* change) {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string name,
                   ReqString(request, "consumableResourceName", "consumableResourceName"));
  RETURN_IF_ERROR(ValidateName("consumableResourceName", name));
  ASSIGN_OR_RETURN(int64_t total, Quantity(request, "totalQuantity", "totalQuantity"));
  ASSIGN_OR_RETURN(std::optional<std::string> type,
                   OptString(request, "resourceType", "resourceType"));
  const std::string resource_type = type.value_or("REPLENISHABLE");
  RETURN_IF_ERROR(
      ExpectEnum(resource_type, "resourceType", {"REPLENISHABLE", "NON_REPLENISHABLE"}));
  ASSIGN_OR_RETURN(TagMap tags, ReadTags(request, "tags", "tags"));
  if (docs_.count(name)) {
    return Status::AlreadyExists("consumable resource " + name +
                                 " already exists; choose another name or change its quantity "
                                 "with UpdateConsumableResource");
  }
  Json tag_doc = Json::object();
  for (const auto& [k, v] : tags) tag_doc[k] = v;
  const std::string arn = arn_of_(name);
  docs_[name] = Json{{"consumableResourceName", name},
                     {"consumableResourceArn", arn},
                     {"totalQuantity", total},
                     {"resourceType", resource_type},
                     {"createdAt", now_ms},
                     {"tags", std::move(tag_doc)},
                     {"clientTokens", Json::object()}};
  *change = Put(name);
  return Json{{"consumableResourceName", name}, {"consumableResourceArn", arn}};
}

Result<std::string> ConsumableResources::Resolve(const Json& request) const {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::string ref, ReqString(request, "consumableResource", "consumableResource"));
  const std::string name = ConsumableNameOf(ref);
  if (name.empty()) {
    return Status::InvalidArgument("consumableResource '" + ref +
                                   "' is neither a consumable resource name nor its ARN");
  }
  auto it = docs_.find(name);
  if (it == docs_.end() || (ref.rfind("arn:", 0) == 0 &&
                            it->second.value("consumableResourceArn", std::string()) != ref)) {
    return Status::NotFound("consumable resource " + ref +
                            " does not exist; ListConsumableResources lists them");
  }
  return name;
}

Result<Json> ConsumableResources::Describe(const Json& request, const UnitsInUse& in_use) const {
  ASSIGN_OR_RETURN(std::string name, Resolve(request));
  return Detail(docs_.at(name), in_use, /*with_tags=*/true);
}

Result<Json> ConsumableResources::Update(const Json& request, int64_t now_ms,
                                         const UnitsInUse& in_use, Change* change) {
  ASSIGN_OR_RETURN(std::string name, Resolve(request));
  ASSIGN_OR_RETURN(std::optional<std::string> op, OptString(request, "operation", "operation"));
  const std::string operation = op.value_or("SET");
  RETURN_IF_ERROR(ExpectEnum(operation, "operation", {"SET", "ADD", "REMOVE"}));
  if (!request.contains("quantity") || request["quantity"].is_null()) {
    return Status::InvalidArgument("quantity is required: the new total (SET) or the units to " +
                                   std::string("ADD or REMOVE"));
  }
  ASSIGN_OR_RETURN(int64_t quantity, Quantity(request, "quantity", "quantity"));
  ASSIGN_OR_RETURN(std::optional<std::string> token,
                   OptString(request, "clientToken", "clientToken"));
  if (token && token->size() > 64) {
    return Status::InvalidArgument("clientToken is " + std::to_string(token->size()) +
                                   " characters long; the limit is 64");
  }
  Json& doc = docs_.at(name);
  Json& tokens = doc["clientTokens"];
  if (!tokens.is_object()) tokens = Json::object();
  // Forget the tokens older than 8 hours.
  for (auto it = tokens.begin(); it != tokens.end();) {
    if (now_ms - it.value().value("atMs", int64_t{0}) > kClientTokenMs) {
      it = tokens.erase(it);
    } else {
      ++it;
    }
  }
  const std::string payload = operation + " " + std::to_string(quantity);
  if (token && !token->empty() && tokens.contains(*token)) {
    if (tokens[*token].value("request", "") != payload) {
      return Status::InvalidArgument(
          "clientToken " + *token + " was used within the last 8 hours with another request (" +
          tokens[*token].value("request", "") + "); use a new clientToken for a new change");
    }
    // The same request again: it happened once; answer as it stands.
    Json d = Detail(doc, in_use, false);
    return Json{{"consumableResourceName", name},
                {"consumableResourceArn", d["consumableResourceArn"]},
                {"totalQuantity", d["totalQuantity"]}};
  }
  const int64_t total = doc.value("totalQuantity", int64_t{0});
  int64_t next = quantity;
  if (operation == "ADD") {
    next = total + quantity;
    if (next > kMaxTotal) {
      return Status::InvalidArgument("ADD " + std::to_string(quantity) + " would make the total " +
                                     "of " + name + " larger than 2^50 units");
    }
  } else if (operation == "REMOVE") {
    next = std::max<int64_t>(total - quantity, 0);
  }
  doc["totalQuantity"] = next;
  if (token && !token->empty()) {
    tokens[*token] = Json{{"request", payload}, {"atMs", now_ms}};
    while (tokens.size() > kMaxClientTokens) {
      auto oldest = tokens.begin();
      for (auto it = tokens.begin(); it != tokens.end(); ++it)
        if (it.value().value("atMs", int64_t{0}) < oldest.value().value("atMs", int64_t{0}))
          oldest = it;
      tokens.erase(oldest);
    }
  }
  *change = Put(name);
  Json d = Detail(doc, in_use, false);
  return Json{{"consumableResourceName", name},
              {"consumableResourceArn", d["consumableResourceArn"]},
              {"totalQuantity", d["totalQuantity"]}};
}

Result<Json> ConsumableResources::Delete(const Json& request, Change* change) {
  ASSIGN_OR_RETURN(std::string name, Resolve(request));
  *change = Change{name, docs_.at(name).value("consumableResourceArn", arn_of_(name)), Json()};
  docs_.erase(name);
  return Json::object();
}

Result<Json> ConsumableResources::List(const Json& request, const UnitsInUse& in_use) const {
  RETURN_IF_ERROR(ExpectObject(request, "request body"));
  ASSIGN_OR_RETURN(std::optional<int64_t> max_results,
                   OptInt(request, "maxResults", "maxResults", 1, kMaxPageSize));
  ASSIGN_OR_RETURN(std::optional<std::string> token, OptString(request, "nextToken", "nextToken"));
  std::vector<std::string> patterns;
  if (auto f = request.find("filters"); f != request.end() && !f->is_null()) {
    if (!f->is_array())
      return Status::InvalidArgument("filters must be a list of {\"name\", \"values\"}");
    for (const Json& filter : *f) {
      RETURN_IF_ERROR(ExpectObject(filter, "filters[]"));
      ASSIGN_OR_RETURN(std::string fname, ReqString(filter, "name", "filters[].name"));
      if (fname != "CONSUMABLE_RESOURCE_NAME") {
        return Status::InvalidArgument("filter '" + fname +
                                       "' is not valid: ListConsumableResources filters by "
                                       "CONSUMABLE_RESOURCE_NAME");
      }
      ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> values,
                       OptStringList(filter, "values", "filters[].values", 100));
      if (values) patterns.insert(patterns.end(), values->begin(), values->end());
    }
  }
  std::vector<std::string> keys;
  for (const auto& [name, doc] : docs_) {
    bool match = patterns.empty();
    for (const std::string& p : patterns) match = match || NameMatches(name, p);
    if (match) keys.push_back(name);
  }
  ASSIGN_OR_RETURN(size_t start, PageStart(keys, token));
  const size_t limit = static_cast<size_t>(max_results.value_or(kMaxPageSize));
  Json list = Json::array();
  size_t i = start;
  for (; i < keys.size() && list.size() < limit; ++i) {
    Json d = Detail(docs_.at(keys[i]), in_use, false);
    d.erase("availableQuantity");
    d.erase("createdAt");
    list.push_back(std::move(d));
  }
  Json out = {{"consumableResources", std::move(list)}};
  if (i < keys.size() && i > start) out["nextToken"] = MakeNextToken(keys[i - 1]);
  return out;
}

std::optional<ConsumableResources::Change> ConsumableResources::UseUp(const std::string& name,
                                                                      int64_t quantity) {
  auto it = docs_.find(name);
  if (it == docs_.end() || it->second.value("resourceType", "") != "NON_REPLENISHABLE")
    return std::nullopt;
  const int64_t total = it->second.value("totalQuantity", int64_t{0});
  it->second["totalQuantity"] = std::max<int64_t>(total - quantity, 0);
  return Put(name);
}

std::vector<sched::Consumable> ConsumableResources::ForScheduler(const UnitsInUse& in_use) const {
  std::vector<sched::Consumable> out;
  out.reserve(docs_.size());
  for (const auto& [name, doc] : docs_) {
    const int64_t total = doc.value("totalQuantity", int64_t{0});
    out.push_back(
        sched::Consumable{name, total, std::max<int64_t>(total - InUse(in_use, name), 0)});
  }
  return out;
}

Result<std::string> ConsumableResources::NameOfArnLocked(const std::string& arn) const {
  const std::string name = ConsumableNameOf(arn);
  auto it = docs_.find(name);
  if (name.empty() || it == docs_.end() ||
      it->second.value("consumableResourceArn", std::string()) != arn) {
    return Status::NotFound("consumable resource " + arn + " does not exist");
  }
  return name;
}

Result<Json> ConsumableResources::ChangeTags(const std::string& arn, const Json& request,
                                             bool untag, Change* change) {
  ASSIGN_OR_RETURN(std::string name, NameOfArnLocked(arn));
  Json tags = docs_.at(name).value("tags", Json::object());
  if (untag) {
    ASSIGN_OR_RETURN(std::optional<std::vector<std::string>> keys,
                     OptStringList(request, "tagKeys", "tagKeys", 50));
    if (!keys || keys->empty())
      return Status::InvalidArgument("tagKeys is required: list the tag keys to remove");
    for (const std::string& k : *keys) tags.erase(k);
  } else {
    ASSIGN_OR_RETURN(TagMap add, ReadTags(request, "tags", "tags"));
    if (add.empty()) return Status::InvalidArgument("tags is required: give at least one tag");
    for (const auto& [k, v] : add) tags[k] = v;
    if (tags.size() > kMaxTagsPerResource) {
      return Status::InvalidArgument("consumable resource " + name + " would have " +
                                     std::to_string(tags.size()) + " tags; the limit is 50");
    }
  }
  docs_.at(name)["tags"] = std::move(tags);
  *change = Put(name);
  return Json::object();
}

Result<Json> ConsumableResources::Tags(const std::string& arn) const {
  ASSIGN_OR_RETURN(std::string name, NameOfArnLocked(arn));
  return Json{{"tags", docs_.at(name).value("tags", Json::object())}};
}

}  // namespace lote::control
