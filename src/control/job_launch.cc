// The job loop's hand-over to the backends: each placed attempt's gang built
// (node specs, secrets, container runs) and launched, several at once; the
// outcomes recorded; attempts torn down; node outcomes as failure categories.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <utility>

#include "common/thread_name.h"
#include "control/fault_plan.h"
#include "control/job_env.h"
#include "control/job_loop.h"
#include "exec/container.h"

namespace lote::control {
namespace {

// Gangs handed to their backends at once by one pass.
constexpr size_t kParallelLaunches = 8;

// Attempt::backend: what picks the backend of a compute environment.
Json BackendRecord(const ComputeEnvironmentSpec& ce) {
  Json tags = Json::object();
  for (const auto& [k, v] : ce.lote_tags) tags[k] = v;
  return Json{{"managed", ce.managed}, {"tags", tags}};
}

// Whether the environment's nodes run in their images: its tag lote:runtime,
// else the server's default. InvalidArgument for another value.
Result<bool> InContainerMode(const ComputeEnvironmentSpec& ce, const std::string& fallback) {
  auto tag = ce.lote_tags.find("lote:runtime");
  const std::string runtime = tag == ce.lote_tags.end() ? fallback : tag->second;
  if (runtime == "container") return true;
  if (runtime == "process" || runtime.empty()) return false;
  return Status::InvalidArgument("compute environment " + ce.name + ": lote:runtime is '" +
                                 runtime + "'; use container or process");
}

// Gives a node the host devices the scheduler assigned it (docs/jobs.md,
// "Accelerators"): the environment every runtime gets, and in a container the
// devices themselves (by CDI name when the host has a spec for them, else
// their nodes and the vendor's control nodes). The recipe's /dev/neuronN
// entries of linuxParameters.devices are mapped in order onto the assigned
// devices (their container paths kept). InvalidArgument when a position is
// not in the inventory any more.
Status GiveHostDevices(const HostDevicesView& view, const std::vector<int32_t>& positions,
                       bool in_container, exec::NodeSpec* spec) {
  ASSIGN_OR_RETURN(std::vector<exec::Accelerator> given,
                   exec::DevicesForPositions(view.devices, positions));
  for (auto& [k, v] : exec::AcceleratorEnvironment(given, view.devices, in_container))
    spec->environment[k] = v;
  if (!in_container) {
    // A process could open any device node: the others are fenced off.
    std::set<std::string> own;
    for (const exec::Accelerator& a : given) own.insert(a.path);
    std::set<std::string> fenced;
    for (const exec::Accelerator* a : view.devices)
      if (!own.count(a->path)) fenced.insert(a->path);
    spec->fenced_devices.assign(fenced.begin(), fenced.end());
  }
  if (!in_container || !spec->container) return Status::Ok();
  exec::ContainerRun& c = *spec->container;
  // The job's own /dev/neuronN entries give their container paths, in order.
  std::vector<std::string> listed;
  std::vector<exec::ContainerDevice> kept;
  for (exec::ContainerDevice& d : c.devices) {
    if (NeuronDeviceIndex(d.host_path) >= 0) {
      listed.push_back(d.container_path.empty() ? d.host_path : d.container_path);
    } else {
      kept.push_back(std::move(d));
    }
  }
  c.devices = std::move(kept);
  bool nodes = false;
  for (size_t i = 0; i < given.size(); ++i) {
    const exec::Accelerator& a = given[i];
    if (!a.cdi.empty()) {
      c.cdi_devices.push_back(a.cdi);
      continue;
    }
    const std::string inside = i < listed.size() ? listed[i] : a.path;
    c.devices.push_back(exec::ContainerDevice{a.path, inside, "rwm"});
    nodes = true;
  }
  if (nodes) {
    for (const std::string& p : exec::ControlDeviceNodes(given.front().kind))
      c.devices.push_back(exec::ContainerDevice{p, p, "rwm"});
  }
  return Status::Ok();
}

}  // namespace

void JobLoop::TerminateAttempts(const std::vector<exec::AttemptKey>& keys) {
  for (const exec::AttemptKey& key : keys) {
    Attempt attempt;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(key.job_id);
      if (it == jobs_.end() || key.attempt < 1 ||
          key.attempt > static_cast<int32_t>(it->second.attempts.size()))
        continue;
      // Open again: the change that closed it was not stored (ReconcileLocked).
      if (key.attempt == static_cast<int32_t>(it->second.attempts.size()) &&
          it->second.CurrentAttempt() != nullptr)
        continue;
      attempt = it->second.attempts[static_cast<size_t>(key.attempt - 1)];
    }
    exec::Backend* backend = BackendOf(attempt);
    if (backend == nullptr) {
      // Never silent: its nodes may still run.
      spdlog::error("jobs: cannot terminate {}/{}: no backend for compute environment {}",
                    key.job_id, key.attempt, attempt.compute_environment);
      continue;
    }
    Status s = backend->Terminate(key, GraceMs(key));
    if (!s.ok() && s.code() != StatusCode::kNotFound)
      spdlog::warn("jobs: terminate {}/{}: {}", key.job_id, key.attempt, s.ToString());
  }
}

