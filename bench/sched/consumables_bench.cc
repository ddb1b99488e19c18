// consumables_bench: the cost of consumable resources to a scheduling pass
// (issue 42). The same 10,000 RUNNABLE one-vCPU jobs over 1,000 virtual
// instances of 16 vCPUs are decided twice in one run: as plain jobs, and with
// each job needing one unit of one of 20 consumable resources of 200 units
// (so that 4,000 are placed and 6,000 wait for units instead of capacity).
// Prints the median Decide time of each and plain / with consumables (the
// throughput ratio; 1.0 = no cost), and checks that no resource is
// over-committed in the placements. A third run, plain jobs on 250 instances,
// places and keeps waiting as many jobs as the consumables do (waiting for
// capacity): every waiting job gets its statusReason, which is most of the cost.
//
// Usage: consumables_bench [--repeat N] [--jobs N] [--resources N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace {

using namespace lote::sched;  // NOLINT: a benchmark's own file

constexpr int64_t kNow = 1'700'000'000'000;

Snapshot MakeSnapshot(int jobs, int resources, bool consumables, int instances = 1000) {
  Snapshot s;
  ComputeEnvironment ce;
  ce.name = "ce";
  ce.instance_type = {"m5.4xlarge", Resources{16000, 65536, 0}, ""};
  ce.max_vcpus = 16 * instances;
  for (int i = 0; i < instances; ++i)
    ce.instances.push_back(
        MakeIdleInstance("i-" + std::to_string(i), ce.instance_type.shape, kNow));
  s.compute_environments.push_back(ce);
  JobQueue q;
  q.name = "q";
  q.compute_environments = {"ce"};
  s.queues.push_back(q);
  if (consumables)
    for (int r = 0; r < resources; ++r)
      s.consumables.push_back(Consumable{"lic-" + std::to_string(r), 200, 200});
  for (int j = 0; j < jobs; ++j) {
    Job job;
    job.id = "j" + std::to_string(j);
    job.queue = "q";
    job.submit_order = j;
    job.nodes = {NodeRange{1, Resources{1000, 1024, 0}, ""}};
    if (consumables) job.consumables = {ConsumableNeed{"lic-" + std::to_string(j % resources), 1}};
    s.jobs.push_back(job);
  }
  return s;
}

double TimedMs(const Snapshot& s, Decisions* last) {
  auto t0 = std::chrono::steady_clock::now();
  lote::Result<Decisions> d = Decide(s, kNow);
  auto t1 = std::chrono::steady_clock::now();
  if (!d.ok()) {
    std::fprintf(stderr, "Decide: %s\n", d.status().ToString().c_str());
    std::exit(1);
  }
  *last = std::move(*d);
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5, jobs = 10000, resources = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--jobs")) jobs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--resources")) resources = std::atoi(argv[i + 1]);
  }
  Decisions plain_d, with_d, short_d;
  const Snapshot plain = MakeSnapshot(jobs, resources, false);
  const Snapshot with = MakeSnapshot(jobs, resources, true);
  // The same number of jobs placed and waiting, for capacity instead of units.
  const Snapshot short_of_capacity = MakeSnapshot(jobs, resources, false, 250);
  // In turns, so that both see the same load.
  std::vector<double> plain_runs, with_runs, short_runs;
  for (int r = 0; r < repeat; ++r) {
    plain_runs.push_back(TimedMs(plain, &plain_d));
    with_runs.push_back(TimedMs(with, &with_d));
    short_runs.push_back(TimedMs(short_of_capacity, &short_d));
  }
  const double plain_ms = Median(plain_runs);
  const double with_ms = Median(with_runs);
  const double short_ms = Median(short_runs);
  std::map<std::string, int64_t> used;
  for (const Placement& p : with_d.placements)
    used["lic-" + std::to_string(std::atoi(p.job_id.c_str() + 1) % resources)] += 1;
  for (const auto& [name, units] : used) {
    if (units > 200) {
      std::fprintf(stderr, "%s over-committed: %lld of 200\n", name.c_str(),
                   static_cast<long long>(units));
      return 1;
    }
  }
  std::printf("jobs %d, instances 1000 x 16 vCPU, consumable resources %d x 200 units\n", jobs,
              resources);
  std::printf("plain jobs:          %8.1f ms per pass, %zu placed\n", plain_ms,
              plain_d.placements.size());
  std::printf("with consumables:    %8.1f ms per pass, %zu placed, %zu waiting\n", with_ms,
              with_d.placements.size(), with_d.waiting.size());
  std::printf("plain, 250 instances: %8.1f ms per pass, %zu placed, %zu waiting for capacity\n",
              short_ms, short_d.placements.size(), short_d.waiting.size());
  std::printf("pass speed, with consumables / plain: %.2fx (issue: >= 0.8x)\n", plain_ms / with_ms);
  std::printf("pass speed, with consumables / plain with as many waiting: %.2fx\n",
              short_ms / with_ms);
  return 0;
}
