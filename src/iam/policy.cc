#include "iam/policy.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <optional>

namespace lote::iam {
namespace {

char Lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

Status Malformed(const std::string& where, const std::string& what) {
  return Status::InvalidArgument(where + ": " + what);
}

// A string or a list of strings (IAM accepts both for Action, Resource and
// condition values; booleans and numbers are written as their text).
Result<std::vector<std::string>> StringList(const Json& v, const std::string& where) {
  std::vector<std::string> out;
  auto one = [&](const Json& item) -> Status {
    if (item.is_string()) {
      out.push_back(item.get<std::string>());
    } else if (item.is_boolean()) {
      out.push_back(item.get<bool>() ? "true" : "false");
    } else if (item.is_number()) {
      out.push_back(item.dump());
    } else {
      return Malformed(where, "expected a string or a list of strings");
    }
    return Status::Ok();
  };
  if (v.is_array()) {
    for (const Json& item : v) RETURN_IF_ERROR(one(item));
  } else {
    RETURN_IF_ERROR(one(v));
  }
  if (out.empty()) return Malformed(where, "must not be empty");
  return out;
}

struct OperatorName {
  Condition::Kind kind;
  bool negated;
};

std::optional<OperatorName> BaseOperator(std::string_view name) {
  using K = Condition::Kind;
  static const std::map<std::string, OperatorName, std::less<>> kOperators = {
      {"StringEquals", {K::kStringEquals, false}},
      {"StringNotEquals", {K::kStringEquals, true}},
      {"StringEqualsIgnoreCase", {K::kStringEqualsIgnoreCase, false}},
      {"StringNotEqualsIgnoreCase", {K::kStringEqualsIgnoreCase, true}},
      {"StringLike", {K::kStringLike, false}},
      {"StringNotLike", {K::kStringLike, true}},
      {"ArnEquals", {K::kArnEquals, false}},
      {"ArnNotEquals", {K::kArnEquals, true}},
      {"ArnLike", {K::kArnLike, false}},
      {"ArnNotLike", {K::kArnLike, true}},
      {"NumericEquals", {K::kNumericEquals, false}},
      {"NumericNotEquals", {K::kNumericEquals, true}},
      {"NumericLessThan", {K::kNumericLessThan, false}},
      {"NumericLessThanEquals", {K::kNumericLessThanEquals, false}},
      {"NumericGreaterThan", {K::kNumericGreaterThan, false}},
      {"NumericGreaterThanEquals", {K::kNumericGreaterThanEquals, false}},
      {"Bool", {K::kBool, false}},
      {"Null", {K::kNull, false}},
  };
  auto it = kOperators.find(name);
  if (it == kOperators.end()) return std::nullopt;
  return it->second;
}

Result<std::vector<Condition>> ParseConditions(const Json& block, const std::string& where) {
  if (!block.is_object()) return Malformed(where, "expected an object of operators");
  std::vector<Condition> out;
  for (const auto& [op, keys] : block.items()) {
    const std::string op_where = where + "." + op;
    std::string_view name = op;
    Condition c;
    c.op = op;
    for (auto [prefix, set] :
         {std::pair{"ForAnyValue:", Condition::SetQualifier::kForAnyValue},
          std::pair{"ForAllValues:", Condition::SetQualifier::kForAllValues}}) {
      if (name.starts_with(prefix)) {
        c.set = set;
        name.remove_prefix(std::string_view(prefix).size());
      }
    }
    if (name.ends_with("IfExists") && name != "IfExists") {
      c.if_exists = true;
      name.remove_suffix(std::string_view("IfExists").size());
    }
    auto base = BaseOperator(name);
    if (!base) return Malformed(op_where, "unsupported condition operator");
    if (base->kind == Condition::Kind::kNull &&
        (c.if_exists || c.set != Condition::SetQualifier::kNone)) {
      return Malformed(op_where, "Null takes no IfExists or set qualifier");
    }
    c.kind = base->kind;
    c.negated = base->negated;
    if (!keys.is_object() || keys.empty()) {
      return Malformed(op_where, "expected an object of condition keys");
    }
    for (const auto& [key, values] : keys.items()) {
      Condition k = c;
      k.key = key;
      ASSIGN_OR_RETURN(k.values, StringList(values, op_where + "." + key));
      out.push_back(std::move(k));
    }
  }
  return out;
}

Result<Statement> ParseStatement(const Json& s, const std::string& where) {
  if (!s.is_object()) return Malformed(where, "expected an object");
  Statement st;
  for (const auto& [key, value] : s.items()) {
    static const std::vector<std::string> kKnown = {
        "Sid", "Effect", "Action", "NotAction", "Resource", "NotResource", "Condition"};
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      if (key == "Principal" || key == "NotPrincipal") {
        return Malformed(where + "." + key, "an identity policy names no principal");
      }
      return Malformed(where + "." + key, "unknown element");
    }
  }
  if (s.contains("Sid")) {
    if (!s["Sid"].is_string()) return Malformed(where + ".Sid", "expected a string");
    st.sid = s["Sid"].get<std::string>();
  }
  if (!s.contains("Effect") || !s["Effect"].is_string()) {
    return Malformed(where + ".Effect", "required: \"Allow\" or \"Deny\"");
  }
  const std::string effect = s["Effect"].get<std::string>();
  if (effect == "Allow") {
    st.effect = Effect::kAllow;
  } else if (effect == "Deny") {
    st.effect = Effect::kDeny;
  } else {
    return Malformed(where + ".Effect", "must be \"Allow\" or \"Deny\", not \"" + effect + "\"");
  }
  auto pick = [&](const char* yes, const char* no, bool& negated,
                  std::vector<std::string>& out) -> Status {
    const bool has_yes = s.contains(yes), has_no = s.contains(no);
    if (has_yes == has_no) {
      return Malformed(where, std::string("needs exactly one of ") + yes + " and " + no);
    }
    negated = has_no;
    ASSIGN_OR_RETURN(out, StringList(s[has_yes ? yes : no], where + "." + (has_yes ? yes : no)));
    return Status::Ok();
  };
  RETURN_IF_ERROR(pick("Action", "NotAction", st.not_action, st.actions));
  for (const std::string& a : st.actions) {
    if (a != "*" && a.find(':') == std::string::npos) {
      return Malformed(where + ".Action", "\"" + a + "\" is not of the form service:Operation");
    }
  }
  RETURN_IF_ERROR(pick("Resource", "NotResource", st.not_resource, st.resources));
  for (const std::string& r : st.resources) {
    if (r != "*" && !r.starts_with("arn:")) {
      return Malformed(where + ".Resource", "\"" + r + "\" is neither \"*\" nor an ARN pattern");
    }
  }
  if (s.contains("Condition")) {
    ASSIGN_OR_RETURN(st.conditions, ParseConditions(s["Condition"], where + ".Condition"));
  }
  return st;
}

// The context's values for `key` (keys compare without case), or null.
const std::vector<std::string>* Lookup(const Request& r, std::string_view key) {
  for (const auto& [k, v] : r.context) {
    if (EqualsIgnoreCase(k, key)) return &v;
  }
  return nullptr;
}

// Replaces ${key} with the request's single context value; an unknown variable
// leaves the text unmatched (IAM treats it as matching nothing).
std::optional<std::string> Substitute(std::string_view text, const Request& r) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '$' && i + 1 < text.size() && text[i + 1] == '{') {
      const size_t end = text.find('}', i + 2);
      if (end == std::string_view::npos) {
        out.append(text.substr(i));
        break;
      }
      const std::string_view name = text.substr(i + 2, end - i - 2);
      if (name == "*" || name == "?" || name == "$") {
        out.push_back('\x01');  // a literal, protected from the wildcard matcher
        out.push_back(name[0]);
      } else {
        const auto* values = Lookup(r, name);
        if (values == nullptr || values->size() != 1) return std::nullopt;
        out.append(values->front());
      }
      i = end;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

bool PatternMatches(std::string_view pattern, std::string_view text, const Request& r,
                    bool ignore_case) {
  if (pattern.find("${") == std::string_view::npos)
    return WildcardMatch(pattern, text, ignore_case);
  auto expanded = Substitute(pattern, r);
  return expanded && WildcardMatch(*expanded, text, ignore_case);
}

std::optional<double> Number(std::string_view s) {
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Does one request value satisfy the (positive form of the) operator against
// one policy value?
bool ValueMatches(const Condition& c, const std::string& value, const std::string& pattern,
                  const Request& r) {
  using K = Condition::Kind;
  switch (c.kind) {
    case K::kStringEquals:
    case K::kArnEquals: {
      auto p = Substitute(pattern, r);
      return p && *p == value;
    }
    case K::kStringEqualsIgnoreCase: {
      auto p = Substitute(pattern, r);
      return p && EqualsIgnoreCase(*p, value);
    }
    case K::kStringLike:
    case K::kArnLike:
      return PatternMatches(pattern, value, r, false);
    case K::kBool:
      return EqualsIgnoreCase(value, pattern);
    case K::kNumericEquals:
    case K::kNumericLessThan:
    case K::kNumericLessThanEquals:
    case K::kNumericGreaterThan:
    case K::kNumericGreaterThanEquals: {
      auto a = Number(value), b = Number(pattern);
      if (!a || !b) return false;
      if (c.kind == K::kNumericEquals) return *a == *b;
      if (c.kind == K::kNumericLessThan) return *a < *b;
      if (c.kind == K::kNumericLessThanEquals) return *a <= *b;
      if (c.kind == K::kNumericGreaterThan) return *a > *b;
      return *a >= *b;
    }
    case K::kNull:
      return false;  // handled by ConditionHolds
  }
  return false;
}

bool AnyPolicyValue(const Condition& c, const std::string& value, const Request& r) {
  return std::any_of(c.values.begin(), c.values.end(),
                     [&](const std::string& p) { return ValueMatches(c, value, p, r); });
}

bool ConditionHolds(const Condition& c, const Request& r) {
  const std::vector<std::string>* values = Lookup(r, c.key);
  const bool present = values != nullptr && !values->empty();
  if (c.kind == Condition::Kind::kNull) {
    // "Null": true means "the key is absent".
    const bool want_absent = EqualsIgnoreCase(c.values.front(), "true");
    return want_absent != present;
  }
  if (!present) {
    if (c.if_exists) return true;
    if (c.set == Condition::SetQualifier::kForAllValues) return true;
    if (c.set == Condition::SetQualifier::kForAnyValue) return false;
    return c.negated;  // a missing key matches nothing: "not equal" holds
  }
  if (c.set == Condition::SetQualifier::kForAllValues) {
    // Every request value satisfies the operator (negated: matches no policy value).
    return std::all_of(values->begin(), values->end(),
                       [&](const std::string& v) { return AnyPolicyValue(c, v, r) != c.negated; });
  }
  if (c.set == Condition::SetQualifier::kForAnyValue) {
    return std::any_of(values->begin(), values->end(),
                       [&](const std::string& v) { return AnyPolicyValue(c, v, r) != c.negated; });
  }
  const bool any = std::any_of(values->begin(), values->end(),
                               [&](const std::string& v) { return AnyPolicyValue(c, v, r); });
  return any != c.negated;
}

bool StatementMatches(const Statement& s, const Request& r) {
  const bool action = std::any_of(s.actions.begin(), s.actions.end(), [&](const std::string& a) {
    return WildcardMatch(a, r.action, true);
  });
  if (action == s.not_action) return false;
  const bool resource = std::any_of(
      s.resources.begin(), s.resources.end(),
      [&](const std::string& p) { return p == "*" || PatternMatches(p, r.resource, r, false); });
  if (resource == s.not_resource) return false;
  return std::all_of(s.conditions.begin(), s.conditions.end(),
                     [&](const Condition& c) { return ConditionHolds(c, r); });
}

}  // namespace

bool WildcardMatch(std::string_view pattern, std::string_view text, bool ignore_case) {
  // Iterative glob with one backtrack point: linear in practice, no recursion.
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  auto same = [&](char a, char b) { return ignore_case ? Lower(a) == Lower(b) : a == b; };
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '\x01' && p + 1 < pattern.size()) {
      if (same(pattern[p + 1], text[t])) {  // an escaped literal from ${*} / ${?} / ${$}
        p += 2;
        ++t;
        continue;
      }
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
      continue;
    } else if (p < pattern.size() && (pattern[p] == '?' || same(pattern[p], text[t]))) {
      ++p;
      ++t;
      continue;
    }
    if (star == std::string_view::npos) return false;
    p = star + 1;
    t = ++mark;
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

Result<Policy> Policy::FromJson(std::string name, const Json& doc) {
  if (!doc.is_object()) return Malformed("policy", "expected a JSON object");
  for (const auto& [key, value] : doc.items()) {
    if (key != "Version" && key != "Statement" && key != "Id") {
      return Malformed(key, "unknown element");
    }
  }
  if (doc.contains("Version")) {
    const Json& v = doc["Version"];
    if (!v.is_string() || (v != "2012-10-17" && v != "2008-10-17")) {
      return Malformed("Version", "must be \"2012-10-17\" or \"2008-10-17\"");
    }
  }
  if (!doc.contains("Statement")) return Malformed("Statement", "required");
  Policy policy;
  policy.name = std::move(name);
  const Json& st = doc["Statement"];
  if (st.is_array()) {
    if (st.empty()) return Malformed("Statement", "must not be empty");
    for (size_t i = 0; i < st.size(); ++i) {
      ASSIGN_OR_RETURN(Statement s, ParseStatement(st[i], "Statement[" + std::to_string(i) + "]"));
      policy.statements.push_back(std::move(s));
    }
  } else {
    ASSIGN_OR_RETURN(Statement s, ParseStatement(st, "Statement"));
    policy.statements.push_back(std::move(s));
  }
  return policy;
}

Result<Policy> Policy::Parse(std::string name, std::string_view document) {
  auto json = ParseJson(document);
  if (!json.ok()) return Malformed("policy", "not JSON: " + json.status().message());
  return FromJson(std::move(name), *json);
}

Decision Evaluate(const Request& request, const std::vector<Policy>& policies) {
  Decision allow;
  bool allowed = false;
  for (const Policy& policy : policies) {
    for (size_t i = 0; i < policy.statements.size(); ++i) {
      const Statement& s = policy.statements[i];
      if (!StatementMatches(s, request)) continue;
      Decision d;
      d.policy = policy.name;
      d.statement = s.sid.empty() ? "Statement[" + std::to_string(i) + "]" : s.sid;
      if (s.effect == Effect::kDeny) {
        d.outcome = Decision::Outcome::kExplicitDeny;
        return d;  // an explicit Deny wins over everything
      }
      if (!allowed) {
        d.outcome = Decision::Outcome::kAllowed;
        allow = d;
        allowed = true;
      }
    }
  }
  return allowed ? allow : Decision{};
}

}  // namespace lote::iam
