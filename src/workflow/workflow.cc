#include "workflow/workflow.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "common/crypto.h"
#include "common/files.h"

namespace lote::workflow {
namespace fs = std::filesystem;
using cli::BatchClient;

namespace {

constexpr const char* kTemplateShaTag = "lote:templateSha256";
constexpr const char* kSubmitDefinition = "lote-submit";
constexpr const char* kSubmitMultinodeDefinition = "lote-submit-multinode";

void Sleep(const WaitOptions& w, int64_t ms) {
  if (w.sleep) {
    w.sleep(ms);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
}

// The resource names, from the rendered files (what was created) or the config.
struct Names {
  std::string ce, queue, definition;
};

Names ResourceNames(const RecipeConfig& config) {
  Names n;
  n.ce = config.GetOr("CE_NAME", "");
  n.queue = config.GetOr("JQ_NAME", "");
  n.definition = config.GetOr("JD_NAME", "");
  if (auto ce = ReadRendered(config, "compute_env.json"); ce.ok()) {
    n.ce = ce->value("computeEnvironmentName", n.ce);
  }
  if (auto q = ReadRendered(config, "job_queue.json"); q.ok()) {
    n.queue = q->value("jobQueueName", n.queue);
  }
  if (auto d = ReadRendered(config, "job_def.json"); d.ok()) {
    n.definition = d->value("jobDefinitionName", n.definition);
  }
  return n;
}

// Polls `describe` until `done` holds for its answer (nullopt: the resource is
// gone). FailedPrecondition when it becomes INVALID, DeadlineExceeded after the timeout.
Status WaitFor(const std::string& what,
               const std::function<Result<std::optional<Json>>()>& describe,
               const std::function<bool(const std::optional<Json>&)>& done, const WaitOptions& w) {
  const auto start = std::chrono::steady_clock::now();
  std::string last = "?";
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<Json> r, describe());
    if (done(r)) return Status::Ok();
    if (r) {
      last = r->value("state", "") + "/" + r->value("status", "");
      if (r->value("status", "") == "INVALID") {
        return Status::FailedPrecondition(
            what + " is INVALID: " + r->value("statusReason", "(no reason given)"));
      }
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::steady_clock::now() - start)
                            .count();
    if (waited > w.timeout_ms) {
      return Status::DeadlineExceeded(what + " did not get there in " +
                                      std::to_string(w.timeout_ms / 1000) + " s (now " + last +
                                      ")");
    }
    Sleep(w, w.poll_ms);
  }
}

bool IsValidIn(const std::optional<Json>& r, const std::string& state) {
  return r && r->value("status", "") == "VALID" && r->value("state", "") == state;
}

Status EnsureComputeEnvironment(BatchClient* c, const RecipeConfig& config, const Print& print,
                                const WaitOptions& w) {
  ASSIGN_OR_RETURN(Json request, ReadRendered(config, "compute_env.json"));
  const std::string name = request.value("computeEnvironmentName", "");
  ASSIGN_OR_RETURN(std::optional<Json> existing, c->DescribeComputeEnvironment(name));
  if (existing && existing->value("status", "") == "DELETING") {
    print("compute environment " + name + " is being deleted: waiting for it to go");
    RETURN_IF_ERROR(WaitFor(
        "compute environment " + name, [&] { return c->DescribeComputeEnvironment(name); },
        [](const std::optional<Json>& r) { return !r.has_value(); }, w));
    existing.reset();
  }
  if (!existing) {
    ASSIGN_OR_RETURN(Json created, c->CreateComputeEnvironment(request));
    print("created compute environment " + name + " (" +
          created.value("computeEnvironmentArn", "") + ")");
  } else if (existing->value("state", "") == "DISABLED") {
    RETURN_IF_ERROR(
        c->UpdateComputeEnvironment({{"computeEnvironment", name}, {"state", "ENABLED"}}));
    print("compute environment " + name + " existed DISABLED: enabled it");
  } else {
    print("compute environment " + name + " exists: kept");
  }
  RETURN_IF_ERROR(WaitFor(
      "compute environment " + name, [&] { return c->DescribeComputeEnvironment(name); },
      [](const std::optional<Json>& r) { return IsValidIn(r, "ENABLED"); }, w));
  print("compute environment " + name + " is VALID");
  return Status::Ok();
}

Status EnsureJobDefinition(BatchClient* c, const RecipeConfig& config, const Print& print) {
  ASSIGN_OR_RETURN(Json request, ReadRendered(config, "job_def.json"));
  const std::string name = request.value("jobDefinitionName", "");
  const std::string sha = Sha256Hex(request.dump());
  ASSIGN_OR_RETURN(std::vector<Json> active,
                   c->DescribeJobDefinitions({{"jobDefinitionName", name}, {"status", "ACTIVE"}}));
  for (const Json& d : active) {
    const Json tags = d.value("tags", Json::object());
    if (tags.is_object() && tags.value(kTemplateShaTag, "") == sha) {
      print("job definition " + name + ":" + std::to_string(d.value("revision", 0)) +
            " matches build/job_def.json: kept");
      return Status::Ok();
    }
  }
  if (!request.contains("tags") || !request["tags"].is_object()) request["tags"] = Json::object();
  request["tags"][kTemplateShaTag] = sha;
  ASSIGN_OR_RETURN(Json registered, c->RegisterJobDefinition(request));
  print("registered job definition " + name + ":" +
        std::to_string(registered.value("revision", 0)));
  return Status::Ok();
}

Status EnsureJobQueue(BatchClient* c, const RecipeConfig& config, const Print& print,
                      const WaitOptions& w) {
  ASSIGN_OR_RETURN(Json request, ReadRendered(config, "job_queue.json"));
  const std::string name = request.value("jobQueueName", "");
  ASSIGN_OR_RETURN(std::optional<Json> existing, c->DescribeJobQueue(name));
  if (existing && existing->value("status", "") == "DELETING") {
    print("job queue " + name + " is being deleted: waiting for it to go");
    RETURN_IF_ERROR(WaitFor(
        "job queue " + name, [&] { return c->DescribeJobQueue(name); },
        [](const std::optional<Json>& r) { return !r.has_value(); }, w));
    existing.reset();
  }
  if (!existing) {
    ASSIGN_OR_RETURN(Json created, c->CreateJobQueue(request));
    print("created job queue " + name + " (" + created.value("jobQueueArn", "") + ")");
  } else if (existing->value("state", "") == "DISABLED") {
    RETURN_IF_ERROR(c->UpdateJobQueue({{"jobQueue", name}, {"state", "ENABLED"}}));
    print("job queue " + name + " existed DISABLED: enabled it");
  } else {
    print("job queue " + name + " exists: kept");
  }
  RETURN_IF_ERROR(WaitFor(
      "job queue " + name, [&] { return c->DescribeJobQueue(name); },
      [](const std::optional<Json>& r) { return IsValidIn(r, "ENABLED"); }, w));
  print("job queue " + name + " is VALID");
  return Status::Ok();
}

// Disable → wait → delete → wait gone, for a queue or a compute environment.
Status DisableAndDelete(const std::string& what, const std::string& name,
                        const std::function<Result<std::optional<Json>>()>& describe,
                        const std::function<Status()>& disable,
                        const std::function<Status()>& remove, const Print& print,
                        const WaitOptions& w) {
  ASSIGN_OR_RETURN(std::optional<Json> existing, describe());
  if (!existing) {
    print(what + " " + name + ": none (nothing to delete)");
    return Status::Ok();
  }
  if (existing->value("status", "") != "DELETING") {
    if (existing->value("state", "") != "DISABLED") {
      RETURN_IF_ERROR(disable());
      print("disabled " + what + " " + name);
    }
    RETURN_IF_ERROR(WaitFor(
        what + " " + name, describe,
        [](const std::optional<Json>& r) { return !r || IsValidIn(r, "DISABLED"); }, w));
    RETURN_IF_ERROR(remove());
  }
  RETURN_IF_ERROR(WaitFor(
      what + " " + name, describe, [](const std::optional<Json>& r) { return !r.has_value(); }, w));
  print("deleted " + what + " " + name);
  return Status::Ok();
}

// An EC2 resource a compute environment names, rendered to build/<file>.
struct Ec2Kind {
  const char* file;
  const char* what;
  const char* name_key;
  Status (BatchClient::*create)(const Json&);
  Result<bool> (BatchClient::*exists)(const std::string&);
  Status (BatchClient::*remove)(const std::string&);
};
constexpr Ec2Kind kPlacementGroup{"placement_group.json",
                                  "placement group",
                                  "GroupName",
                                  &BatchClient::CreatePlacementGroup,
                                  &BatchClient::PlacementGroupExists,
                                  &BatchClient::DeletePlacementGroup};
constexpr Ec2Kind kLaunchTemplate{"launch_template.json",
                                  "launch template",
                                  "LaunchTemplateName",
                                  &BatchClient::CreateLaunchTemplate,
                                  &BatchClient::LaunchTemplateExists,
                                  &BatchClient::DeleteLaunchTemplate};

// build/<file>'s request and the name it gives (nullopt: no such file).
using RenderedRequest = std::optional<std::pair<Json, std::string>>;
Result<RenderedRequest> RenderedEc2(const RecipeConfig& config, const Ec2Kind& kind) {
  std::error_code ec;
  if (!fs::exists(BuildDir(config) + "/" + kind.file, ec)) return RenderedRequest();
  ASSIGN_OR_RETURN(Json request, ReadRendered(config, kind.file));
  const std::string name = request.value(kind.name_key, "");
  if (name.empty())
    return Status::InvalidArgument(std::string("build/") + kind.file + " names no " +
                                   kind.name_key);
  return RenderedRequest(std::make_pair(std::move(request), name));
}

// Creates the EC2 resource build/<file> describes unless one of its name exists.
Status EnsureEc2(BatchClient* c, const RecipeConfig& config, const Ec2Kind& kind,
                 const Print& print) {
  ASSIGN_OR_RETURN(auto rendered, RenderedEc2(config, kind));
  if (!rendered) return Status::Ok();
  const auto& [request, name] = *rendered;
  ASSIGN_OR_RETURN(bool exists, (c->*kind.exists)(name));
  if (exists) {
    print(std::string(kind.what) + " " + name + ": exists, kept");
    return Status::Ok();
  }
  RETURN_IF_ERROR((c->*kind.create)(request));
  print(std::string("created ") + kind.what + " " + name + " (build/" + kind.file + ")");
  return Status::Ok();
}

// Deletes the EC2 resource build/<file> names, when it exists.
Status DeleteEc2(BatchClient* c, const RecipeConfig& config, const Ec2Kind& kind,
                 const Print& print) {
  ASSIGN_OR_RETURN(auto rendered, RenderedEc2(config, kind));
  if (!rendered) return Status::Ok();
  const std::string& name = rendered->second;
  ASSIGN_OR_RETURN(bool exists, (c->*kind.exists)(name));
  if (!exists) {
    print(std::string(kind.what) + " " + name + ": not there");
    return Status::Ok();
  }
  RETURN_IF_ERROR((c->*kind.remove)(name));
  print(std::string("deleted ") + kind.what + " " + name);
  return Status::Ok();
}

// The name of a resource in an ARN or a name.
std::string ShortName(const std::string& arn_or_name) {
  size_t slash = arn_or_name.rfind('/');
  return slash == std::string::npos ? arn_or_name : arn_or_name.substr(slash + 1);
}

// The generic form's job definition (registered once, revision 1 reused).
Result<std::string> EnsureSubmitDefinition(BatchClient* c, bool multinode, const Print& print) {
  const std::string name = multinode ? kSubmitMultinodeDefinition : kSubmitDefinition;
  ASSIGN_OR_RETURN(std::vector<Json> active,
                   c->DescribeJobDefinitions({{"jobDefinitionName", name}, {"status", "ACTIVE"}}));
  if (!active.empty()) return name;
  const Json container = {
      {"image", "lote/command"},
      {"command", Json::array({"true"})},
      {"resourceRequirements", Json::array({Json{{"type", "VCPU"}, {"value", "1"}},
                                            Json{{"type", "MEMORY"}, {"value", "512"}}})}};
  Json request = {{"jobDefinitionName", name}};
  if (multinode) {
    request["type"] = "multinode";
    request["nodeProperties"] = {
        {"numNodes", 2},
        {"mainNode", 0},
        {"nodeRangeProperties",
         Json::array({Json{{"targetNodes", "0:"}, {"container", container}}})}};
  } else {
    request["type"] = "container";
    request["containerProperties"] = container;
  }
  ASSIGN_OR_RETURN(Json registered, c->RegisterJobDefinition(request));
  print("registered job definition " + name + ":" +
        std::to_string(registered.value("revision", 0)) + " for `lote submit -- COMMAND`");
  return name;
}

}  // namespace

