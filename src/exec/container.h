// Container mode of the node runner: a node runs in its job's image under
// podman (with runc, configured by a lote-managed containers.conf) instead of
// as a host process. The compute environment's tag lote:runtime=container
// (or `lote server --runtime container`) selects it; see docs/containers.md.
//
// This file holds the pure parts: the AWS container fields as a ContainerRun,
// the `podman run` command line of a node, and how a failed podman run
// becomes AWS's reason. The runner (shim.cc) runs it. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"

namespace lote::exec {

struct ContainerDevice {
  std::string host_path;
  std::string container_path;  // empty: the host path
  std::string permissions;     // podman's "rwm" letters; empty: podman's default
  bool operator==(const ContainerDevice&) const = default;
};

struct ContainerMount {
  std::string source;  // an absolute host path, or a podman named volume
  std::string container_path;
  bool read_only = false;
  bool operator==(const ContainerMount&) const = default;
};

// A Unix user as numbers: what a container is given (podman --user UID:GID
// --group-add ...), never a name for its image to interpret.
struct UserIds {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<uint32_t> groups;  // supplementary, the primary gid among them or not
  bool operator==(const UserIds&) const = default;
};

// What a node's container is, beyond the runner's spec (argv, environment,
// user, ulimits, limits).
struct ContainerRun {
  std::string image;
  bool privileged = false;
  bool read_only_root = false;
  std::vector<ContainerDevice> devices;
  // Accelerators by fully qualified CDI name (nvidia.com/gpu=0): podman
  // applies the host's CDI spec for each (--device NAME).
  std::vector<std::string> cdi_devices;
  std::vector<ContainerMount> mounts;
  int64_t shm_mib = 0;  // linuxParameters.sharedMemorySize; 0: podman's default (64 MiB)
  // Set by the backend: the podman configuration (CONTAINERS_CONF and
  // CONTAINERS_REGISTRIES_CONF) and the container's name.
  std::string containers_conf;
  std::string registries_conf;
  // REGISTRY_AUTH_FILE: podman's login to the local registry; empty: none.
  std::string auth_file;
  std::string name;
  bool operator==(const ContainerRun&) const = default;
};

// lote's own image registry as container mode uses it (images/registry_process.h).
struct LocalRegistry {
  std::string address;    // "127.0.0.1:PORT", reached over plain HTTP; empty: none
  std::string auth_file;  // podman's auth.json holding its login
  // ECR's host name when `lote server --ecr-host-names on` makes it reach the
  // registry (images/ecr_host.h), also plain HTTP in registries.conf; empty: none.
  std::string ecr_host;
};

// `image` with an ECR registry host (<account>.dkr.ecr.<region>.amazonaws.com,
// as ECR's repositoryUri and job definitions name it) replaced by the local
// registry's address; any other image (or no registry) unchanged.
std::string ResolveEcrImage(const std::string& image, const LocalRegistry& registry);

// Points a node's container at lote's podman configuration (`conf`:
// containers.conf, registries.conf) and local registry.
void UseLotePodman(ContainerRun* c, const std::pair<std::string, std::string>& conf,
                   const LocalRegistry& registry);

// The fields container mode honours that a process cannot
// (NodeLaunch::fields_set paths).
const std::set<std::string>& ContainerModeFields();

// From a job's container: `linux_parameters` (devices, sharedMemorySize) and the other
// ContainerProperties keys (privileged, readonlyRootFilesystem, volumes,
// mountPoints). InvalidArgument for a mount point naming no volume, a volume
// of a kind lote cannot mount (EFS), a device without hostPath.
Result<ContainerRun> ContainerRunFromAws(const std::string& image, const Json& linux_parameters,
                                         const Json& other);

// "lote-<job>-<attempt>-<node>", with the characters podman refuses in a
// name (':' of an array child) as '_'.
std::string ContainerName(const std::string& job_id, int32_t attempt, int32_t node_index);

Json ToJson(const ContainerRun& c);
ContainerRun ContainerRunFromJson(const Json& j);  // throws on a malformed record

// One limit of `podman run --ulimit`.
struct ContainerUlimit {
  std::string name;
  int64_t soft = 0;  // -1: unlimited
  int64_t hard = 0;
};

// Everything `podman run` is given for one node. The job's variables are
// passed by name (`-e KEY`: the value comes from podman's own environment,
// never the command line).
struct PodmanRunSpec {
  ContainerRun container;
  std::vector<std::string> command;   // empty: the image's ENTRYPOINT + CMD
  std::vector<std::string> env_keys;  // the job's variables
  std::optional<UserIds> user;        // none: the image's USER
  std::vector<ContainerUlimit> ulimits;
  int64_t memory_mib = 0;  // 0: not limited
  int64_t vcpu_milli = 0;  // 0: not limited
  // --cidfile: podman writes the container's id there once it has created
  // the container, i.e. after the pull (empty: none).
  std::string cid_file;
};

// `podman run --rm --name N --init --network=host ... IMAGE [command...]`
// (without the podman program itself). The user as numbers (`--user UID:GID`,
// `--group-add GID` for each other group), never a name the image's
// /etc/passwd could map to root; `--security-opt=no-new-privileges` unless
// privileged, and no capabilities (`--cap-drop=all`) for a user other than
// root: a set-uid program in the image cannot raise it. As ECS does for AWS Batch: a command
// replaces the image's CMD and keeps its ENTRYPOINT; no command runs both as
// the image says. Every --ulimit list names nofile and nproc (podman replaces
// containers.conf's defaults once one is given): `host_nofile` / `host_nproc`
// when the job names neither.
std::vector<std::string> PodmanRunArgs(const PodmanRunSpec& spec,
                                       const ContainerUlimit& host_nofile,
                                       const ContainerUlimit& host_nproc);

// How a podman run that exited `code` failed, from the last "Error: " line
// podman wrote (`output_tail`: the end of the node's output since it
// started). nullopt: the container's own exit (no such line, or a code
// podman does not use for itself: 125 podman, 126 the runtime, 127 a
// missing executable). Otherwise AWS's reason and whether it is the job's
// own fault (the image or the executable does not exist).
struct ContainerFailure {
  std::string reason;  // "CannotPullContainerError: ..." / "CannotStartContainerError: ..."
  bool users_fault = false;
};
std::optional<ContainerFailure> ClassifyPodmanExit(int code, const std::string& output_tail);

// The pull phase of a node's `podman run --pull=missing`, from what the
// runner saw: `output_head`, the node's first output after podman started
// (podman prints "Trying to pull IMAGE..." first when the image is not
// cached), podman's start, when the container existed (its cid file written;
// 0: never, the pull or the creation failed) and podman's end. nullopt when
// nothing was pulled (a cached image).
struct PullPhase {
  int64_t started_at_ms = 0;
  int64_t stopped_at_ms = 0;  // the container created, or podman's end if it never was
};
std::optional<PullPhase> PullPhaseOf(const std::string& output_head, int64_t podman_started_ms,
                                     int64_t container_created_ms, int64_t podman_ended_ms);

// `podman rm -f -t 0 --ignore <name>` with the container's configuration: a
// container left behind when podman itself was killed. Unavailable when
// podman cannot be run or fails.
Status RemoveContainer(const ContainerRun& container);

// The podman configuration lote manages under `dir` (made if missing):
// containers.conf (runc, cgroupfs, the file events logger, default ulimits
// within this host's hard limits) and registries.conf (the registry's address,
// e.g. "127.0.0.1:5000", and its ECR host name, when set, reached over plain
// HTTP). Returns the two paths.
Result<std::pair<std::string, std::string>> WritePodmanConfig(const std::string& dir,
                                                              const LocalRegistry& registry);

}  // namespace lote::exec
