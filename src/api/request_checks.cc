#include "api/request_checks.h"

#include <cmath>
#include <cstdint>
#include <limits>

namespace lote::api {

namespace {

constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53

std::string Quote(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "'";
  out += s.size() > kMax ? std::string(s.substr(0, kMax)) + "..." : std::string(s);
  return out + "'";
}

// Printable form of a string that may hold NULs or any byte.
std::string Printable(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    if (c == '\0') {
      out += "\\u0000";
    } else {
      out += c;
    }
  }
  return Quote(out);
}

Status CheckString(std::string_view value, const std::string& path, bool ascii_only,
                   bool nul_allowed) {
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c == 0 && !nul_allowed) {
      return Status::InvalidArgument(path + " contains a NUL character (U+0000) at position " +
                                     std::to_string(i) + "; AWS does not allow it there");
    }
    if (c >= 0x80 && ascii_only) {
      return Status::InvalidArgument(
          path + " must be ASCII (names, ARNs and ids are letters, digits and punctuation); " +
          Printable(value) + " has a non-ASCII character at byte " + std::to_string(i));
    }
  }
  return Status::Ok();
}

Status Walk(const Json& value, const std::string& path, bool ascii_only, bool nul_allowed,
            const ValueRules& rules) {
  switch (value.type()) {
    case Json::value_t::object:
      for (const auto& [key, member] : value.items()) {
        const std::string child = path.empty() ? key : path + "." + key;
        RETURN_IF_ERROR(CheckString(
            key, "the member name " + Printable(key) + (path.empty() ? "" : " in " + path), false,
            false));
        const bool child_ascii = ascii_only || rules.ascii_only.count(key) > 0;
        const bool child_nul = rules.nul_allowed.count(key) > 0;
        RETURN_IF_ERROR(Walk(member, child, child_ascii, child_nul, rules));
      }
      return Status::Ok();
    case Json::value_t::array: {
      size_t i = 0;
      for (const Json& item : value) {
        RETURN_IF_ERROR(
            Walk(item, path + "[" + std::to_string(i++) + "]", ascii_only, nul_allowed, rules));
      }
      return Status::Ok();
    }
    case Json::value_t::string:
      return CheckString(value.get_ref<const std::string&>(), path.empty() ? "the body" : path,
                         ascii_only, nul_allowed);
    case Json::value_t::number_unsigned:
      if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Status::InvalidArgument(path + " is " + std::to_string(value.get<uint64_t>()) +
                                       ", out of range (at most 9223372036854775807)");
      }
      return Status::Ok();
    case Json::value_t::number_float: {
      const double d = value.get<double>();
      if (!std::isfinite(d)) {
        return Status::InvalidArgument(path +
                                       " is a number too large to represent (it overflows a "
                                       "64-bit float); give a value in the member's range");
      }
      if (std::fabs(d) > kMaxExactInteger) {
        return Status::InvalidArgument(path + " is " + value.dump() +
                                       ", out of range (at most 9007199254740992 in magnitude)");
      }
      return Status::Ok();
    }
    default:
      return Status::Ok();
  }
}

}  // namespace

Status CheckJsonDepth(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > max_depth) {
        return Status::InvalidArgument("the request body nests objects and arrays deeper than " +
                                       std::to_string(max_depth) + " levels (at byte " +
                                       std::to_string(i) + ")");
      }
    } else if ((c == '}' || c == ']') && depth > 0) {
      --depth;
    }
  }
  return Status::Ok();
}

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      extra = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      extra = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + static_cast<size_t>(extra) >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += static_cast<size_t>(extra) + 1;
  }
  return true;
}

Status CheckRequestValues(const Json& request, const ValueRules& rules) {
  return Walk(request, "", false, false, rules);
}

const ValueRules& BatchValueRules() {
  static const ValueRules rules{{"computeEnvironmentName",
                                 "jobQueueName",
                                 "jobDefinitionName",
                                 "jobName",
                                 "schedulingPolicyName",
                                 "computeEnvironment",
                                 "jobQueue",
                                 "jobDefinition",
                                 "computeEnvironments",
                                 "jobQueues",
                                 "jobDefinitions",
                                 "schedulingPolicyArn",
                                 "arn",
                                 "arns",
                                 "resourceArn",
                                 "jobId",
                                 "jobs",
                                 "arrayJobId",
                                 "multiNodeJobId",
                                 "shareIdentifier",
                                 "serviceRole",
                                 "instanceRole",
                                 "jobRoleArn",
                                 "executionRoleArn",
                                 "nextToken"},
                                {}};
  return rules;
}

const ValueRules& LogsValueRules() {
  static const ValueRules rules{{"logGroupName", "logGroupNamePrefix", "logGroupIdentifier",
                                 "nextToken", "nextForwardToken", "nextBackwardToken"},
                                {"message"}};
  return rules;
}

}  // namespace lote::api
