// iam::Policy: a subset of AWS IAM identity-policy documents, and their
// evaluation as a pure function of (request, policies).
//
// What a document may hold (anything else is MalformedPolicyDocument, with the
// element that is wrong):
//   Version     "2012-10-17" or "2008-10-17" (optional)
//   Statement   one statement or a list of them, each with
//     Sid         optional, for the decision's "which statement decided"
//     Effect      "Allow" | "Deny"
//     Action | NotAction       "service:Operation" patterns, or "*"
//     Resource | NotResource   ARN patterns, or "*"
//     Condition   {Operator: {Key: value | [values]}}; operators
//                 String(Not)Equals(IgnoreCase), String(Not)Like, Arn(Not)Equals,
//                 Arn(Not)Like, Numeric(Not)Equals/LessThan(Equals)/GreaterThan(Equals),
//                 Bool, Null; prefixes ForAnyValue: / ForAllValues:, suffix IfExists.
// Patterns: `*` matches any run of characters (":" and "/" included), `?` one.
// Actions compare without case, resources and condition values with it (except
// the IgnoreCase operators). `${key}` in a Resource or condition value is the
// request's context value of that key (a policy variable such as
// ${aws:username}); ${*}, ${?} and ${$} are the literal characters.
//
// Evaluation follows IAM: an explicit Deny that matches wins; else an Allow that
// matches allows; else the request is denied implicitly.
//
// Thread safety: a Policy is an immutable value; Evaluate is a pure function.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace lote::iam {

enum class Effect { kAllow, kDeny };

// One condition test: Operator {Key: values}.
struct Condition {
  enum class Kind {
    kStringEquals,
    kStringEqualsIgnoreCase,
    kStringLike,
    kArnEquals,
    kArnLike,
    kNumericEquals,
    kNumericLessThan,
    kNumericLessThanEquals,
    kNumericGreaterThan,
    kNumericGreaterThanEquals,
    kBool,
    kNull,
  };
  enum class SetQualifier { kNone, kForAnyValue, kForAllValues };

  std::string op;  // as written, for messages
  Kind kind = Kind::kStringEquals;
  bool negated = false;    // ...NotEquals / ...NotLike
  bool if_exists = false;  // ...IfExists
  SetQualifier set = SetQualifier::kNone;
  std::string key;  // as written; compared without case
  std::vector<std::string> values;
};

struct Statement {
  std::string sid;
  Effect effect = Effect::kAllow;
  bool not_action = false;
  std::vector<std::string> actions;
  bool not_resource = false;
  std::vector<std::string> resources;
  std::vector<Condition> conditions;  // all must hold
};

struct Policy {
  std::string name;  // the name it is attached under, for decisions
  std::vector<Statement> statements;

  // Parses a policy document (text or JSON). Errors are InvalidArgument whose
  // message starts with the offending element ("Statement[1].Effect: ...").
  static Result<Policy> Parse(std::string name, std::string_view document);
  static Result<Policy> FromJson(std::string name, const Json& document);
};

// What the caller asks for. Context keys compare without case (as IAM's do);
// each key holds one value, or several for multi-valued keys (aws:TagKeys).
struct Request {
  std::string action;    // "batch:SubmitJob"
  std::string resource;  // an ARN, or "*" for actions that name no resource
  std::map<std::string, std::vector<std::string>> context;
};

struct Decision {
  enum class Outcome { kAllowed, kExplicitDeny, kImplicitDeny };
  Outcome outcome = Outcome::kImplicitDeny;
  std::string policy;     // the policy whose statement decided ("" when implicit)
  std::string statement;  // its Sid, else "Statement[i]"

  bool allowed() const { return outcome == Outcome::kAllowed; }
};

// IAM's evaluation of identity policies for one request.
Decision Evaluate(const Request& request, const std::vector<Policy>& policies);

// Glob match with `*` and `?`; exposed for tests and for callers that filter
// listings by pattern.
bool WildcardMatch(std::string_view pattern, std::string_view text, bool ignore_case);

}  // namespace lote::iam
