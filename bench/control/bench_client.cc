#include "bench_client.h"

#include <algorithm>
#include <thread>

namespace lote::bench {

void AddTargetOptions(CLI::App& app, Target* target) {
  app.add_option("--endpoint", target->endpoint, "http://HOST:PORT of lote or moto_server")
      ->required();
  app.add_option("--key", target->key, "access key id to sign with");
  app.add_option("--secret", target->secret, "secret access key to sign with");
  app.add_option("--region", target->region);
}

Result<std::unique_ptr<cli::ApiClient>> Connect(const Target& target) {
  cli::ClientOptions options;
  options.endpoint = target.endpoint;
  options.region = target.region;
  options.credentials = sigv4::Credentials{target.key, target.secret, ""};
  return cli::ApiClient::Create(options);
}

Status RunOnClients(const Target& target, int clients,
                    const std::function<void(int, cli::ApiClient&)>& body) {
  std::vector<std::unique_ptr<cli::ApiClient>> connections;
  for (int i = 0; i < clients; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<cli::ApiClient> c, Connect(target));
    connections.push_back(std::move(c));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] { body(i, *connections[static_cast<size_t>(i)]); });
  }
  for (auto& t : threads) t.join();
  return Status();
}

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  return sorted[std::min(sorted.size() - 1, static_cast<size_t>(p * sorted.size()))];
}

LatencySummary Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  LatencySummary s;
  s.count = ms.size();
  s.p50_ms = Percentile(ms, 0.50);
  s.p99_ms = Percentile(ms, 0.99);
  s.max_ms = ms.empty() ? 0.0 : ms.back();
  return s;
}

Json ToJson(const LatencySummary& s) {
  return Json{{"count", s.count}, {"p50_ms", s.p50_ms}, {"p99_ms", s.p99_ms}, {"max_ms", s.max_ms}};
}

}  // namespace lote::bench