// The node of a gang as its backend takes it. InvalidArgument when the job's
// spec cannot run there (no command, a bad container setting).
Result<exec::NodeSpec> JobLoop::MakeNodeSpec(const Job& job, const exec::AttemptKey& attempt,
                                             int32_t node_index, const ComputeEnvironmentSpec& ce,
                                             const exec::Capabilities& caps,
                                             bool in_container) const {
  ASSIGN_OR_RETURN(NodeLaunch launch, MakeNodeLaunch(job, node_index));
  RETURN_IF_ERROR(AddSecrets(*job.ContainerFor(node_index), &launch));
  exec::NodeSpec spec;
  spec.node = exec::NodeKey{attempt, node_index};
  spec.command = launch.command;
  for (const EnvVar& v : launch.environment) spec.environment[v.name] = v.value;
  if (options_.node_environment) {
    for (EnvVar& v : options_.node_environment(job, spec.environment))
      spec.environment.emplace(std::move(v.name), std::move(v.value));
  }
  spec.user = launch.user;
  if (launch.ulimits.is_array()) {
    for (const Json& u : launch.ulimits) {
      spec.ulimits.push_back(exec::Ulimit{u.value("name", ""), u.value("softLimit", int64_t{0}),
                                          u.value("hardLimit", int64_t{0})});
    }
  }
  spec.vcpu_milli = launch.milli_vcpu;
  spec.memory_mib = launch.memory_mib;
  spec.private_ip = launch.private_ipv4;
  if (in_container) {
    ASSIGN_OR_RETURN(spec.container, exec::ContainerRunFromAws(
                                         launch.image, launch.linux_parameters, launch.other));
  }
  // Accelerators: this host's devices the scheduler assigned, or a backend
  // that finds them itself (Slurm); elsewhere only an emulated environment
  // runs such a node (with virtual devices: a notice says so).
  const AcceleratorRequest wanted = job.ContainerFor(node_index)->Accelerators();
  std::shared_ptr<const HostDevicesView> view =
      options_.host_devices == nullptr ? nullptr : options_.host_devices->Current();
  bool devices_given = false;
  if (wanted.count > 0 && view != nullptr && UsesHostDevices(*view, ce)) {
    const NodeAttempt* node = job.CurrentAttempt()->Node(node_index);
    if (node == nullptr || static_cast<int32_t>(node->devices.size()) != wanted.count) {
      return Status::InvalidArgument(
          "node " + std::to_string(node_index) + " asks for " +
          exec::CountPhrase(exec::ParseKind(wanted.kind).value_or(exec::AcceleratorKind::kGpu),
                            wanted.count) +
          " but was assigned " + std::to_string(node == nullptr ? 0 : node->devices.size()));
    }
    RETURN_IF_ERROR(GiveHostDevices(*view, node->devices, in_container, &spec));
    devices_given = true;
  } else if (wanted.count > 0 && wanted.kind == "gpu" && caps.accelerators) {
    spec.accelerators = wanted.count;
  }
  for (const std::string& f : launch.fields_set) {
    // A process is given its Neuron devices through NEURON_RT_VISIBLE_CORES.
    if (devices_given && f == "linuxParameters.devices" && wanted.kind == "neuron") continue;
    if (!caps.container_fields.count(f) && !(in_container && exec::ContainerModeFields().count(f)))
      spec.unsupported_fields.push_back(f);
  }
  if (wanted.kind == "gpu" && !devices_given && !caps.accelerators)
    spec.unsupported_fields.push_back("resourceRequirements.GPU");
  spec.emulation = ce.emulation;
  spec.fault = NodeFaultFor(job, ce, attempt.attempt, node_index);
  if (spec.command.empty() && !spec.container) {
    return Status::InvalidArgument(
        launch.image.empty()
            ? "the container has no command: set command in the job definition or in "
              "containerOverrides"
            : "the job definition names the image " + launch.image +
                  " but no command, and its compute environment runs jobs as host "
                  "processes (lote:runtime=process), which cannot run an image's "
                  "ENTRYPOINT/CMD: tag the compute environment lote:runtime=container (or "
                  "start lote server --runtime container) to run the image, or set "
                  "command in the job definition or in containerOverrides");
  }
  return spec;
}

