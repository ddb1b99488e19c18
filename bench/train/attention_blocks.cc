// Attention at one thread (issue 23): the engine's AttentionForward / AttentionBackward
// (register tiles, tile_gemm.h) against the kernel they replaced (OpenBLAS sgemm per
// 128-row query block, kept below as the peer), on the 60 M-class model's shape (micro
// batch 4 x seq 256, 8 heads of 64), timed alternately, best of --repeats; the backward is
// swept over its query-block size (the dk/dv accumulation block), which is how
// kAttnBlock was chosen. GFLOP/s count the causal work only (q.k and p.v for keys <= the
// query, twice that plus the recomputed scores in backward), the same for both. Times
// are the thread's CPU time (see Seconds).
//
// usage: attention_blocks [--repeats R] [--batch B] [--seq T] [--heads H] [--head-dim D]
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "engine/cpu_kernels.h"

namespace {

using lote::engine::FastExp;
using lote::engine::Gemm;

// The peer: the blockwise kernel before the register tiles (OpenBLAS per block).
constexpr int64_t kPeerBlock = 128;

void PeerForward(float* out, float* lse, float* P, const float* qkv, int64_t B, int64_t T,
                 int64_t nh, int64_t hd) {
  const int64_t D = 3 * nh * hd, Da = nh * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      const float* q = qkv + b * T * D + h * hd;
      const float* k = qkv + b * T * D + Da + h * hd;
      const float* v = qkv + b * T * D + 2 * Da + h * hd;
      float* o = out + b * T * Da + h * hd;
      float* L = lse + (b * nh + h) * T;
      for (int64_t r0 = 0; r0 < T; r0 += kPeerBlock) {
        const int64_t r1 = std::min(T, r0 + kPeerBlock), m = r1 - r0;
        Gemm(false, true, m, r1, hd, scale, q + r0 * D, D, k, D, 0.0f, P, r1);
        for (int64_t i = r0; i < r1; ++i) {
          float* p = P + (i - r0) * r1;
          float mx = p[0];
          for (int64_t j = 1; j <= i; ++j) mx = std::max(mx, p[j]);
          float sum = 0.0f;
          for (int64_t j = 0; j <= i; ++j) {
            p[j] = FastExp(p[j] - mx);
            sum += p[j];
          }
          const float inv = 1.0f / sum;
          for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
          for (int64_t j = i + 1; j < r1; ++j) p[j] = 0.0f;
          L[i] = mx + std::log(sum);
        }
        Gemm(false, false, m, hd, r1, 1.0f, P, r1, v, D, 0.0f, o + r0 * Da, Da);
      }
    }
  }
}

void PeerBackward(float* dqkv, float* P, const float* dout, const float* qkv, const float* out,
                  const float* lse, int64_t B, int64_t T, int64_t nh, int64_t hd) {
  const int64_t D = 3 * nh * hd, Da = nh * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* dS = P + kPeerBlock * T;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      const float* q = qkv + b * T * D + h * hd;
      const float* k = qkv + b * T * D + Da + h * hd;
      const float* v = qkv + b * T * D + 2 * Da + h * hd;
      float* dq = dqkv + b * T * D + h * hd;
      float* dk = dqkv + b * T * D + Da + h * hd;
      float* dv = dqkv + b * T * D + 2 * Da + h * hd;
      const float* O = out + b * T * Da + h * hd;
      const float* dO = dout + b * T * Da + h * hd;
      const float* L = lse + (b * nh + h) * T;
      for (int64_t r0 = 0; r0 < T; r0 += kPeerBlock) {
        const int64_t r1 = std::min(T, r0 + kPeerBlock), m = r1 - r0;
        Gemm(false, true, m, r1, hd, scale, q + r0 * D, D, k, D, 0.0f, P, r1);
        Gemm(false, true, m, r1, hd, 1.0f, dO + r0 * Da, Da, v, D, 0.0f, dS, r1);
        for (int64_t i = r0; i < r1; ++i) {
          float* p = P + (i - r0) * r1;
          float* d = dS + (i - r0) * r1;
          float drow = 0.0f;
          for (int64_t c = 0; c < hd; ++c) drow += dO[i * Da + c] * O[i * Da + c];
          for (int64_t j = 0; j <= i; ++j) {
            p[j] = FastExp(p[j] - L[i]);
            d[j] = p[j] * (d[j] - drow);
          }
          for (int64_t j = i + 1; j < r1; ++j) p[j] = d[j] = 0.0f;
        }
        Gemm(false, false, m, hd, r1, scale, dS, r1, k, D, 1.0f, dq + r0 * D, D);
        Gemm(true, false, r1, hd, m, scale, dS, r1, q + r0 * D, D, 1.0f, dk, D);
        Gemm(true, false, r1, hd, m, 1.0f, P, r1, dO + r0 * Da, Da, 1.0f, dv, D);
      }
    }
  }
}

int64_t Flag(int argc, char** argv, const char* name, int64_t def) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
  }
  return def;
}

