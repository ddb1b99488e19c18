// Snapshot: the const view of the cluster that the scheduling policy reads.
//
// The control plane builds one Snapshot per scheduling pass from its store
// (compute environments with their virtual instances, job queues, RUNNABLE
// jobs) and hands it to Decide() (scheduler.h). The policy never mutates it.
// Plain aggregates; thread-compatible. Validate() reports every malformed
// field as InvalidArgument naming the object and the fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/resources.h"

namespace lote::sched {

// AWS Batch `state` of a compute environment or job queue.
enum class State { kEnabled, kDisabled };

// A machine whose accelerator devices instances share (docs/scheduler.md,
// "Accelerators"). Its devices are positions 0..devices-1; a device held by a
// running node, or drained, is not free. Instances that name the host take
// their devices from here, so no two nodes ever get one device, whichever
// instance each runs on.
struct Host {
  std::string name;
  int32_t devices = 0;          // at most 64
  uint64_t free_devices = 0;    // bit i set = position i is free
  std::vector<int32_t> island;  // per position: devices linked (NVLink) or on one NUMA node
                                // share a number; empty = one island

  friend bool operator==(const Host&, const Host&) = default;
};

// A virtual instance of a compute environment.
struct Instance {
  static constexpr int64_t kBusy = -1;

  std::string id;       // unique across the whole snapshot
  Resources total;      // its shape (normally the CE's instance type)
  Resources available;  // total minus what running jobs hold now
  // Bit i set = accelerator device index i is free. Its popcount must equal
  // available.accelerators (at most 64 devices per instance).
  uint64_t free_devices = 0;
  // When the last job on it ended (ms since epoch), or kBusy while any job runs.
  int64_t idle_since_ms = kBusy;
  // The Host whose devices it hands out, or "" when its devices are its own
  // (free_devices above; an emulated instance type). With a host,
  // free_devices must be 0 and available.accelerators is how many more of
  // the host's devices it may take (its type's count minus what it holds).
  std::string host;

  bool IsFeasible(const Resources& need) const { return need.FitsIn(total); }       // ever
  bool IsAvailable(const Resources& need) const { return need.FitsIn(available); }  // now

  friend bool operator==(const Instance&, const Instance&) = default;
};

// An idle instance of `shape` with every device free, idle since `now_ms`.
Instance MakeIdleInstance(std::string id, const Resources& shape, int64_t now_ms);

struct InstanceType {
  std::string name;  // e.g. "trn1.32xlarge"; used in messages only
  Resources shape;
  // "gpu", "neuron", or "" (no accelerators, or any kind): a node asking
  // for accelerators of another kind never fits.
  std::string accelerator_kind;

  friend bool operator==(const InstanceType&, const InstanceType&) = default;
};

struct ComputeEnvironment {
  std::string name;
  State state = State::kEnabled;
  bool valid = true;             // AWS status VALID; otherwise nothing is placed or scaled
  std::string status = "VALID";  // AWS status word for messages (CREATING, UPDATING, INVALID)
  // lote launches nothing here (AWS UNMANAGED: capacity comes from outside,
  // e.g. a Slurm backend). It has no instance type; jobs may wait for it but
  // never fail as never fitting because of it.
  bool unmanaged = false;
  InstanceType instance_type;   // the shape of every instance this CE launches
  std::string placement_group;  // gangs never span compute environments
  std::string host;             // the Host of the instances it launches ("" = their own devices)
  int64_t min_vcpus = 0;        // whole vCPUs, as AWS
  int64_t max_vcpus = 0;
  int64_t desired_vcpus = 0;        // informational; Decide() returns the new value
  std::vector<Instance> instances;  // existing virtual instances, any order (ids break ties)

  friend bool operator==(const ComputeEnvironment&, const ComputeEnvironment&) = default;
};

// One entry of a fair-share policy's shareDistribution. An identifier ending
// in '*' is a prefix: it gives its weight to every identifier that starts
// with the prefix ("*" alone matches all); each such identifier is its own share.
struct ShareWeight {
  std::string share_identifier;
  double weight_factor = 1.0;  // lower = larger share; 0.125 gets 8x the share of 1.0

  friend bool operator==(const ShareWeight&, const ShareWeight&) = default;
};

struct FairSharePolicy {
  int32_t compute_reservation = 0;  // 0..99
  int64_t share_decay_seconds = 0;  // 0 = only current usage counts; max 604800
  std::vector<ShareWeight> share_distribution;