Result<exec::GangSpec> JobLoop::MakeGang(const Job& job, const ComputeEnvironmentSpec& ce,
                                         const exec::Backend& backend) const {
  const int32_t number = static_cast<int32_t>(job.attempts.size());
  exec::GangSpec gang;
  gang.attempt = exec::AttemptKey{job.id, number};
  gang.multi_node = job.IsMultiNode();
  gang.main_node_index = job.MainNode();
  if (job.timeout_seconds) gang.timeout_seconds = *job.timeout_seconds;
  gang.avoid_hosts = AvoidedHosts(job, backend);  // a retry after a node failure (quarantine.h)
  ASSIGN_OR_RETURN(const bool in_container, InContainerMode(ce, options_.default_runtime));
  for (const NodeAttempt& node : job.CurrentAttempt()->nodes) {
    ASSIGN_OR_RETURN(exec::NodeSpec spec, MakeNodeSpec(job, gang.attempt, node.node_index, ce,
                                                       backend.capabilities(), in_container));
    gang.nodes.push_back(std::move(spec));
  }
  return gang;
}

void JobLoop::LaunchPlaced(const std::vector<std::string>& job_ids) {
  std::vector<std::pair<std::string, JobEvent>> all_events;
  std::vector<std::pair<std::string, exec::NodeEvent>> known;  // what LaunchGang reported
  // 1. Each attempt's gang, built here; 2. handed to the backends, several at
  // once (a remote backend's submission is a round trip); 3. the outcomes.
  struct Handover {
    std::string id;
    int32_t number = 0;
    int64_t now = 0;
    exec::Backend* backend = nullptr;  // null: `launched` holds why not
    Json backend_record;               // Attempt::backend
    exec::GangSpec gang;
    Result<exec::GangLaunch> launched = exec::GangLaunch{};
  };
  std::vector<Handover> handovers;
  for (const std::string& id : job_ids) {
    Job job;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = jobs_.find(id);
      if (it == jobs_.end() || it->second.CurrentAttempt() == nullptr) continue;
      job = it->second;
    }
    const Attempt* attempt = job.CurrentAttempt();
    const int32_t number = static_cast<int32_t>(job.attempts.size());
    const int64_t now = clock_->NowMillis();
    Result<ComputeEnvironmentSpec> ce =
        control_->FindComputeEnvironment(attempt->compute_environment);
    Result<exec::Backend*> backend =
        ce.ok() ? options_.backends->ForEnvironment(*ce) : Result<exec::Backend*>(ce.status());
    Result<exec::GangLaunch> launched = backend.ok() ? Result<exec::GangLaunch>(exec::GangLaunch{})
                                                     : Result<exec::GangLaunch>(backend.status());
    if (backend.ok()) {
      Result<exec::GangSpec> gang = MakeGang(job, *ce, **backend);
      if (gang.ok()) {
        handovers.push_back(Handover{id, number, now, *backend, BackendRecord(*ce),
                                     std::move(*gang), exec::GangLaunch{}});
        continue;
      }
      launched = gang.status();
    }
    handovers.push_back(
        Handover{id, number, now, nullptr, Json(), exec::GangSpec{}, std::move(launched)});
  }
  {
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t i = next++; i < handovers.size(); i = next++) {
        if (handovers[i].backend == nullptr) continue;
        handovers[i].launched = handovers[i].backend->LaunchGang(handovers[i].gang);
        metrics_.CountLaunch(handovers[i].backend->Name(), !handovers[i].launched.ok());
      }
    };
    std::vector<std::thread> helpers;
    const size_t extra = std::min<size_t>(kParallelLaunches - 1, handovers.size() / 2);
    for (size_t i = 0; i < extra; ++i) helpers.push_back(NamedThread("lote-launch", work));
    work();
    for (std::thread& t : helpers) t.join();
  }
  for (Handover& h : handovers) {
    const std::string& id = h.id;
    const int32_t number = h.number;
    const int64_t now = h.now;
    Result<exec::GangLaunch>& launched = h.launched;
    if (!launched.ok()) {
      all_events.emplace_back(
          id, JobEvent::AttemptFailed(number, LaunchFailureCategory(launched.status()),
                                      "could not start the job: " + launched.status().message(), -1,
                                      now));
      continue;
    }
    all_events.emplace_back(
        id, JobEvent::Launched(number, launched->backend_ref, now, std::move(h.backend_record)));
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!launched->warnings.empty())
        launch_warnings_[exec::AttemptKey{id, number}] = std::move(launched->warnings);
    }
    for (exec::NodeEvent& e : launched->events) known.emplace_back(id, std::move(e));
  }
  // One commit for every gang handed over in this pass.
  Result<uint64_t> ticket = uint64_t{0};
  std::vector<exec::AttemptKey> terminate;
  {
    std::lock_guard<std::mutex> lock(mu_);
    SyncWithStoreLocked();
    for (const auto& [id, e] : all_events) {
      Status r = ApplyLocked(id, e);
      if (!r.ok()) spdlog::warn("jobs: {} on {}: {}", JobEventTypeName(e.type), id, r.ToString());
    }
    std::vector<exec::NodeEvent> events;
    for (auto& [id, e] : known) events.push_back(std::move(e));
    ApplyNodeEventsLocked(events, clock_->NowMillis());
    terminate.swap(to_terminate_);
    ticket = FlushLocked();
  }
  // Not waited for: the nodes already run and are recovered from their
  // placement after a crash; the next pass's commit comes after this one.
  if (!ticket.ok()) spdlog::error("jobs: store commit failed: {}", ticket.status().ToString());
  TerminateAttempts(terminate);
}

