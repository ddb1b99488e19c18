#include "control/validation.h"

#include <algorithm>

#include "common/crypto.h"

namespace lote::control {

namespace {

std::string Str(std::string_view s) { return std::string(s); }

std::string Describe(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

}  // namespace

Status ValidateName(std::string_view field, std::string_view name) {
  if (name.empty()) {
    return Status::InvalidArgument(Str(field) +
                                   " is empty; give a name of 1 to 128 letters, "
                                   "digits, hyphens (-) or underscores (_)");
  }
  if (name.size() > kMaxNameLength) {
    return Status::InvalidArgument(Str(field) + " '" + Str(name.substr(0, 40)) + "...' is " +
                                   std::to_string(name.size()) +
                                   " characters long; the limit is 128");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    if (!ok) {
      return Status::InvalidArgument(
          Str(field) + " '" + Str(name) + "' contains the character '" + std::string(1, c) +
          "'; use only letters, digits, hyphens (-) and underscores (_)");
    }
  }
  return Status::Ok();
}

Status ExpectObject(const Json& value, std::string_view path) {
  if (!value.is_object()) {
    return Status::InvalidArgument(Str(path) + " must be a JSON object (got " + Describe(value) +
                                   ")");
  }
  return Status::Ok();
}

static const Json* Field(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Result<std::optional<std::string>> OptString(const Json& obj, std::string_view key,
                                             std::string_view path) {
  const Json* v = Field(obj, key);
  if (!v) return std::optional<std::string>();
  if (!v->is_string()) {
    return Status::InvalidArgument(Str(path) + " must be a string (got " + Describe(*v) + ")");
  }
  return std::optional<std::string>(v->get<std::string>());
}

Result<std::string> ReqString(const Json& obj, std::string_view key, std::string_view path) {
  ASSIGN_OR_RETURN(std::optional<std::string> v, OptString(obj, key, path));
  if (!v) return Status::InvalidArgument(Str(path) + " is required; add it to the request");
  return *v;
}

Result<std::optional<int64_t>> OptInt(const Json& obj, std::string_view key, std::string_view path,
                                      int64_t min, int64_t max) {
  const Json* v = Field(obj, key);
  if (!v) return std::optional<int64_t>();
  if (!v->is_number_integer()) {
    return Status::InvalidArgument(Str(path) + " must be an integer (got " + Describe(*v) + ")");
  }
  int64_t x = v->get<int64_t>();
  if (x < min || x > max) {
    return Status::InvalidArgument(Str(path) + " is " + std::to_string(x) +
                                   "; it must be between " + std::to_string(min) + " and " +
                                   std::to_string(max));
  }
  return std::optional<int64_t>(x);
}

Result<int64_t> ReqInt(const Json& obj, std::string_view key, std::string_view path, int64_t min,
                       int64_t max) {
  ASSIGN_OR_RETURN(std::optional<int64_t> v, OptInt(obj, key, path, min, max));
  if (!v) return Status::InvalidArgument(Str(path) + " is required; add it to the request");
  return *v;
}

Result<std::optional<bool>> OptBool(const Json& obj, std::string_view key, std::string_view path) {
  const Json* v = Field(obj, key);
  if (!v) return std::optional<bool>();
  if (!v->is_boolean()) {
    return Status::InvalidArgument(Str(path) + " must be true or false (got " + Describe(*v) + ")");
  }
  return std::optional<bool>(v->get<bool>());
}

Result<std::optional<std::vector<std::string>>> OptStringList(const Json& obj, std::string_view key,
                                                              std::string_view path,
                                                              size_t max_items) {
  const Json* v = Field(obj, key);
  if (!v) return std::optional<std::vector<std::string>>();
  if (!v->is_array()) {
    return Status::InvalidArgument(Str(path) + " must be a list of strings (got " + Describe(*v) +
                                   ")");
  }
  if (v->size() > max_items) {
    return Status::InvalidArgument(Str(path) + " has " + std::to_string(v->size()) +
                                   " entries; at most " + std::to_string(max_items) +
                                   " are allowed");
  }
  std::vector<std::string> out;
  for (const Json& e : *v) {
    if (!e.is_string()) {
      return Status::InvalidArgument(Str(path) + " must contain only strings (got " + Describe(e) +
                                     ")");
    }
    out.push_back(e.get<std::string>());
  }
  return std::optional<std::vector<std::string>>(std::move(out));
}

Status ExpectEnum(std::string_view value, std::string_view path,
                  const std::vector<std::string_view>& allowed) {
  for (std::string_view a : allowed) {
    if (a == value) return Status::Ok();
  }
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + Str(a);
  return Status::InvalidArgument(Str(path) + " is '" + Str(value) +
                                 "'; it must be one of: " + list);
}

Status ValidateTagKey(std::string_view key) {
  if (key.empty() || key.size() > 128) {
    return Status::InvalidArgument("tag key '" + Str(key.substr(0, 40)) +
                                   "' must be 1 to 128 characters long");
  }
  if (key.size() >= 4 && (key.substr(0, 4) == "aws:" || key.substr(0, 4) == "AWS:")) {
    return Status::InvalidArgument("tag key '" + Str(key) +
                                   "' uses the reserved prefix 'aws:'; choose another key");
  }
  return Status::Ok();
}

Result<TagMap> ReadTags(const Json& obj, std::string_view key, std::string_view path) {
  TagMap tags;
  const Json* v = Field(obj, key);
  if (!v) return tags;
  if (!v->is_object()) {
    return Status::InvalidArgument(Str(path) + " must be a map of tag keys to string values (got " +
                                   Describe(*v) + ")");
  }
  if (v->size() > kMaxTagsPerResource) {
    return Status::InvalidArgument(Str(path) + " has " + std::to_string(v->size()) +
                                   " tags; a resource can have at most 50");
  }
  for (auto it = v->begin(); it != v->end(); ++it) {
    RETURN_IF_ERROR(ValidateTagKey(it.key()));
    if (!it.value().is_string()) {
      return Status::InvalidArgument("tag '" + it.key() + "' must have a string value (got " +
                                     Describe(it.value()) + ")");
    }
    std::string value = it.value().get<std::string>();
    if (value.size() > 256) {
      return Status::InvalidArgument("tag '" + it.key() + "' has a value of " +
                                     std::to_string(value.size()) +
                                     " characters; the limit is 256");
    }
    tags[it.key()] = std::move(value);
  }
  return tags;
}

std::string MakeNextToken(const std::string& last_key) { return Base64Encode("lote1:" + last_key); }

Result<size_t> PageStart(const std::vector<std::string>& sorted_keys,
                         const std::optional<std::string>& next_token) {
  if (!next_token || next_token->empty()) return size_t{0};
  std::string decoded;
  if (!Base64Decode(*next_token, &decoded) || decoded.rfind("lote1:", 0) != 0) {
    return Status::InvalidArgument(
        "nextToken is not valid; pass the nextToken of the previous response unchanged, or omit "
        "it to start from the beginning");
  }
  std::string last = decoded.substr(6);
  auto it = std::upper_bound(sorted_keys.begin(), sorted_keys.end(), last);
  return static_cast<size_t>(it - sorted_keys.begin());
}

}  // namespace lote::control