  friend bool operator==(const FairSharePolicy&, const FairSharePolicy&) = default;
};

// What one share identifier of a fair-share queue has used. The control plane
// keeps `history_*` from the previous Decisions::share_usage (start at 0).
struct ShareUsage {
  std::string share_identifier;
  int64_t running_milli_vcpu = 0;   // vCPUs held by its STARTING/RUNNING jobs now
  double history_vcpu_seconds = 0;  // decayed vCPU-seconds as of history_as_of_ms
  int64_t history_as_of_ms = 0;

  friend bool operator==(const ShareUsage&, const ShareUsage&) = default;
};

struct JobQueue {
  std::string name;
  int32_t priority = 1;  // higher is scheduled first
  State state = State::kEnabled;
  std::vector<std::string> compute_environments;  // in computeEnvironmentOrder
  std::optional<FairSharePolicy> fair_share;      // absent = FIFO queue
  std::vector<ShareUsage> share_usage;            // fair-share queues only

  friend bool operator==(const JobQueue&, const JobQueue&) = default;
};

// A run of consecutive nodes with the same requirements (AWS node ranges).
struct NodeRange {
  int32_t count = 1;
  Resources each;
  std::string accelerator_kind;  // "gpu", "neuron", or "" (any) when each.accelerators > 0

  friend bool operator==(const NodeRange&, const NodeRange&) = default;
};

// A consumable resource (AWS Batch resource-aware scheduling: licences,
// shared capacity counted in units), as a pass may hand it out.
struct Consumable {
  std::string name;
  int64_t total = 0;      // what its owner set (messages only)
  int64_t available = 0;  // total minus the units STARTING and RUNNING jobs hold now

  friend bool operator==(const Consumable&, const Consumable&) = default;
};

// Units of a consumable resource a job needs for as long as it runs.
struct ConsumableNeed {
  std::string name;
  int64_t quantity = 0;

  friend bool operator==(const ConsumableNeed&, const ConsumableNeed&) = default;
};

// A RUNNABLE job (or array child: one per child). More than one node in
// total makes it a gang: all nodes start together, each on its own instance,
// all in one compute environment (hence one placement group), or none starts.
struct Job {
  std::string id;
  std::string queue;
  int64_t submit_order = 0;  // strictly increasing in submission order
  int64_t submitted_at_ms = 0;
  std::string share_identifier;     // fair-share queues
  int32_t scheduling_priority = 0;  // fair-share queues: higher first within a share
  std::vector<NodeRange> nodes;     // node index order: range 0 holds nodes 0..count-1, ...
  // Instances to keep the job off (a retry: those its failed node ran on,
  // control/quarantine.h). Its nodes go to other instances, existing or
  // launched, when the compute environment has room for all of them there;
  // otherwise these are used as any other (a retry never waits for them).
  std::vector<std::string> avoid_instances;
  // Consumable resources it needs, each named once (all its nodes together).
  std::vector<ConsumableNeed> consumables;

  int32_t NumNodes() const;
  bool IsGang() const { return NumNodes() > 1; }

  friend bool operator==(const Job&, const Job&) = default;
};

// Policy knobs; part of the snapshot so that the policy reads no globals.
struct SchedulerConfig {
  int64_t idle_timeout_ms = 5 * 60 * 1000;  // an idle instance is removed after this long

  friend bool operator==(const SchedulerConfig&, const SchedulerConfig&) = default;
};

struct Snapshot {
  std::vector<Host> hosts;  // those instances and compute environments name
  std::vector<ComputeEnvironment> compute_environments;
  std::vector<JobQueue> queues;
  std::vector<Job> jobs;  // RUNNABLE jobs only, any order
  SchedulerConfig config;
  // Every consumable resource that exists; a job needing one not listed waits.
  std::vector<Consumable> consumables;
};

// The most one node may ask for, and the most nodes one job may have: far
// above any real instance (and above anything AWS accepts: 2^31-1 vCPUs,
// MiB or GPUs), low enough that sums over many jobs stay exact.
inline constexpr Resources kMaxNodeRequest{int64_t{1} << 42, int64_t{1} << 42, 2147483647};
inline constexpr int64_t kMaxJobNodes = int64_t{1} << 20;
// The most units of one consumable resource one job may need.
inline constexpr int64_t kMaxConsumableUnits = int64_t{1} << 50;

// OK, or InvalidArgument naming the first malformed object and how to fix it.
Status Validate(const Snapshot& snapshot);
// The part of Validate that a pass cannot run without: compute environments,
// instances, queues and config.
Status ValidateEnvironments(const Snapshot& snapshot);
// The part of Validate about one job (its queue must be in `snapshot`; ids
// are not compared). A pass sets such a job aside (Decisions::rejected).
Status ValidateJob(const Job& job, const Snapshot& snapshot);

}  // namespace lote::sched