std::string TemplatesDir(const RecipeConfig& config) { return config.dir() + "/templates"; }
std::string BuildDir(const RecipeConfig& config) { return config.dir() + "/build"; }

Result<std::vector<std::string>> Setup(const RecipeConfig& config, const Print& print) {
  const std::string from = TemplatesDir(config), to = BuildDir(config);
  std::error_code ec;
  if (!fs::is_directory(from, ec)) {
    return Status::NotFound("no templates folder " + from + " beside " + config.path());
  }
  std::vector<fs::path> templates;
  for (const auto& e : fs::directory_iterator(from, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") templates.push_back(e.path());
  }
  if (ec) return Status::Internal("cannot list " + from + ": " + ec.message());
  std::sort(templates.begin(), templates.end());
  if (templates.empty()) return Status::NotFound("no *.json templates in " + from);
  // Render everything first: nothing is written when one template is wrong.
  std::vector<std::pair<std::string, std::string>> out;
  for (const fs::path& t : templates) {
    ASSIGN_OR_RETURN(std::string text, ReadFile(t.string()));
    const std::string label = "templates/" + t.filename().string();
    ASSIGN_OR_RETURN(std::string rendered, RenderTemplate(text, label, config));
    Result<Json> parsed = ParseJson(rendered);
    if (!parsed.ok()) {
      return Status::InvalidArgument(label +
                                     " is not JSON once rendered: " + parsed.status().message());
    }
    out.emplace_back(t.filename().string(), rendered);
  }
  RETURN_IF_ERROR(MakeDirs(to));
  std::vector<std::string> written;
  for (const auto& [name, text] : out) {
    const std::string path = to + "/" + name;
    RETURN_IF_ERROR(WriteFileAtomic(path, text));
    print("rendered templates/" + name + " -> build/" + name);
    written.push_back(path);
  }
  std::string env = "# The config lote setup used (" + config.path() + "), expanded.\n";
  for (const auto& [k, v] : config.entries()) env += k + "=" + ShellQuote(v) + "\n";
  RETURN_IF_ERROR(WriteFileAtomic(to + "/config.env", env));
  written.push_back(to + "/config.env");
  print("wrote build/config.env (the expanded config, for scripts: source build/config.env)");
  return written;
}

Result<Json> ReadRendered(const RecipeConfig& config, const std::string& name) {
  const std::string path = BuildDir(config) + "/" + name;
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return Status::FailedPrecondition("no " + path + ": run `lote setup` first");
  }
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  Result<Json> j = ParseJson(text);
  if (!j.ok()) return Status::InvalidArgument(path + ": " + j.status().message());
  return j;
}

