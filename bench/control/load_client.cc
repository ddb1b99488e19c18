// Load client for bench/control: N threads, each with one keep-alive SigV4
// connection, alternating RegisterJobDefinition and DescribeJobQueues for a
// fixed time. Prints one JSON line: requests, errors, requests/s, p50/p99 ms.
// The same binary measures lote and moto_server, so the client cost is equal.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/api_client.h"

int main(int argc, char** argv) {
  CLI::App app{"lote control-plane load client"};
  std::string endpoint, key = "bench", secret = "bench", region = "us-east-1";
  int clients = 8;
  int write_every = 2;  // 1 RegisterJobDefinition per `write_every` requests
  double seconds = 5;
  app.add_option("--endpoint", endpoint)->required();
  app.add_option("--key", key);
  app.add_option("--secret", secret);
  app.add_option("--region", region);
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
  std::vector<std::thread> threads;
  for (int t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      lote::cli::ClientOptions options;
      options.endpoint = endpoint;
      options.region = region;
      options.credentials = lote::sigv4::Credentials{key, secret, ""};
      auto client = lote::cli::ApiClient::Create(options);
      if (!client.ok()) {
        errors++;
        return;
      }
      lote::Json jd = {
          {"jobDefinitionName", ""},
          {"type", "container"},
          {"containerProperties",
           {{"image", "busybox"}, {"vcpus", 1}, {"memory", 128}, {"command", {"echo", "hello"}}}}};
      auto& lat = latencies[static_cast<size_t>(t)];
      for (int64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
        auto start = std::chrono::steady_clock::now();
        lote::Result<lote::Json> r = lote::Status::Internal("unset");
        if (n % write_every == 0) {
          jd["jobDefinitionName"] = "bench-" + std::to_string(t) + "-" + std::to_string(n % 64);
          r = (*client)->Batch("POST", "/v1/registerjobdefinition", jd);
        } else {
          r = (*client)->Batch("POST", "/v1/describejobqueues", lote::Json::object());
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
  }
  auto t0 = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& th : threads) th.join();
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  lote::Json out = {{"requests", all.size()},
                    {"errors", errors.load()},
                    {"seconds", elapsed},
                    {"rps", static_cast<double>(all.size()) / elapsed},
                    {"p50_ms", pct(0.50)},
                    {"p99_ms", pct(0.99)},
                    {"first_error", first_error.substr(0, 200)}};
  std::printf("%s\n", out.dump(-1, ' ', false, lote::Json::error_handler_t::replace).c_str());
  return all.empty() ? 1 : 0;
}
