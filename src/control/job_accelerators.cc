// The job loop's accelerator operations (lote's own, docs/jobs.md
// "Accelerators"): DescribeAccelerators, RescanAccelerators, DrainAccelerator
// and ReleaseAccelerator over this host's devices (accelerators.h).
#include <spdlog/spdlog.h>

#include "control/job_loop.h"

namespace lote::control {
namespace {

Status NoDevices() {
  return Status::FailedPrecondition("this server schedules no host accelerators");
}

Result<int32_t> IndexOf(const Json& request) {
  if (!request.is_object() || !request.contains("index") || !request["index"].is_number_integer())
    return Status::InvalidArgument("index is required: the device's index (lote nodes list)");
  return request["index"].get<int32_t>();
}

Status CheckHost(const Json& request, const HostDevicesView& view) {
  const std::string host = request.is_object() ? request.value("host", "") : "";
  if (!host.empty() && host != view.host)
    return Status::InvalidArgument("host " + host + " is not this server's; its devices are on " +
                                   view.host);
  return Status::Ok();
}

}  // namespace

std::map<int32_t, std::string> JobLoop::DeviceHoldersLocked() const {
  std::map<int32_t, std::string> holders;
  if (options_.host_devices == nullptr) return holders;
  std::shared_ptr<const HostDevicesView> view = options_.host_devices->Current();
  for (const ComputeEnvironmentSpec& ce : control_->ComputeEnvironments()) {
    if (!UsesHostDevices(*view, ce)) continue;
    for (const std::string& id : index_.Holding()) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      const Attempt* a = it->second.CurrentAttempt();
      if (a == nullptr || a->compute_environment != ce.name) continue;
      for (const NodeAttempt& n : a->nodes)
        for (int32_t d : n.devices)
          holders[d] = it->second.IsMultiNode() ? NodeJobId(id, n.node_index) : id;
    }
  }
  return holders;
}

Result<Json> JobLoop::DescribeAccelerators(const Json& request) {
  if (options_.host_devices == nullptr) return Json{{"hosts", Json::array()}};
  std::shared_ptr<const HostDevicesView> view = options_.host_devices->Current();
  std::map<int32_t, std::string> holders;
  {
    std::lock_guard<std::mutex> lock(mu_);
    holders = DeviceHoldersLocked();
  }
  return Json{{"hosts", Json::array({DescribeHostDevices(*view, holders)})}};
}

Result<Json> JobLoop::RescanAccelerators(const Json& request) {
  if (options_.host_devices == nullptr) return NoDevices();
  RETURN_IF_ERROR(options_.host_devices->Rescan());
  spdlog::info("accelerators: rescanned: {} devices from {}",
               options_.host_devices->Current()->devices.size(),
               options_.host_devices->Current()->inventory.source);
  Wake();
  return DescribeAccelerators(request);
}

Result<Json> JobLoop::DrainAccelerator(const Json& request) {
  if (options_.host_devices == nullptr) return NoDevices();
  RETURN_IF_ERROR(CheckHost(request, *options_.host_devices->Current()));
  ASSIGN_OR_RETURN(int32_t index, IndexOf(request));
  const std::string reason = request.value("reason", "");
  RETURN_IF_ERROR(options_.host_devices->Drain(index, reason, clock_->NowMillis()));
  spdlog::warn("accelerators: device {} drained{}", index, reason.empty() ? "" : ": " + reason);
  Wake();
  return DescribeAccelerators(request);
}

Result<Json> JobLoop::ReleaseAccelerator(const Json& request) {
  if (options_.host_devices == nullptr) return NoDevices();
  RETURN_IF_ERROR(CheckHost(request, *options_.host_devices->Current()));
  ASSIGN_OR_RETURN(int32_t index, IndexOf(request));
  RETURN_IF_ERROR(options_.host_devices->Release(index));
  spdlog::info("accelerators: device {} back in service", index);
  Wake();
  return DescribeAccelerators(request);
}

}  // namespace lote::control
