// JobLoopMetrics: the job loop's series in a metrics registry (the server's
// /metrics, docs/metrics.md): jobs per queue and status, pass and scheduling
// time, SubmitJob latency, backend launches and failures. The counters are
// updated where the work happens (the loop, its launches, SubmitJob).
//
// Thread safety: as metrics::Registry; SetJobCount is called under the job
// loop's lock (its gauge map is guarded by it).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "common/metrics.h"
#include "control/job_model.h"

namespace lote::control {

class JobLoopMetrics {
 public:
  // `registry` outlives this object.
  explicit JobLoopMetrics(metrics::Registry* registry);

  metrics::Histogram* pass_seconds() const { return pass_seconds_; }
  metrics::Histogram* decide_seconds() const { return decide_seconds_; }
  metrics::Histogram* submit_seconds() const { return submit_seconds_; }
  // lote_jobs{queue, status} = count.
  void SetJobCount(const std::string& queue_arn, JobStatus status, int64_t count);
  // Every lote_jobs series to 0 (before they are set again).
  void ClearJobCounts();
  // lote_job_loop_jobs_in_memory: the jobs the loop holds (the unfinished
  // ones, and finished ones until their end is committed).
  void SetJobsInMemory(int64_t count) { jobs_in_memory_->Set(count); }
  // One gang handed to `backend`; failed: the backend refused it.
  void CountLaunch(const std::string& backend, bool failed);

 private:
  metrics::Registry* registry_;
  metrics::Histogram* pass_seconds_;
  metrics::Histogram* decide_seconds_;
  metrics::Histogram* submit_seconds_;
  metrics::Gauge* jobs_in_memory_;
  std::map<std::pair<std::string, JobStatus>, metrics::Gauge*> job_counts_;
};

}  // namespace lote::control
