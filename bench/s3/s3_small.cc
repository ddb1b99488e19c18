// bench/s3/s3_small: small-object PutObject and GetObject rates of an S3
// endpoint with a C++ client (objstore::S3Store: libcurl, SigV4, Content-MD5
// and ETag checks), so that the server, not the client, is what is measured
// (boto3 issues at most about 2,000 such calls a second on this machine).
// Prints one line: "put_ops_per_s get_ops_per_s".
// Usage: s3_small ENDPOINT KEY SECRET BUCKET OPS THREADS SIZE
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "objstore/s3_store.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: %s ENDPOINT KEY SECRET BUCKET OPS THREADS SIZE\n", argv[0]);
    return 2;
  }
  lote::objstore::S3Config config;
  config.endpoint = argv[1];
  config.region = "us-east-1";
  config.credentials = {argv[2], argv[3], ""};
  config.max_attempts = 1;
  const std::string bucket = argv[4];
  const int ops = std::atoi(argv[5]);
  const int threads = std::atoi(argv[6]);
  const std::string body(static_cast<size_t>(std::atoi(argv[7])), 'x');
  auto store = lote::objstore::S3Store::Open(bucket, "small", config);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  if (auto st = (*store)->CreateBucket(); !st.ok()) {
    std::fprintf(stderr, "create bucket: %s\n", st.ToString().c_str());
    return 1;
  }
  std::atomic<int> failures{0};
  auto run = [&](bool put) {
    std::atomic<int> next{0};
    std::vector<std::thread> pool;
    const auto start = Clock::now();
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (int i = next++; i < ops; i = next++) {
          const std::string key = "obj" + std::to_string(i);
          if (put) {
            if (!(*store)->PutBytes(key, body).ok()) ++failures;
          } else {
            auto got = (*store)->GetBytes(key);
            if (!got.ok() || got->size() != body.size()) ++failures;
          }
        }
      });
    }
    for (std::thread& t : pool) t.join();
    return ops / Seconds(start);
  };
  const double put = run(true);
  const double get = run(false);
  if (failures > 0) {
    std::fprintf(stderr, "%d calls failed\n", failures.load());
    return 1;
  }
  std::printf("%.0f %.0f\n", put, get);
  return 0;
}
