// The accelerators of the host the local backend runs on, as the job loop
// schedules them (docs/jobs.md, "Accelerators").
//
// HostDevices (the registry) keeps this host's inventory (exec/accelerators.h:
// the inventory file, or discovery), reloaded by Rescan(), and the devices an
// operator took out of service (Drain / Release, kept in
// <home>/accelerators/drained.json, written atomically before it takes
// effect). Current() hands out an immutable view; thread-safe.
//
// BindHostDevices (pure) turns the scheduler's view of the local backend's
// environments into one over this host's devices: a compute environment that
// is not emulated and whose instance type has accelerators of the kind this
// host schedules gives its instances the host's devices (as many as its type
// has, at most the host's); instances of every such environment share the
// host (sched::Host), so no two nodes ever get one device. An emulated
// environment keeps its type's virtual devices. A type whose kind this host
// lacks has no devices here, so a job asking for them waits with AWS's
// MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT reason.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "control/control_plane.h"
#include "control/job_model.h"
#include "exec/accelerators.h"
#include "sched/snapshot.h"

namespace lote::control {

struct DrainedDevice {
  int32_t index = 0;  // the device's index (its kind is the host's scheduled kind)
  std::string reason;
  int64_t since_ms = 0;
};

// One immutable view of this host's devices. `devices` point into its own
// `inventory`, so a view is not copied (a copy's pointers would outlive the
// original's inventory): HostDevices builds each view afresh.
struct HostDevicesView {
  HostDevicesView() = default;
  HostDevicesView(const HostDevicesView&) = delete;
  HostDevicesView& operator=(const HostDevicesView&) = delete;

  std::string host;
  exec::Inventory inventory;
  std::optional<exec::AcceleratorKind> kind;      // the kind scheduled here
  std::vector<const exec::Accelerator*> devices;  // of `kind`, index order: positions (<= 64)
  std::vector<int32_t> islands;                   // per position
  std::map<int32_t, DrainedDevice> drained;       // by device index

  // The position of the device with this index, or -1.
  int32_t PositionOf(int32_t index) const;
  // The scheduler's host, with every device free but drained ones (a caller
  // clears those held by running nodes).
  sched::Host SchedulerHost() const;
};

class HostDevices {
 public:
  // `inventory_file` empty: discovery. `home` empty: drains are not kept
  // across restarts (tests).
  HostDevices(std::string host, std::string inventory_file, std::string home,
              exec::DiscoveryRoots roots = {});

  // Reads the inventory and the drained list. The inventory file's errors
  // are returned (the server refuses to start on a bad file).
  Status Load();
  // Reads the inventory again (`lote nodes rescan`); the drained list stays.
  Status Rescan();
  std::shared_ptr<const HostDevicesView> Current() const;

  // Takes the device with this index out of service / puts it back.
  // InvalidArgument naming the host's devices when there is no such device;
  // the change is stored before it takes effect.
  Status Drain(int32_t index, const std::string& reason, int64_t now_ms);
  Status Release(int32_t index);

 private:
  std::shared_ptr<HostDevicesView> MakeView(exec::Inventory inventory,
                                            std::map<int32_t, DrainedDevice> drained) const;
  Status Publish(exec::Inventory inventory, std::map<int32_t, DrainedDevice> drained);
  Status StoreDrained(const std::map<int32_t, DrainedDevice>& drained) const;

  const std::string host_;
  const std::string inventory_file_;
  const std::string home_;
  const exec::DiscoveryRoots roots_;
  mutable std::mutex mu_;
  std::shared_ptr<const HostDevicesView> view_;  // guarded by mu_
};

// Per running node: which compute environment and instance it is on and the
// devices it holds (its attempt's `devices`).
struct HeldDevices {
  std::string compute_environment;
  std::string instance_id;
  std::vector<int32_t> devices;
};

// See the header comment. `environments`: the local backend's environments
// as BuildSchedulerEnvironments made them (UNMANAGED and backend-served ones
// are left alone); `specs`: the compute environments (emulation, instance types).
void BindHostDevices(const HostDevicesView& view, const std::vector<ComputeEnvironmentSpec>& specs,
                     const std::vector<HeldDevices>& held, sched::Snapshot* environments);

// Whether the nodes of this environment get this host's devices (BindHostDevices' rule).
bool UsesHostDevices(const HostDevicesView& view, const ComputeEnvironmentSpec& spec);

// The view for DescribeComputeEnvironments (loteAccelerators) and `lote
// nodes list`: the host, the inventory's source and notes, and per device its
// index, path, name, uuid, numa, island, state (free / held / drained) and holder.
Json DescribeHostDevices(const HostDevicesView& view,
                         const std::map<int32_t, std::string>& holder_by_position);

}  // namespace lote::control