Status CreateResources(BatchClient* client, const RecipeConfig& config, const Print& print,
                       const WaitOptions& wait) {
  // The compute environment names them, so they come first.
  RETURN_IF_ERROR(EnsureEc2(client, config, kPlacementGroup, print));
  RETURN_IF_ERROR(EnsureEc2(client, config, kLaunchTemplate, print));
  RETURN_IF_ERROR(EnsureComputeEnvironment(client, config, print, wait));
  RETURN_IF_ERROR(EnsureJobDefinition(client, config, print));
  return EnsureJobQueue(client, config, print, wait);
}

Status CleanupResources(BatchClient* client, const RecipeConfig& config, const Print& print,
                        const WaitOptions& wait) {
  const Names n = ResourceNames(config);
  if (n.queue.empty() || n.ce.empty() || n.definition.empty()) {
    return Status::InvalidArgument(config.path() +
                                   " names no CE_NAME, JQ_NAME or JD_NAME (and build/ has no "
                                   "rendered templates)");
  }
  RETURN_IF_ERROR(DisableAndDelete(
      "job queue", n.queue, [&] { return client->DescribeJobQueue(n.queue); },
      [&] {
        return client->UpdateJobQueue({{"jobQueue", n.queue}, {"state", "DISABLED"}});
      },
      [&] { return client->DeleteJobQueue(n.queue); }, print, wait));
  RETURN_IF_ERROR(DisableAndDelete(
      "compute environment", n.ce, [&] { return client->DescribeComputeEnvironment(n.ce); },
      [&] {
        return client->UpdateComputeEnvironment(
            {{"computeEnvironment", n.ce}, {"state", "DISABLED"}});
      },
      [&] { return client->DeleteComputeEnvironment(n.ce); }, print, wait));
  RETURN_IF_ERROR(DeleteEc2(client, config, kLaunchTemplate, print));
  RETURN_IF_ERROR(DeleteEc2(client, config, kPlacementGroup, print));
  ASSIGN_OR_RETURN(
      std::vector<Json> active,
      client->DescribeJobDefinitions({{"jobDefinitionName", n.definition}, {"status", "ACTIVE"}}));
  if (active.empty()) print("job definition " + n.definition + ": no ACTIVE revision");
  for (const Json& d : active) {
    const std::string rev = n.definition + ":" + std::to_string(d.value("revision", 0));
    RETURN_IF_ERROR(client->DeregisterJobDefinition(rev));
    print("deregistered job definition " + rev);
  }
  return Status::Ok();
}

