#include "control/accelerators.h"

#include <algorithm>
#include <bit>
#include <filesystem>
#include <set>

#include "common/files.h"

namespace lote::control {
namespace {

constexpr size_t kMaxHostDevices = 64;  // sched::Host

std::string DrainedPath(const std::string& home) { return home + "/accelerators/drained.json"; }

}  // namespace

int32_t HostDevicesView::PositionOf(int32_t index) const {
  for (size_t p = 0; p < devices.size(); ++p)
    if (devices[p]->index == index) return static_cast<int32_t>(p);
  return -1;
}

sched::Host HostDevicesView::SchedulerHost() const {
  sched::Host h;
  h.name = host;
  h.devices = static_cast<int32_t>(devices.size());
  for (size_t p = 0; p < devices.size(); ++p)
    if (!drained.count(devices[p]->index)) h.free_devices |= uint64_t{1} << p;
  h.island = islands;
  return h;
}

HostDevices::HostDevices(std::string host, std::string inventory_file, std::string home,
                         exec::DiscoveryRoots roots)
    : host_(std::move(host)),
      inventory_file_(std::move(inventory_file)),
      home_(std::move(home)),
      roots_(std::move(roots)) {
  view_ = std::make_shared<HostDevicesView>();
}

Status HostDevices::Load() {
  ASSIGN_OR_RETURN(exec::Inventory inv, exec::LoadInventory(inventory_file_, roots_));
  std::map<int32_t, DrainedDevice> drained;
  if (!home_.empty() && FileExists(DrainedPath(home_))) {
    Result<Json> j = ReadJsonFile(DrainedPath(home_));
    if (!j.ok()) return j.status().WithContext("the drained accelerators list");
    for (const Json& d : j->value("drained", Json::array())) {
      if (!d.is_object() || !d.contains("index") || !d["index"].is_number_integer()) continue;
      DrainedDevice dd{d["index"].get<int32_t>(), d.value("reason", ""),
                       d.value("since", int64_t{0})};
      drained[dd.index] = dd;
    }
  }
  return Publish(std::move(inv), std::move(drained));
}

Status HostDevices::Rescan() {
  ASSIGN_OR_RETURN(exec::Inventory inv, exec::LoadInventory(inventory_file_, roots_));
  std::map<int32_t, DrainedDevice> drained;
  {
    std::lock_guard<std::mutex> lock(mu_);
    drained = view_->drained;
  }
  return Publish(std::move(inv), std::move(drained));
}

// A view's `devices` point into its own inventory, so a view is never copied:
// a changed one is built again from its inventory.
std::shared_ptr<HostDevicesView> HostDevices::MakeView(
    exec::Inventory inventory, std::map<int32_t, DrainedDevice> drained) const {
  auto view = std::make_shared<HostDevicesView>();
  view->host = host_;
  view->inventory = std::move(inventory);
  view->kind = view->inventory.ScheduledKind();
  if (view->kind) {
    view->devices = view->inventory.Of(*view->kind);
    if (view->devices.size() > kMaxHostDevices) {
      view->inventory.notes.push_back("only the first 64 of " +
                                      std::to_string(view->devices.size()) +
                                      " devices are scheduled");
      view->devices.resize(kMaxHostDevices);
    }
    view->islands = exec::Islands(view->devices);
  }
  view->drained = std::move(drained);
  return view;
}

Status HostDevices::Publish(exec::Inventory inventory, std::map<int32_t, DrainedDevice> drained) {
  std::shared_ptr<HostDevicesView> view = MakeView(std::move(inventory), std::move(drained));
  std::lock_guard<std::mutex> lock(mu_);
  view_ = std::move(view);
  return Status::Ok();
}

std::shared_ptr<const HostDevicesView> HostDevices::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return view_;
}

Status HostDevices::StoreDrained(const std::map<int32_t, DrainedDevice>& drained) const {
  if (home_.empty()) return Status::Ok();
  Json list = Json::array();
  for (const auto& [index, d] : drained)
    list.push_back({{"index", index}, {"reason", d.reason}, {"since", d.since_ms}});
  std::error_code ec;
  std::filesystem::create_directories(home_ + "/accelerators", ec);
  if (ec) return Status::Internal("cannot create " + home_ + "/accelerators: " + ec.message());
  return WriteFileAtomic(DrainedPath(home_), Json{{"drained", list}}.dump(2) + "\n", 0600);
}

Status HostDevices::Drain(int32_t index, const std::string& reason, int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (view_->PositionOf(index) < 0) {
    std::string have;
    for (const exec::Accelerator* a : view_->devices)
      have += (have.empty() ? "" : ", ") + std::to_string(a->index);
    return Status::InvalidArgument(
        "host " + host_ + " has no accelerator with index " + std::to_string(index) +
        (have.empty() ? " (it has none)" : " (its devices: " + have + ")"));
  }
  std::map<int32_t, DrainedDevice> drained = view_->drained;
  drained[index] = DrainedDevice{index, reason.empty() ? "drained by hand" : reason, now_ms};
  RETURN_IF_ERROR(StoreDrained(drained));
  std::shared_ptr<HostDevicesView> view = MakeView(view_->inventory, std::move(drained));
  view_ = std::move(view);
  return Status::Ok();
}

