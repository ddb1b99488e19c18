// The scheduling policy: Decide() turns a Snapshot and the time into Decisions.
//
// Pure: no I/O, no threads, no store, no global state; the same snapshot and
// time always give the same decisions. The control plane calls it once per
// loop iteration (whenever something changed), applies the decisions
// (launch instances, start placed jobs, remove instances, fail never-fitting
// jobs, write each waiting job's statusReason) and keeps share_usage for the
// next pass. The full policy is specified in docs/scheduler.md.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/resources.h"
#include "sched/snapshot.h"

namespace lote::sched {

// Where one node of a placed job runs.
struct NodePlacement {
  int32_t node_index = 0;
  std::string instance_id;    // an existing instance, or empty when launch_index >= 0
  int32_t launch_index = -1;  // index into Decisions::launches: a new instance
  Resources resources;        // what the node holds on the instance
  // Accelerator devices given to the node: positions on the instance's host
  // (Instance::host), or the instance's own device indices.
  std::vector<int32_t> devices;
};

// A job to start now: every node is placed (gangs are never placed in part).
struct Placement {
  std::string job_id;
  std::string queue;
  std::string compute_environment;
  std::vector<NodePlacement> nodes;  // one per node, node_index order
};

// A new virtual instance to create in a compute environment.
struct Launch {
  std::string compute_environment;
  Resources shape;
  std::string host;  // ComputeEnvironment::host
};

// An idle instance to remove.
struct Removal {
  std::string compute_environment;
  std::string instance_id;
};

// Per compute environment: vCPUs of its instances once the launches and
// removals are applied (store it as the CE's desiredvCpus).
struct CeTarget {
  std::string compute_environment;
  int64_t desired_vcpus = 0;
};

enum class WaitReason {
  kQueueDisabled,        // the job queue is DISABLED
  kNoUsableEnvironment,  // none of the queue's compute environments is ENABLED and VALID
  kCapacity,             // not enough free capacity now (may include capacity held for others)
  kComputeReservation,   // fair-share computeReservation holds the rest back
  // No instance of the queue's compute environments can ever hold the job's
  // accelerators (AWS leaves such a job RUNNABLE with statusReason
  // "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT - ..."; it is not failed).
  kMisconfiguration,
  // A consumable resource it needs has too few units available (or is held
  // for a job ahead of it, or does not exist). lote's own wording: AWS
  // documents none (docs/scheduler.md, "Consumable resources").
  kConsumableResource,
};

// A job that stays RUNNABLE, and exactly why (its statusReason).
struct Wait {
  std::string job_id;
  WaitReason reason = WaitReason::kCapacity;
  std::string message;
};

// A job that can never run with the queue's compute environments as they are
// configured: fail it now (category CAPACITY) with this message.
struct NeverFits {
  std::string job_id;
  std::string message;
};

// New history for a share of a fair-share queue: store it and pass it back
// as ShareUsage::history_* in the next snapshot.
struct ShareUsageUpdate {
  std::string queue;
  std::string share_identifier;
  double history_vcpu_seconds = 0;
  int64_t history_as_of_ms = 0;
};

// A job the pass set aside because ValidateJob refused it (an amount out of
// range, no nodes, an unknown queue): fail it (it can never be placed as it
// is) with this message. The rest of the pass goes on without it.
struct Rejected {
  std::string job_id;
  std::string message;
};

struct Decisions {
  std::vector<Placement> placements;  // in dispatch order
  std::vector<Launch> launches;
  std::vector<Removal> removals;
  std::vector<CeTarget> targets;  // one per managed compute environment, snapshot order
  std::vector<Wait> waiting;      // every job neither placed nor failed
  std::vector<NeverFits> never_fits;
  std::vector<Rejected> rejected;  // malformed jobs, left out of the pass
  std::vector<ShareUsageUpdate> share_usage;
  // Per queue name: its RUNNABLE jobs (never-fits ones left out) in the order
  // this pass considered them (what GetJobQueueSnapshot shows).
  std::map<std::string, std::vector<std::string>> order;
};

// Decides one scheduling pass. InvalidArgument when ValidateEnvironments fails;
// a job that ValidateJob refuses (or a second job with the same id) is listed
// in Decisions::rejected and never stops the pass for the others.
Result<Decisions> Decide(const Snapshot& snapshot, int64_t now_ms);

}  // namespace lote::sched
