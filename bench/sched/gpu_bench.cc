// gpu_bench: the scheduler and accelerators (issue 40).
//
// 1. Placements per second of sched::Decide with 1,000 hosts x 8 GPUs (8,000
//    one-GPU jobs, best fit over a host's devices) against the same jobs and
//    instances without devices, in the same run; prints the ratio.
// 2. A stream of mixed 1/2/4/8-GPU jobs over 16 simulated 8-GPU hosts, played
//    in simulated time twice on the same input: placed by sched::Decide (best
//    fit, islands, reservations for the blocked head job) and by first fit
//    (the lowest host with room, lowest devices, FIFO with backfill). Prints
//    the capacity used (GPU-hours from the first arrival to the last end) and
//    the mean wait of the 8-GPU jobs, and lote / first fit for each.
//
// Usage: gpu_bench [--repeat N] [--stream-jobs N] [--seed S]
#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "sched/scheduler.h"

namespace {

using namespace lote::sched;  // NOLINT: a benchmark's own file

constexpr int64_t kNow = 1'700'000'000'000;
constexpr int32_t kGpus = 8;

ComputeEnvironment Environment(const std::string& name, int hosts, bool devices, Snapshot* s) {
  ComputeEnvironment ce;
  ce.name = name;
  ce.instance_type = {"p4d.24xlarge", Resources{96000, 1179648, devices ? kGpus : 0},
                      devices ? "gpu" : ""};
  ce.max_vcpus = 96LL * hosts;
  for (int i = 0; i < hosts; ++i) {
    Instance inst = MakeIdleInstance("i-" + std::to_string(i), ce.instance_type.shape, kNow);
    if (devices) {
      Host h;
      h.name = "h-" + std::to_string(i);
      h.devices = kGpus;
      h.free_devices = (uint64_t{1} << kGpus) - 1;
      h.island = {0, 0, 0, 0, 1, 1, 1, 1};
      s->hosts.push_back(h);
      inst.host = h.name;
      inst.free_devices = 0;
    }
    ce.instances.push_back(inst);
  }
  return ce;
}

double MedianMs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double PlacementsPerSecond(bool devices, int repeat, size_t* placed) {
  Snapshot s;
  s.compute_environments.push_back(Environment("ce", 1000, devices, &s));
  JobQueue q;
  q.name = "q";
  q.compute_environments = {"ce"};
  s.queues.push_back(q);
  for (int j = 0; j < 8000; ++j) {
    Job job;
    job.id = "j" + std::to_string(j);
    job.queue = "q";
    job.submit_order = j;
    job.nodes = {NodeRange{1, Resources{1000, 4096, devices ? 1 : 0}, devices ? "gpu" : ""}};
    s.jobs.push_back(job);
  }
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    auto d = Decide(s, kNow);
    auto t1 = std::chrono::steady_clock::now();
    if (!d.ok()) {
      std::fprintf(stderr, "Decide: %s\n", d.status().ToString().c_str());
      std::exit(1);
    }
    *placed = d->placements.size();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return static_cast<double>(*placed) / (MedianMs(ms) / 1000.0);
}

struct StreamJob {
  int64_t arrive_s = 0;
  int64_t run_s = 0;
  int32_t gpus = 1;
  int64_t start_s = -1;
  int32_t host = -1;
  uint64_t devices = 0;
};

std::vector<StreamJob> MakeStream(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::discrete_distribution<int> size({40, 25, 20, 15});
  std::exponential_distribution<double> gap(1.0 / 90.0);    // seconds between arrivals: ~90% load
  std::exponential_distribution<double> run(1.0 / 3600.0);  // mean one hour
  std::vector<StreamJob> out;
  double t = 0;
  for (int i = 0; i < n; ++i) {
    t += gap(rng);
    StreamJob j;
    j.arrive_s = static_cast<int64_t>(t);
    j.run_s = 60 + static_cast<int64_t>(run(rng));
    j.gpus = 1 << size(rng);
    out.push_back(j);
  }
  return out;
}

struct StreamResult {
  double gpu_hours = 0;      // 16 x 8 GPUs from the first arrival to the last end
  double wait8_s = 0;        // mean wait of the 8-GPU jobs
  double busy_fraction = 0;  // GPU-hours the jobs ran / gpu_hours
};

// Plays the stream; `lote` chooses with sched::Decide, else first fit.
StreamResult Play(std::vector<StreamJob> jobs, int hosts, bool lote) {
  std::vector<uint64_t> free(hosts, (uint64_t{1} << kGpus) - 1);
  std::vector<int32_t> waiting;  // arrival order
  size_t next = 0;
  int64_t now = 0;
  std::multimap<int64_t, int32_t> ends;
  size_t done = 0;
  while (done < jobs.size()) {
    // Next event: an arrival or an end.
    int64_t t_arrive = next < jobs.size() ? jobs[next].arrive_s : INT64_MAX;
    int64_t t_end = ends.empty() ? INT64_MAX : ends.begin()->first;
    now = std::min(t_arrive, t_end);
    while (next < jobs.size() && jobs[next].arrive_s == now) waiting.push_back(next++);
    while (!ends.empty() && ends.begin()->first == now) {
      StreamJob& j = jobs[ends.begin()->second];
      free[j.host] |= j.devices;
      ends.erase(ends.begin());
      ++done;
    }
    auto start = [&](int32_t k, int32_t host, uint64_t devices) {
      jobs[k].start_s = now;
      jobs[k].host = host;
      jobs[k].devices = devices;
      free[host] &= ~devices;
      ends.emplace(now + jobs[k].run_s, k);
    };
    std::vector<int32_t> still;
    if (lote) {
      Snapshot s;
      ComputeEnvironment ce = Environment("ce", hosts, true, &s);
      for (int h = 0; h < hosts; ++h) {
        s.hosts[h].free_devices = free[h];
        const int32_t held = kGpus - std::popcount(free[h]);
        ce.instances[h].available.accelerators = kGpus - held;
        ce.instances[h].available.milli_vcpu -= held * 1000;
        if (held > 0) ce.instances[h].idle_since_ms = Instance::kBusy;
      }
      s.compute_environments.push_back(ce);
      JobQueue q;
      q.name = "q";
      q.compute_environments = {"ce"};
      s.queues.push_back(q);
      for (int32_t k : waiting) {
        Job job;
        job.id = std::to_string(k);
        job.queue = "q";
        job.submit_order = k;
        job.nodes = {NodeRange{1, Resources{jobs[k].gpus * 1000, 1024, jobs[k].gpus}, "gpu"}};
        s.jobs.push_back(job);
      }
      auto d = Decide(s, kNow + now * 1000);
      if (!d.ok()) {
        std::fprintf(stderr, "Decide: %s\n", d.status().ToString().c_str());
        std::exit(1);
      }
      std::vector<char> placed(jobs.size(), 0);
      for (const Placement& p : d->placements) {
        const int32_t k = std::stoi(p.job_id);
        const int32_t h = std::stoi(p.nodes[0].instance_id.substr(2));
        uint64_t mask = 0;
        for (int32_t dev : p.nodes[0].devices) mask |= uint64_t{1} << dev;
        start(k, h, mask);
        placed[k] = 1;
      }
      for (int32_t k : waiting)
        if (!placed[k]) still.push_back(k);
    } else {
      for (int32_t k : waiting) {
        bool ok = false;
        for (int h = 0; h < hosts && !ok; ++h) {
          if (std::popcount(free[h]) < jobs[k].gpus) continue;
          uint64_t mask = 0, f = free[h];
          for (int i = 0; i < jobs[k].gpus; ++i) {
            const uint64_t bit = f & (~f + 1);
            mask |= bit;
            f &= ~bit;
          }
          start(k, h, mask);
          ok = true;
        }
        if (!ok) still.push_back(k);
      }
    }
    waiting = std::move(still);
  }
  StreamResult r;
  int64_t last_end = 0, used = 0, waits = 0, n8 = 0;
  for (const StreamJob& j : jobs) {
    last_end = std::max(last_end, j.start_s + j.run_s);
    used += j.gpus * j.run_s;
    if (j.gpus == 8) {
      waits += j.start_s - j.arrive_s;
      ++n8;
    }
  }
  const int64_t span = last_end - jobs.front().arrive_s;
  r.gpu_hours = static_cast<double>(hosts) * kGpus * static_cast<double>(span) / 3600.0;
  r.wait8_s = n8 == 0 ? 0 : static_cast<double>(waits) / static_cast<double>(n8);
  r.busy_fraction = static_cast<double>(used) / 3600.0 / r.gpu_hours;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5, stream_jobs = 2000;
  uint64_t seed = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--repeat")) repeat = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--stream-jobs")) stream_jobs = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seed")) seed = std::strtoull(argv[i + 1], nullptr, 10);
  }
  size_t placed_gpu = 0, placed_cpu = 0;
  const double cpu = PlacementsPerSecond(false, repeat, &placed_cpu);
  const double gpu = PlacementsPerSecond(true, repeat, &placed_gpu);
  std::printf(
      "placements/s, 1000 hosts x 8 GPUs, 8000 jobs: without devices %.0f (%zu placed), "
      "with 1 GPU each %.0f (%zu placed): ratio %.2fx (goal >= 0.8x)\n",
      cpu, placed_cpu, gpu, placed_gpu, gpu / cpu);
  std::vector<StreamJob> stream = MakeStream(stream_jobs, seed);
  StreamResult first = Play(stream, 16, false);
  StreamResult best = Play(stream, 16, true);
  std::printf("stream of %d jobs (1/2/4/8 GPUs 40/25/20/15%%) over 16 x 8 GPUs, seed %llu:\n",
              stream_jobs, static_cast<unsigned long long>(seed));
  std::printf("  first fit: %.0f GPU-hours of capacity (busy %.1f%%), 8-GPU jobs wait %.0f s\n",
              first.gpu_hours, 100 * first.busy_fraction, first.wait8_s);
  std::printf("  lote:      %.0f GPU-hours of capacity (busy %.1f%%), 8-GPU jobs wait %.0f s\n",
              best.gpu_hours, 100 * best.busy_fraction, best.wait8_s);
  std::printf("  lote / first fit: GPU-hours %.3fx, 8-GPU mean wait %.3fx (goal: both < 1)\n",
              best.gpu_hours / first.gpu_hours,
              first.wait8_s > 0 ? best.wait8_s / first.wait8_s : 0.0);
  return 0;
}
