#include "control/fault_plan.h"

#include <array>
#include <utility>

#include "common/ids.h"
#include "control/capacity_hold.h"
#include "control/job_controller.h"

namespace lote::control {
namespace {

struct Kind {
  exec::FaultAction action;
  const char* name;  // "Kill": lote:injectKillNode, ...AtStep, ...AfterSeconds
};
constexpr std::array<Kind, 4> kKinds{{{exec::FaultAction::kKill, "Kill"},
                                      {exec::FaultAction::kPreempt, "Preempt"},
                                      {exec::FaultAction::kStop, "Stop"},
                                      {exec::FaultAction::kSlow, "Slow"}}};
constexpr int64_t kMaxStep = 1'000'000'000;
constexpr int64_t kMaxAfterSeconds = 30LL * 24 * 3600;

// Where the keys are read: a job's parameters then tags, or an
// environment's tags; the first map that has a key wins.
struct Keys {
  std::vector<const TagMap*> maps;
  int32_t num_nodes = 1;    // the node index is checked against it
  std::string environment;  // empty: the job's own keys
};
constexpr int32_t kMaxEnvironmentNodes = 10'000;

Keys KeysOf(const Job& job) { return Keys{{&job.parameters, &job.tags}, job.NumNodes(), ""}; }

std::optional<std::string> Lookup(const Keys& keys, const std::string& key) {
  for (const TagMap* map : keys.maps)
    if (auto it = map->find(key); it != map->end()) return it->second;
  return std::nullopt;
}

Result<int64_t> WholeNumber(const std::string& key, const std::string& value, int64_t min,
                            int64_t max, const std::string& meaning) {
  int64_t v = 0;
  bool ok = !value.empty() && value.size() <= 10;
  for (char c : value) {
    if (c < '0' || c > '9') ok = false;
    if (ok) v = v * 10 + (c - '0');
  }
  if (!ok || v < min || v > max)
    return Status::InvalidArgument(key + " is '" + value + "': give a whole number from " +
                                   std::to_string(min) + " to " + std::to_string(max) + " (" +
                                   meaning + ")");
  return v;
}

constexpr char kSlowPercent[] = "lote:injectSlowPercent";
constexpr int64_t kDefaultSlowPercent = 50;
constexpr char kUploadFailSeconds[] = "lote:injectUploadFailSeconds";
constexpr char kUploadFailAtStep[] = "lote:injectUploadFailAtStep";
constexpr int64_t kMaxUploadFailSeconds = 24 * 3600;

bool Known(const std::string& key) {
  if (key == kUploadFailSeconds || key == kUploadFailAtStep || key == kSlowPercent) return true;
  if (key == kInjectCapacityShortageKey) return true;  // the scheduler's (capacity_hold.h)
  for (const Kind& k : kKinds)
    for (const char* part : {"Node", "AtStep", "AfterSeconds"})
      if (key == std::string(kInjectPrefix) + k.name + part) return true;
  return false;
}

Status CheckKeys(const Keys& keys) {
  for (const TagMap* map : keys.maps) {
    for (const auto& [key, value] : *map) {
      if (key.rfind(kInjectPrefix, 0) != 0 || Known(key)) continue;
      return Status::InvalidArgument(
          key +
          " is not a fault lote can inject: use lote:inject{Kill,Preempt,Stop,Slow}{Node,AtStep,"
          "AfterSeconds}, lote:injectSlowPercent, lote:injectUploadFail{Seconds,AtStep} or "
          "lote:injectCapacityShortageSeconds (docs/faults.md)");
    }
  }
  return Status::Ok();
}

Result<std::optional<FaultPlan>> ParseKind(const Keys& keys, const Kind& kind) {
  const std::string base = std::string(kInjectPrefix) + kind.name;
  const std::optional<std::string> node = Lookup(keys, base + "Node");
  const std::optional<std::string> step = Lookup(keys, base + "AtStep");
  const std::optional<std::string> after = Lookup(keys, base + "AfterSeconds");
  const bool slow = kind.action == exec::FaultAction::kSlow;
  const std::optional<std::string> percent =
      slow ? Lookup(keys, kSlowPercent) : std::optional<std::string>();
  if (!node && !step && !after) {
    if (percent)
      return Status::InvalidArgument(std::string(kSlowPercent) + " needs " + base + "AtStep or " +
                                     base + "AfterSeconds (when the node is slowed)");
    return std::optional<FaultPlan>();
  }
  if (step.has_value() == after.has_value())
    return Status::InvalidArgument("give exactly one of " + base + "AtStep and " + base +
                                   "AfterSeconds (when node " + (node ? *node : "0") +
                                   " is to be " +
                                   (kind.action == exec::FaultAction::kKill      ? "killed"
                                    : kind.action == exec::FaultAction::kPreempt ? "preempted"
                                    : slow                                       ? "slowed"
                                                                                 : "stopped") +
                                   ")");
  FaultPlan plan;
  plan.action = kind.action;
  plan.environment = keys.environment;
  if (slow) {
    plan.slow_percent = kDefaultSlowPercent;
    if (percent) {
      ASSIGN_OR_RETURN(plan.slow_percent,
                       WholeNumber(kSlowPercent, *percent, 1, 99,
                                   "the share of its CPU time the slowed node keeps, in percent"));
    }
  }
  if (node) {
    ASSIGN_OR_RETURN(int64_t n, WholeNumber(base + "Node", *node, 0, keys.num_nodes - 1,
                                            keys.environment.empty()
                                                ? "the node index; the job has " +
                                                      std::to_string(keys.num_nodes) + " node(s)"
                                                : std::string("the node index")));
    plan.node = static_cast<int32_t>(n);
  }
  if (step) {
    ASSIGN_OR_RETURN(plan.at_step, WholeNumber(base + "AtStep", *step, 1, kMaxStep,
                                               "the training step, from LOTE_PROGRESS lines"));
  } else {
    ASSIGN_OR_RETURN(plan.after_seconds,
                     WholeNumber(base + "AfterSeconds", *after, 0, kMaxAfterSeconds,
                                 "seconds after the node's command started"));
  }
  return std::optional<FaultPlan>(plan);
}

// lote:injectUploadFailSeconds (+ lote:injectUploadFailAtStep, default 1).
Result<std::optional<FaultPlan>> ParseUploadFail(const Keys& keys) {
  const std::optional<std::string> secs = Lookup(keys, kUploadFailSeconds);
  const std::optional<std::string> step = Lookup(keys, kUploadFailAtStep);
  if (!secs && !step) return std::optional<FaultPlan>();
  if (!secs)
    return Status::InvalidArgument(std::string(kUploadFailAtStep) + " needs " + kUploadFailSeconds +
                                   " (how long checkpoint writes fail)");
  FaultPlan plan;
  plan.action = exec::FaultAction::kUploadFail;
  plan.environment = keys.environment;
  ASSIGN_OR_RETURN(plan.upload_fail_seconds,
                   WholeNumber(kUploadFailSeconds, *secs, 1, kMaxUploadFailSeconds,
                               "seconds during which checkpoint writes fail"));
  plan.at_step = 1;
  if (step) {
    ASSIGN_OR_RETURN(plan.at_step, WholeNumber(kUploadFailAtStep, *step, 1, kMaxStep,
                                               "the training step where the failures begin"));
  }
  return std::optional<FaultPlan>(plan);
}

// A job without any lote:inject key (nearly every job) costs one look at the
// keys' ordered range.
bool HasInjectKeys(const Keys& keys) {
  for (const TagMap* map : keys.maps) {
    auto it = map->lower_bound(kInjectPrefix);
    if (it != map->end() && it->first.rfind(kInjectPrefix, 0) == 0) return true;
  }
  return false;
}

Result<std::optional<FaultPlan>> ParsePlan(const Keys& keys) {
  if (!HasInjectKeys(keys)) return std::optional<FaultPlan>();
  RETURN_IF_ERROR(CheckKeys(keys));
  ASSIGN_OR_RETURN(std::optional<FaultPlan> found, ParseUploadFail(keys));
  for (const Kind& kind : kKinds) {
    ASSIGN_OR_RETURN(std::optional<FaultPlan> plan, ParseKind(keys, kind));
    if (!plan) continue;
    if (found)
      return Status::InvalidArgument(
          std::string(keys.environment.empty() ? "a job"
                                               : "compute environment " + keys.environment) +
          " may ask for one injected fault; it asks to " + DescribeFaultPlan(*found) + " and to " +
          DescribeFaultPlan(*plan));
    found = plan;
  }
  return found;
}

// Whether attempt `attempt` is the job's first on environment `ce`.
bool FirstAttemptOn(const Job& job, const std::string& ce, int32_t attempt) {
  for (int32_t a = 1; a < attempt && a <= static_cast<int32_t>(job.attempts.size()); ++a)
    if (job.attempts[static_cast<size_t>(a - 1)].compute_environment == ce) return false;
  return true;
}

}  // namespace

Result<std::optional<FaultPlan>> ParseFaultPlan(const Job& job) { return ParsePlan(KeysOf(job)); }

Result<std::optional<FaultPlan>> ParseEnvironmentFaultPlan(const std::string& environment,
                                                           const TagMap& tags) {
  return ParsePlan(Keys{{&tags}, kMaxEnvironmentNodes, environment});
}

Status ValidateEnvironmentFaultTags(const std::string& environment, const TagMap& tags) {
  RETURN_IF_ERROR(ParseEnvironmentFaultPlan(environment, tags).status());
  return ValidateInjectedShortageTag(tags);
}

Status ValidateResourceFaultTags(const std::string& arn, const TagMap& tags) {
  Result<Arn> parsed = Arn::Parse(arn);
  if (!parsed.ok() || parsed->ResourceType() != "compute-environment") return Status();
  return ValidateEnvironmentFaultTags(parsed->ResourceName(), tags);
}

std::string FaultOrigin(const Job& job, int32_t attempt) {
  if (attempt < 1 || attempt > static_cast<int32_t>(job.attempts.size())) return "";
  Result<std::optional<FaultPlan>> own = ParseFaultPlan(job);
  if (!own.ok() || own->has_value()) return "";  // the job's own keys win
  const Attempt& a = job.attempts[static_cast<size_t>(attempt - 1)];
  if (!a.backend.is_object() || !FirstAttemptOn(job, a.compute_environment, attempt)) return "";
  TagMap tags;
  const Json recorded = a.backend.value("tags", Json::object());
  for (const auto& [k, v] : recorded.items())
    if (v.is_string()) tags[k] = v.get<std::string>();
  Result<std::optional<FaultPlan>> env = ParseEnvironmentFaultPlan(a.compute_environment, tags);
  if (!env.ok() || !env->has_value()) return "";
  return " (asked by the tags of compute environment " + a.compute_environment + ")";
}

std::string DescribeFaultPlan(const FaultPlan& plan) {
  const std::string origin =
      plan.environment.empty() ? ""
                               : " (from the tags of compute environment " + plan.environment + ")";
  if (plan.action == exec::FaultAction::kUploadFail)
    return "fail checkpoint writes for " + std::to_string(plan.upload_fail_seconds) +
           " s from step " + std::to_string(plan.at_step) + origin;
  const std::string when = plan.at_step > 0 ? "at step " + std::to_string(plan.at_step)
                                            : "after " + std::to_string(plan.after_seconds) + " s";
  const std::string to = plan.action == exec::FaultAction::kSlow
                             ? " to " + std::to_string(plan.slow_percent) + "% CPU"
                             : "";
  return exec::FaultActionName(plan.action) + " node " + std::to_string(plan.node) + to + " " +
         when + origin;
}

exec::NodeFault NodeFaultOf(const FaultPlan& plan, const Job& job) {
  exec::NodeFault fault;
  fault.action = plan.action;
  if (plan.action == exec::FaultAction::kUploadFail) {
    fault.upload_fail_ms = plan.upload_fail_seconds * 1000;
    fault.upload_from_step = plan.at_step;
    return fault;
  }
  fault.at_step = plan.at_step;
  fault.after_ms = plan.after_seconds >= 0 ? plan.after_seconds * 1000 : -1;
  fault.grace_ms = TerminationGraceSeconds(job).value_or(30) * 1000;
  fault.slow_percent = plan.slow_percent;
  return fault;
}

exec::NodeFault NodeFaultFor(const Job& job, const ComputeEnvironmentSpec& ce, int32_t attempt,
                             int32_t node_index) {
  Result<std::optional<FaultPlan>> own = ParseFaultPlan(job);
  std::optional<FaultPlan> plan;
  if (own.ok() && own->has_value()) {
    if (attempt == 1) plan = **own;  // the job's own plan wins, in its first attempt
  } else if (FirstAttemptOn(job, ce.name, attempt)) {
    Result<std::optional<FaultPlan>> env = ParseEnvironmentFaultPlan(ce.name, ce.lote_tags);
    if (env.ok() && env->has_value() && (*env)->node < job.NumNodes()) plan = **env;
  }
  if (!plan) return exec::NodeFault{};
  // An upload failure is the store's: every node's checkpoint writes fail.
  if (plan->action != exec::FaultAction::kUploadFail && plan->node != node_index)
    return exec::NodeFault{};
  return NodeFaultOf(*plan, job);
}

Result<FaultPlan> FaultPlanFromRequest(const Json& request, int32_t num_nodes) {
  FaultPlan plan;
  const Json action = request.value("action", Json());
  for (const Kind& k : kKinds)
    if (action.is_string() && action.get<std::string>() == exec::FaultActionName(k.action))
      plan.action = k.action;
  if (plan.action == exec::FaultAction::kNone)
    return Status::InvalidArgument("InjectFault: action must be one of kill, preempt, stop, slow");
  auto whole = [&](const char* key, int64_t min, int64_t max) -> Result<std::optional<int64_t>> {
    const Json v = request.value(key, Json());
    if (v.is_null()) return std::optional<int64_t>();
    if (!v.is_number_integer() || v.get<int64_t>() < min || v.get<int64_t>() > max)
      return Status::InvalidArgument("InjectFault: " + std::string(key) +
                                     " must be a whole number from " + std::to_string(min) +
                                     " to " + std::to_string(max));
    return std::optional<int64_t>(v.get<int64_t>());
  };
  ASSIGN_OR_RETURN(std::optional<int64_t> node, whole("nodeIndex", 0, num_nodes - 1));
  ASSIGN_OR_RETURN(std::optional<int64_t> step, whole("atStep", 1, kMaxStep));
  ASSIGN_OR_RETURN(std::optional<int64_t> after, whole("afterSeconds", 0, kMaxAfterSeconds));
  ASSIGN_OR_RETURN(std::optional<int64_t> percent, whole("cpuPercent", 1, 99));
  if (percent && plan.action != exec::FaultAction::kSlow)
    return Status::InvalidArgument("InjectFault: cpuPercent is for action slow only");
  if (plan.action == exec::FaultAction::kSlow)
    plan.slow_percent = percent.value_or(kDefaultSlowPercent);
  if (step.has_value() == after.has_value())
    return Status::InvalidArgument("InjectFault: give exactly one of atStep and afterSeconds");
  plan.node = static_cast<int32_t>(node.value_or(0));
  if (step) plan.at_step = *step;
  if (after) plan.after_seconds = *after;
  return plan;
}

}  // namespace lote::control