Result<std::vector<SubmittedJob>> SubmitRecipeJob(BatchClient* client, const RecipeConfig& config,
                                                  const RecipeSubmit& submit, const Print& print) {
  ASSIGN_OR_RETURN(Json definition, ReadRendered(config, "job_def.json"));
  ASSIGN_OR_RETURN(Json queue, ReadRendered(config, "job_queue.json"));
  const std::string definition_name = definition.value("jobDefinitionName", "");
  const std::string queue_name = queue.value("jobQueueName", "");
  const std::string name =
      submit.name.empty() ? config.GetOr("JOB_NAME", definition_name) : submit.name;
  ASSIGN_OR_RETURN(bool precompile, config.GetBool("DO_PRE_COMPILATION", false));
  Json parameters = Json::object();
  if (submit.max_steps) parameters["max_steps"] = std::to_string(*submit.max_steps);
  if (!submit.resume_from.empty()) {
    std::string from = submit.resume_from;
    if (from.find('/') == std::string::npos) {  // a job id: its folder of checkpoints
      ASSIGN_OR_RETURN(std::string base, config.Require("CHECKPOINT_SAVE_URI"));
      while (!base.empty() && base.back() == '/') base.pop_back();
      from = base + "/" + from;
    }
    parameters["resume"] = from;
  }
  auto request_for = [&](const std::string& job_name, const Json& params) {
    Json r = {{"jobName", job_name}, {"jobQueue", queue_name}, {"jobDefinition", definition_name}};
    if (!params.empty()) r["parameters"] = params;
    if (submit.num_nodes) r["nodeOverrides"] = {{"numNodes", *submit.num_nodes}};
    return r;
  };
  std::vector<SubmittedJob> out;
  if (precompile) {
    Json params = parameters;
    params["precompile"] = "true";
    params["max_steps"] = "2";
    params["resume"] = "none";
    ASSIGN_OR_RETURN(Json r, client->SubmitJob(request_for(name + "-precompile", params)));
    out.push_back({r.value("jobId", ""), r.value("jobName", "")});
    print("DO_PRE_COMPILATION=true: submitted the 2-step precompile job " + out.back().name + ": " +
          out.back().job_id);
  }
  Json main = request_for(name, parameters);
  if (!out.empty()) main["dependsOn"] = Json::array({Json{{"jobId", out.front().job_id}}});
  ASSIGN_OR_RETURN(Json r, client->SubmitJob(main));
  out.push_back({r.value("jobId", ""), r.value("jobName", "")});
  const int32_t nodes = submit.num_nodes.value_or(
      definition.value("nodeProperties", Json::object()).value("numNodes", 1));
  print("submitted " + out.back().name + " (" + std::to_string(nodes) + " node" +
        (nodes == 1 ? "" : "s") + ", queue " + queue_name + "): " + out.back().job_id +
        (precompile ? " (runs once the precompile job succeeds)" : ""));
  return out;
}