Status JobLoop::AddSecrets(const ContainerSpec& container, NodeLaunch* launch) const {
  const Json secrets = container.other.value("secrets", Json::array());
  if (!secrets.is_array() || secrets.empty()) return Status::Ok();
  for (const Json& s : secrets) {
    const std::string name = s.value("name", "");
    // The value goes only into the node's environment: never logged, never
    // in an answer (DescribeJobs shows name and valueFrom, as AWS does).
    Result<std::string> value = control_->SecretValue(s.value("valueFrom", ""));
    if (!value.ok())
      return Status::InvalidArgument("secret " + name + ": " + value.status().message());
    launch->environment.push_back({name, *value});
  }
  // Resolved here, for every backend alike.
  auto& fields = launch->fields_set;
  fields.erase(std::remove(fields.begin(), fields.end(), "secrets"), fields.end());
  return Status::Ok();
}

int64_t JobLoop::GraceMs(const exec::AttemptKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = jobs_.find(key.job_id);
  if (it != jobs_.end()) {
    if (std::optional<int64_t> s = TerminationGraceSeconds(it->second)) return *s * 1000;
  }
  return options_.terminate_grace_ms;
}

FailureCategory FailureCategoryOf(const exec::NodeEvent& event, bool unstarted) {
  switch (event.outcome) {
    case exec::NodeOutcome::kExited:
      return event.exit_code == 0 ? FailureCategory::kNone : CategoryOfExit(event.exit_code, false);
    case exec::NodeOutcome::kSignaled:
      return FailureCategory::kUserError;
    case exec::NodeOutcome::kLost:
      return event.never_started && unstarted ? FailureCategory::kNotStarted
                                              : FailureCategory::kNodeLost;
    case exec::NodeOutcome::kStartFailed:
      return event.bad_command ? FailureCategory::kUserError : FailureCategory::kInfrastructure;
  }
  return FailureCategory::kInfrastructure;
}

FailureCategory LaunchFailureCategory(const Status& status) {
  return status.IsInvalidArgument() ? FailureCategory::kUserError
                                    : FailureCategory::kInfrastructure;
}

}  // namespace lote::control
