#include "control/job_metrics.h"

namespace lote::control {
namespace {

std::string QueueName(const std::string& arn) {
  const size_t slash = arn.rfind('/');
  return slash == std::string::npos ? arn : arn.substr(slash + 1);
}

}  // namespace

JobLoopMetrics::JobLoopMetrics(metrics::Registry* registry)
    : registry_(registry),
      pass_seconds_(registry->GetHistogram(
          "lote_job_loop_pass_seconds",
          "Wall time of one job loop pass (events, timeouts, dependencies, scheduling).",
          metrics::LatencyBuckets())),
      decide_seconds_(registry->GetHistogram(
          "lote_scheduler_decide_seconds",
          "Wall time of one scheduling policy run (sched::Decide); it runs only when "
          "something it reads changed.",
          metrics::LatencyBuckets())),
      submit_seconds_(registry->GetHistogram("lote_submit_job_seconds",
                                             "SubmitJob latency in the server, commit included.",
                                             metrics::LatencyBuckets())),
      jobs_in_memory_(registry->GetGauge(
          "lote_job_loop_jobs_in_memory",
          "Jobs the job loop holds in memory: the unfinished ones, and finished ones until "
          "their end is committed (the rest are read from the store).")) {}

void JobLoopMetrics::SetJobCount(const std::string& queue_arn, JobStatus status, int64_t count) {
  auto [it, added] = job_counts_.try_emplace({queue_arn, status}, nullptr);
  if (added) {
    it->second = registry_->GetGauge(
        "lote_jobs", "Jobs kept by the server per queue and status (array parents included).",
        {{"queue", QueueName(queue_arn)}, {"status", std::string(JobStatusName(status))}});
  }
  it->second->Set(count);
}

void JobLoopMetrics::ClearJobCounts() {
  for (auto& [key, gauge] : job_counts_) gauge->Set(0);
}

void JobLoopMetrics::CountLaunch(const std::string& backend, bool failed) {
  registry_
      ->GetCounter("lote_backend_launches_total", "Gangs handed to a compute backend.",
                   {{"backend", backend}})
      ->Add();
  if (failed) {
    registry_
        ->GetCounter("lote_backend_launch_failures_total",
                     "Gangs a compute backend could not start.", {{"backend", backend}})
        ->Add();
  }
}

}  // namespace lote::control
