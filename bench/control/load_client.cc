// Load client for bench/control: N threads, each with one keep-alive SigV4
// connection, alternating RegisterJobDefinition and DescribeJobQueues for a
// fixed time. Prints one JSON line: requests, errors, requests/s, p50/p99 ms.
// The same binary measures lote and moto_server, so the client cost is equal.
#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_client.h"

int main(int argc, char** argv) {
  CLI::App app{"lote control-plane load client"};
  lote::bench::Target target;
  int clients = 8;
  int write_every = 2;  // 1 RegisterJobDefinition per `write_every` requests
  double seconds = 5;
  lote::bench::AddTargetOptions(app, &target);
  app.add_option("--clients", clients);
  app.add_option("--seconds", seconds);
  app.add_option("--write-every", write_every,
                 "one RegisterJobDefinition per N requests, the rest DescribeJobQueues (2: 1:1)");
  CLI11_PARSE(app, argc, argv);

  std::atomic<bool> stop{false};
  std::atomic<int64_t> errors{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(clients));
  std::string first_error;
  std::mutex error_mu;
  std::thread timer([&] {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    stop = true;
  });
  auto t0 = std::chrono::steady_clock::now();
  lote::Status started =
      lote::bench::RunOnClients(target, clients, [&](int t, lote::cli::ApiClient& client) {
        lote::Json jd = {{"jobDefinitionName", ""},
                         {"type", "container"},
                         {"containerProperties",
                          {{"image", "busybox"},
                           {"vcpus", 1},
                           {"memory", 128},
                           {"command", {"echo", "hello"}}}}};
        auto& lat = latencies[static_cast<size_t>(t)];
        for (int64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
          auto start = std::chrono::steady_clock::now();
          lote::Result<lote::Json> r = lote::Status::Internal("unset");
          if (n % write_every == 0) {
            jd["jobDefinitionName"] = "bench-" + std::to_string(t) + "-" + std::to_string(n % 64);
            r = client.Batch("POST", "/v1/registerjobdefinition", jd);
          } else {
            r = client.Batch("POST", "/v1/describejobqueues", lote::Json::object());
          }
          auto end = std::chrono::steady_clock::now();
          if (!r.ok()) {
            errors++;
            std::lock_guard<std::mutex> lock(error_mu);
            if (first_error.empty()) first_error = r.status().ToString();
            continue;
          }
          lat.push_back(std::chrono::duration<double, std::milli>(end - start).count());
        }
      });
  timer.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!started.ok()) first_error = started.ToString();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  lote::bench::LatencySummary s = lote::bench::Summarize(std::move(all));
  lote::Json out = {{"requests", s.count},
                    {"errors", errors.load()},
                    {"seconds", elapsed},
                    {"rps", static_cast<double>(s.count) / elapsed},
                    {"p50_ms", s.p50_ms},
                    {"p99_ms", s.p99_ms},
                    {"first_error", first_error.substr(0, 200)}};
  std::printf("%s\n", out.dump(-1, ' ', false, lote::Json::error_handler_t::replace).c_str());
  return s.count == 0 ? 1 : 0;
}