Result<SubmittedJob> SubmitCommand(BatchClient* client, const CommandSubmit& submit,
                                   const Print& print) {
  if (submit.command.empty()) {
    return Status::InvalidArgument("no command: lote submit --queue Q [options] -- COMMAND [ARGS]");
  }
  if (submit.queue.empty()) return Status::InvalidArgument("--queue is required with a COMMAND");
  if (submit.nodes < 1) return Status::InvalidArgument("--nodes must be at least 1");
  const bool multinode = submit.nodes > 1;
  ASSIGN_OR_RETURN(std::string definition, EnsureSubmitDefinition(client, multinode, print));
  Json overrides = {{"command", submit.command}};
  Json resources = Json::array();
  if (submit.vcpus)
    resources.push_back({{"type", "VCPU"}, {"value", std::to_string(*submit.vcpus)}});
  if (submit.memory_mib) {
    resources.push_back({{"type", "MEMORY"}, {"value", std::to_string(*submit.memory_mib)}});
  }
  if (!resources.empty()) overrides["resourceRequirements"] = resources;
  if (!submit.environment.empty()) {
    Json env = Json::array();
    for (const std::string& kv : submit.environment) {
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        return Status::InvalidArgument("--env " + kv + ": expected NAME=VALUE");
      }
      env.push_back({{"name", kv.substr(0, eq)}, {"value", kv.substr(eq + 1)}});
    }
    overrides["environment"] = env;
  }
  std::string name = submit.name;
  if (name.empty()) {
    name = ShortName(submit.command.front());
    for (char& ch : name) {
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_') ch = '_';
    }
    if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) name = "job" + name;
    if (name.size() > 128) name.resize(128);
  }
  Json request = {{"jobName", name}, {"jobQueue", submit.queue}, {"jobDefinition", definition}};
  if (multinode) {
    request["nodeOverrides"] = {
        {"numNodes", submit.nodes},
        {"nodePropertyOverrides",
         Json::array({Json{{"targetNodes", "0:"}, {"containerOverrides", overrides}}})}};
  } else {
    request["containerOverrides"] = overrides;
  }
  if (submit.attempts) request["retryStrategy"] = {{"attempts", *submit.attempts}};
  if (submit.timeout_s) request["timeout"] = {{"attemptDurationSeconds", *submit.timeout_s}};
  if (!submit.depends_on.empty()) {
    Json deps = Json::array();
    for (const std::string& id : submit.depends_on) deps.push_back({{"jobId", id}});
    request["dependsOn"] = deps;
  }
  ASSIGN_OR_RETURN(Json r, client->SubmitJob(request));
  SubmittedJob job{r.value("jobId", ""), r.value("jobName", "")};
  print("submitted " + job.name + " (" + std::to_string(submit.nodes) + " node" +
        (submit.nodes == 1 ? "" : "s") + ", queue " + submit.queue + "): " + job.job_id);
  return job;
}

}  // namespace lote::workflow