Status HostDevices::Release(int32_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!view_->drained.count(index)) {
    return Status::InvalidArgument("accelerator " + std::to_string(index) + " of host " + host_ +
                                   " is not drained");
  }
  std::map<int32_t, DrainedDevice> drained = view_->drained;
  drained.erase(index);
  RETURN_IF_ERROR(StoreDrained(drained));
  std::shared_ptr<HostDevicesView> view = MakeView(view_->inventory, std::move(drained));
  view_ = std::move(view);
  return Status::Ok();
}

bool UsesHostDevices(const HostDevicesView& view, const ComputeEnvironmentSpec& spec) {
  if (spec.emulation || spec.instance_types.empty()) return false;
  const InstanceType& t = spec.instance_types.front();
  if (t.accelerators <= 0 || !view.kind || view.devices.empty()) return false;
  return AcceleratorKindOf(t) == exec::KindName(*view.kind);
}

void BindHostDevices(const HostDevicesView& view, const std::vector<ComputeEnvironmentSpec>& specs,
                     const std::vector<HeldDevices>& held, sched::Snapshot* environments) {
  std::map<std::string, const ComputeEnvironmentSpec*> by_name;
  std::set<std::string> host_ces;
  for (const ComputeEnvironmentSpec& s : specs) {
    by_name[s.name] = &s;
    if (UsesHostDevices(view, s)) host_ces.insert(s.name);
  }
  uint64_t host_held = 0;
  std::map<std::string, int32_t> held_by_instance;
  for (const HeldDevices& h : held) {
    if (!host_ces.count(h.compute_environment)) continue;
    for (int32_t d : h.devices)
      if (d >= 0 && d < 64) host_held |= uint64_t{1} << d;
    held_by_instance[h.instance_id] += static_cast<int32_t>(h.devices.size());
  }
  bool any = false;
  for (sched::ComputeEnvironment& ce : environments->compute_environments) {
    auto it = by_name.find(ce.name);
    if (it == by_name.end() || it->second->instance_types.empty()) continue;
    const ComputeEnvironmentSpec& spec = *it->second;
    const InstanceType& t = spec.instance_types.front();
    const std::string kind = AcceleratorKindOf(t);
    if (ce.unmanaged) continue;
    ce.instance_type.accelerator_kind = kind;
    if (spec.emulation || kind.empty()) continue;  // virtual devices, or none
    int32_t n = 0;
    if (host_ces.count(ce.name)) {
      n = std::min<int32_t>(t.accelerators, static_cast<int32_t>(view.devices.size()));
      if (n < t.accelerators)
        ce.instance_type.name += " on " + view.host + " (" + std::to_string(n) + " of its " +
                                 std::to_string(t.accelerators) + " devices)";
      ce.host = view.host;
      any = true;
    } else {
      ce.instance_type.name += " on " + view.host + " (whose inventory has no " +
                               (kind == "gpu" ? "GPUs" : "Neuron devices") + ")";
    }
    ce.instance_type.shape.accelerators = n;
    for (sched::Instance& inst : ce.instances) {
      inst.total.accelerators = n;
      auto h = held_by_instance.find(inst.id);
      inst.available.accelerators =
          std::max<int32_t>(0, n - (h == held_by_instance.end() ? 0 : h->second));
      inst.free_devices = 0;
      if (n > 0) inst.host = view.host;
    }
  }
  if (any) {
    sched::Host h = view.SchedulerHost();
    h.free_devices &= ~host_held;
    environments->hosts.push_back(std::move(h));
  }
}

Json DescribeHostDevices(const HostDevicesView& view,
                         const std::map<int32_t, std::string>& holder_by_position) {
  Json devices = Json::array();
  for (size_t p = 0; p < view.devices.size(); ++p) {
    const exec::Accelerator& a = *view.devices[p];
    Json d{{"index", a.index},
           {"kind", std::string(exec::KindName(a.kind))},
           {"path", a.path},
           {"name", a.name},
           {"island", p < view.islands.size() ? view.islands[p] : 0}};
    if (!a.uuid.empty()) d["uuid"] = a.uuid;
    if (!a.pci_bus_id.empty()) d["pciBusId"] = a.pci_bus_id;
    if (a.memory_mib > 0) d["memoryMiB"] = a.memory_mib;
    if (a.numa_node >= 0) d["numaNode"] = a.numa_node;
    if (a.cores > 0) d["cores"] = a.cores;
    if (!a.cdi.empty()) d["cdi"] = a.cdi;
    auto drained = view.drained.find(a.index);
    auto holder = holder_by_position.find(static_cast<int32_t>(p));
    if (drained != view.drained.end()) {
      d["state"] = "DRAINED";
      d["reason"] = drained->second.reason;
      d["since"] = drained->second.since_ms;
    } else {
      d["state"] = holder != holder_by_position.end() ? "HELD" : "FREE";
    }
    if (holder != holder_by_position.end()) d["heldBy"] = holder->second;
    devices.push_back(std::move(d));
  }
  Json out{{"host", view.host}, {"source", view.inventory.source}, {"devices", devices}};
  if (!view.inventory.notes.empty()) out["notes"] = view.inventory.notes;
  return out;
}

}  // namespace lote::control