// The calling thread's CPU seconds for f (everything here runs on one thread): on a
// shared machine the time slices other processes take are not counted, so the best of a
// few rounds is steady where wall-clock time swings several times over.
template <typename F>
double Seconds(F&& f) {
  timespec t0{}, t1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
  f();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
  return static_cast<double>(t1.tv_sec - t0.tv_sec) +
         1e-9 * static_cast<double>(t1.tv_nsec - t0.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  const int repeats = static_cast<int>(Flag(argc, argv, "--repeats", 5));
  const int64_t B = Flag(argc, argv, "--batch", 4), T = Flag(argc, argv, "--seq", 256);
  const int64_t nh = Flag(argc, argv, "--heads", 8), hd = Flag(argc, argv, "--head-dim", 64);
  lote::engine::InitCpuBackend(1);
  const int64_t D = 3 * nh * hd, Da = nh * hd;
  std::vector<float> qkv(static_cast<size_t>(B * T * D)), dout(static_cast<size_t>(B * T * Da));
  uint32_t seed = 12345;
  auto uniform = [&seed] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(seed >> 8) / 16777216.0f * 2.0f - 1.0f;
  };
  for (float& x : qkv) x = uniform();
  for (float& x : dout) x = uniform();
  std::vector<float> out(static_cast<size_t>(B * T * Da)), lse(static_cast<size_t>(B * nh * T));
  std::vector<float> dqkv(qkv.size());
  const std::vector<int64_t> blocks = {24, 48, 96, 144, 192, 256};
  int64_t scratch = std::max(lote::engine::AttentionForwardScratch(T, hd), 2 * kPeerBlock * T);
  for (int64_t b : blocks)
    scratch = std::max(scratch, lote::engine::AttentionBackwardScratch(T, hd, b));
  std::vector<float> work(static_cast<size_t>(scratch));

  // Causal flops: sum over queries of (i + 1) keys, 2 * hd flops per key per GEMM.
  const double pairs = static_cast<double>(B * nh) * static_cast<double>(T) * (T + 1) / 2.0;
  const double fwd_flops = 2.0 * 2.0 * hd * pairs, bwd_flops = 5.0 * 2.0 * hd * pairs;
  auto fwd_this = [&] {
    lote::engine::AttentionForward(out.data(), lse.data(), work.data(), qkv.data(), B, T, nh, nh,
                                   hd);
  };
  auto fwd_peer = [&] {
    PeerForward(out.data(), lse.data(), work.data(), qkv.data(), B, T, nh, hd);
  };
  auto bwd_this = [&](int64_t block) {
    lote::engine::AttentionBackward(dqkv.data(), work.data(), dout.data(), qkv.data(), out.data(),
                                    lse.data(), B, T, nh, nh, hd, block);
  };
  auto bwd_peer = [&] {
    PeerBackward(dqkv.data(), work.data(), dout.data(), qkv.data(), out.data(), lse.data(), B, T,
                 nh, hd);
  };
  std::printf("attention, one thread: batch %lld, seq %lld, %lld heads of %lld; best of %d\n",
              static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(nh),
              static_cast<long long>(hd), repeats);
  // MFU's denominator, the 1024^3 probe, timed between the attention runs.
  constexpr int64_t kProbe = 1024;
  std::vector<float> pa(kProbe * kProbe, 0.5f), pb(kProbe * kProbe, 0.25f), pc(kProbe * kProbe);
  double probe = 1e30;
  auto time_probe = [&] {
    probe = std::min(probe, Seconds([&] {
                       Gemm(false, true, kProbe, kProbe, kProbe, 1.0f, pa.data(), kProbe, pb.data(),
                            kProbe, 0.0f, pc.data(), kProbe);
                     }));
  };
  time_probe();
  fwd_this();
  fwd_peer();
  double ft = 1e30, fp = 1e30;
  for (int r = 0; r < repeats; ++r) {
    ft = std::min(ft, Seconds(fwd_this));
    fp = std::min(fp, Seconds(fwd_peer));
    time_probe();
  }
  std::printf(
      "forward   register tiles %7.2f ms %6.1f GFLOP/s | OpenBLAS blocks of 128 %7.2f ms "
      "%6.1f GFLOP/s | peer / this %.2fx\n",
      ft * 1e3, fwd_flops / ft / 1e9, fp * 1e3, fwd_flops / fp / 1e9, fp / ft);
  // The peer's lse and out are the inputs of every backward below.
  fwd_peer();
  // Every block size and the peer in each round (rounds interleaved, so a change of load
  // during the sweep reaches every block alike); best of the rounds.
  std::vector<double> bt(blocks.size(), 1e30);
  double bp = 1e30;
  for (int64_t block : blocks) bwd_this(block);
  bwd_peer();
  for (int r = 0; r < repeats; ++r) {
    for (size_t i = 0; i < blocks.size(); ++i) {
      bt[i] = std::min(bt[i], Seconds([&] { bwd_this(blocks[i]); }));
    }
    bp = std::min(bp, Seconds(bwd_peer));
    time_probe();
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::printf(
        "backward  block %3lld %7.2f ms %6.1f GFLOP/s | OpenBLAS blocks of 128 %7.2f ms "
        "%6.1f GFLOP/s | peer / this %.2fx%s\n",
        static_cast<long long>(blocks[i]), bt[i] * 1e3, bwd_flops / bt[i] / 1e9, bp * 1e3,
        bwd_flops / bp / 1e9, bp / bt[i],
        blocks[i] == lote::engine::kAttnBlock ? "  (kAttnBlock)" : "");
  }
  const double probe_gflops = 2.0 * kProbe * kProbe * kProbe / probe / 1e9;
  std::printf(
      "probe 1024^3 sgemm (best, timed between the runs above) %.1f GFLOP/s; forward "
      "register tiles %.0f%% of it, OpenBLAS blocks %.0f%%\n",
      probe_gflops, 100.0 * fwd_flops / ft / 1e9 / probe_gflops,
      100.0 * fwd_flops / fp / 1e9 / probe_gflops);
  return 0;
}
