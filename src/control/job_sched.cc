#include "control/job_sched.h"

#include <string>

#include "common/ids.h"

namespace lote::control {
namespace {

sched::NodeRange NodeShape(const ContainerSpec& c, int32_t count) {
  const AcceleratorRequest a = c.Accelerators();
  return sched::NodeRange{count, sched::Resources{c.MilliVcpu(), c.MemoryMib(), a.count}, a.kind};
}

}  // namespace

Result<sched::Job> SchedulerJob(const Job& job, int64_t submit_order) {
  if (job.IsArrayParent()) {
    return Status::FailedPrecondition("array job " + job.id +
                                      " is not scheduled itself: schedule its children");
  }
  if (job.status != JobStatus::kRunnable) {
    return Status::FailedPrecondition("job " + job.id + " is " +
                                      std::string(JobStatusName(job.status)) +
                                      ": only RUNNABLE jobs are scheduled");
  }
  sched::Job s;
  s.id = job.id;
  Result<Arn> queue = Arn::Parse(job.queue_arn);
  s.queue = queue.ok() ? queue->ResourceName() : job.queue_arn;
  s.submit_order = submit_order;
  s.submitted_at_ms = job.created_at;
  s.share_identifier = job.share_identifier;
  s.scheduling_priority = job.scheduling_priority.value_or(0);
  if (job.node_properties) {
    for (const NodeRange& r : job.node_properties->ranges) {
      sched::NodeRange range = NodeShape(r.container, r.end - r.start + 1);
      if (!s.nodes.empty() && s.nodes.back().each == range.each &&
          s.nodes.back().accelerator_kind == range.accelerator_kind) {
        s.nodes.back().count += range.count;
      } else {
        s.nodes.push_back(std::move(range));
      }
    }
  } else if (job.container) {
    s.nodes.push_back(NodeShape(*job.container, 1));
  } else {
    return Status::FailedPrecondition("job " + job.id +
                                      " has neither a container nor node properties");
  }
  for (const auto& [name, quantity] : ConsumableUnits(job))
    s.consumables.push_back(sched::ConsumableNeed{name, quantity});
  return s;
}

Result<JobEvent> ScheduledEvent(
    const sched::Placement& placement, const std::vector<std::string>& launched_instance_ids,
    const std::function<std::string(const std::string& instance_id)>& private_ipv4_of,
    int64_t at_ms) {
  std::vector<ScheduledNode> nodes;
  nodes.reserve(placement.nodes.size());
  for (const sched::NodePlacement& n : placement.nodes) {
    ScheduledNode node;
    node.node_index = n.node_index;
    if (n.launch_index >= 0) {
      if (static_cast<size_t>(n.launch_index) >= launched_instance_ids.size() ||
          launched_instance_ids[static_cast<size_t>(n.launch_index)].empty()) {
        return Status::InvalidArgument(
            "placement of job " + placement.job_id + ": node " + std::to_string(n.node_index) +
            " needs launch " + std::to_string(n.launch_index) + ", which has no instance id yet");
      }
      node.instance_id = launched_instance_ids[static_cast<size_t>(n.launch_index)];
    } else {
      node.instance_id = n.instance_id;
    }
    node.private_ipv4 = private_ipv4_of ? private_ipv4_of(node.instance_id) : "";
    node.devices = n.devices;
    nodes.push_back(std::move(node));
  }
  return JobEvent::Scheduled(placement.compute_environment, std::move(nodes), at_ms);
}

}  // namespace lote::control
