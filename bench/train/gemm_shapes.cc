// GEMM efficiency on the shapes of one training step (issue 23): GFLOP/s of every GEMM
// the 60 M-class model's step runs (hidden 512, MLP 1536, 8 heads of 64, vocabulary
// 32000, micro batch 4 x seq 256 = 1024 rows), through the engine's own Gemm() at the
// thread count given, against the square 1024^3 probe that MFU divides by (the peer,
// timed alternately with each shape), best of --repeats each. Attention's per-(batch, head) GEMMs
// run serially inside the kernel's OpenMP loop, so they are timed on one thread.
//
// usage: gemm_shapes [--threads N] [--repeats R] [--rows N] [--hidden C] [--mlp I]
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "engine/cpu_kernels.h"

namespace {

struct Shape {
  std::string name;
  bool ta, tb;
  int64_t M, N, K;
  bool serial;  // run inside a parallel region (one thread per call)
};

// A shape's operands and one timed call (seconds).
struct Operands {
  explicit Operands(const Shape& s)
      : s(s),
        lda(s.ta ? s.M : s.K),
        ldb(s.tb ? s.K : s.N),
        a(s.M * s.K, 0.5f),
        b(s.K * s.N, 0.25f),
        c(s.M * s.N, 0.0f) {}
  double Once() {
    const auto t0 = std::chrono::steady_clock::now();
    if (s.serial) {
#pragma omp parallel num_threads(1)
      lote::engine::Gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                         c.data(), s.N);
    } else {
      lote::engine::Gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0f, a.data(), lda, b.data(), ldb, 0.0f,
                         c.data(), s.N);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  double Gflops(double seconds) const {
    return 2.0 * static_cast<double>(s.M) * s.N * s.K / seconds / 1e9;
  }
  Shape s;
  int64_t lda, ldb;
  std::vector<float> a, b, c;
};

// The shape and the probe alternately, `repeats` times each after a warm-up, so both
// see the same load (2 shared cores): best GFLOP/s of each.
std::pair<double, double> TimePair(const Shape& shape, Operands& probe, int repeats) {
  Operands x(shape);
  x.Once();
  probe.Once();
  double best_x = 1e30, best_p = 1e30;
  for (int r = 0; r < repeats; ++r) {
    best_x = std::min(best_x, x.Once());
    best_p = std::min(best_p, probe.Once());
  }
  return {x.Gflops(best_x), probe.Gflops(best_p)};
}

int64_t Flag(int argc, char** argv, const char* name, int64_t def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  }
  return def;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = static_cast<int>(Flag(argc, argv, "--threads", 1));
  const int repeats = static_cast<int>(Flag(argc, argv, "--repeats", 5));
  const int64_t N = Flag(argc, argv, "--rows", 1024), C = Flag(argc, argv, "--hidden", 512);
  const int64_t I = Flag(argc, argv, "--mlp", 1536), V = 32000, hd = 64, blk = 128;
  lote::engine::InitCpuBackend(threads);
  const std::vector<Shape> shapes = {
      {"probe 1024^3 (MFU's peak)", false, true, 1024, 1024, 1024, false},
      {"qkv forward", false, true, N, 3 * C, C, false},
      {"qkv dinp", false, false, N, C, 3 * C, false},
      {"qkv dW", true, false, 3 * C, C, N, false},
      {"o forward", false, true, N, C, C, false},
      {"o dinp", false, false, N, C, C, false},
      {"o dW", true, false, C, C, N, false},
      {"gate/up forward", false, true, N, 2 * I, C, false},
      {"gate/up dinp", false, false, N, C, 2 * I, false},
      {"gate/up dW", true, false, 2 * I, C, N, false},
      {"down forward", false, true, N, C, I, false},
      {"down dinp", false, false, N, I, C, false},
      {"down dW", true, false, C, I, N, false},
      {"lm head block forward (512 x 1024)", false, true, 512, 1024, C, false},
      {"lm head block dx", false, false, 512, C, 1024, false},
      {"lm head block dW", true, false, 1024, C, 512, false},
      {"lm head whole forward (512 x 32000)", false, true, 512, V, C, false},
      {"attention S = q k^T (128 x 256, K=64)", false, true, blk, 256, hd, true},
      {"attention O = P v (128 x 64, K=256)", false, false, blk, hd, 256, true},
      {"attention dq = dS k (128 x 64, K=256)", false, false, blk, hd, 256, true},
      {"attention dk = dS^T q (256 x 64, K=128)", true, false, 256, hd, blk, true},
  };
  std::printf("threads %d, rows %lld, hidden %lld, MLP %lld\n", threads, static_cast<long long>(N),
              static_cast<long long>(C), static_cast<long long>(I));
  Operands probe(shapes[0]);
  std::printf("%-42s %8s %8s %8s\n", "shape", "GFLOP/s", "probe", "ratio");
  for (const Shape& s : shapes) {
    const auto [g, p] = TimePair(s, probe, repeats);
    std::printf("%-42s %8.1f %8.1f %7.0f%%   %s%s %lldx%lldx%lld%s\n", s.name.c_str(), g, p,
                100.0 * g / p, s.ta ? "T" : "N", s.tb ? "T" : "N", static_cast<long long>(s.M),
                static_cast<long long>(s.N), static_cast<long long>(s.K),
                s.serial ? " (one thread)" : "");
  }
  return 0;
}
