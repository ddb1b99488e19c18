// Shared pieces of the C++ load clients in bench/ (bench/control, bench/jobs):
// where to send requests (endpoint + credentials), one SigV4-signing
// keep-alive connection per thread, and latency percentiles. The same code
// measures lote and moto_server, so the client's own cost is equal for both.
// Thread safety: free functions are thread-safe; an ApiClient is per thread.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/api_client.h"
#include "common/json.h"
#include "common/status.h"

namespace lote::bench {

// An AWS-compatible endpoint and the credentials to sign for it (moto accepts
// any; lote's are in $LOTE_HOME/credentials).
struct Target {
  std::string endpoint;
  std::string key = "bench";
  std::string secret = "bench";
  std::string region = "us-east-1";
};

// --endpoint (required), --key, --secret, --region.
void AddTargetOptions(CLI::App& app, Target* target);

// One keep-alive connection that signs every request.
Result<std::unique_ptr<cli::ApiClient>> Connect(const Target& target);

// Runs body(index, client) on `clients` threads at once, each with its own
// connection, and joins them. Fails if a connection cannot be made (no body
// runs then).
Status RunOnClients(const Target& target, int clients,
                    const std::function<void(int, cli::ApiClient&)>& body);

// p50/p99/max of latencies in milliseconds.
struct LatencySummary {
  size_t count = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
};
// The value below which a fraction p of `sorted` lies (0 for none).
double Percentile(const std::vector<double>& sorted, double p);
LatencySummary Summarize(std::vector<double> ms);
Json ToJson(const LatencySummary& s);

}  // namespace lote::bench
