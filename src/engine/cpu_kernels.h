// CPU kernels of the Llama model: each layer is a pair XForward / XBackward of free
// functions over row-major fp32 arrays, with shapes in the comments (N = B*T rows).
// Backward functions ACCUMULATE (+=) into their input-gradient and weight-gradient
// outputs, so residual branches and tied weights add up naturally; callers zero them.
// Threading: OpenMP inside each kernel; OpenBLAS runs single-threaded per call (see
// InitCpuBackend), so there is one thread pool. Kernels never allocate, never fail:
// shapes are the caller's contract (checked when the model's memory is planned).
// A CUDA backend would provide the same signatures over device pointers.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

namespace lote::engine {

// Sets OpenBLAS to one thread per call (lote splits GEMMs across OpenMP threads
// itself) and OpenMP to `threads` (0 = leave the default). Idempotent.
void InitCpuBackend(int threads);
int CpuThreads();

// The kernels OpenBLAS loaded (openblas_get_corename), e.g. "Cooperlake", "Haswell": its
// own choice for this CPU, or the core $OPENBLAS_CORETYPE names.
std::string BlasCoreName();

// Row-major GEMM: C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C. Splits the
// larger output dimension across OpenMP threads unless already inside a parallel region.
void Gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// What a GEMM multiplies: its fp32 operands as they are (Gemm), or its operands rounded to
// bf16 with fp32 sums (bf16 mixed precision: Bf16Gemm, bf16_gemm.h, which uses the CPU's
// bf16 dot-product instruction where there is one).
enum class GemmOperands { kFp32, kBf16 };
// Gemm or Bf16Gemm, as `operands` says; the same arguments.
void GemmOf(GemmOperands operands, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
            float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
            float* C, int64_t ldc);

// exp(x) to ~2 ulp for x in [-87, 88] (clamped outside); a loop over it vectorizes
// (with -fno-trapping-math, which lets the clamps become vector min/max).
// Cephes-style: exp(x) = 2^n * exp(r), r = x - n ln2, |r| <= ln2/2.
inline float FastExp(float x) {
  x = std::min(88.0f, std::max(-87.0f, x));
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return e * std::bit_cast<float>(bits);
}

// out[N,C] = wte[tokens[n], :]; tokens in [0, V).
void EmbeddingForward(float* out, const int32_t* tokens, const float* wte, int64_t N, int64_t C);
// dwte[V,C] += scatter of dout[N,C] by tokens.
void EmbeddingBackward(float* dwte, const float* dout, const int32_t* tokens, int64_t N, int64_t C,
                       int64_t V);

// out[N,C] = inp * rstd * weight[C], rstd[N] = 1/sqrt(mean(inp^2) + eps).
void RmsNormForward(float* out, float* rstd, const float* inp, const float* weight, int64_t N,
                    int64_t C, float eps);
// The residual add fused with the RMSNorm after it (one pass over the stream instead of
// two): res[N,C] += add, then out and rstd as RmsNormForward(out, rstd, res, ...),
// bit-identical to the two calls.
void AddRmsNormForward(float* out, float* rstd, float* res, const float* add, const float* weight,
                       int64_t N, int64_t C, float eps);
// out[N,C] = inp * rstd * weight from a saved rstd[N]: bit-identical to RmsNormForward's
// output, so backward recomputes the norm outputs instead of storing them.
void RmsNormApply(float* out, const float* inp, const float* weight, const float* rstd, int64_t N,
                  int64_t C);
// dinp[N,C] += ..., dweight[C] += ... from dout[N,C].
void RmsNormBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const float* rstd, int64_t N, int64_t C);

// out[N,O] = inp[N,I] * weight[O,I]^T (with kBf16, of the operands rounded to bf16).
void MatmulForward(float* out, const float* inp, const float* weight, int64_t N, int64_t I,
                   int64_t O, GemmOperands operands = GemmOperands::kFp32);
// dinp[N,I] += dout[N,O] * weight[O,I] (skipped when dinp is null; with overwrite_dinp,
// dinp = that product: the same bits as zeroing dinp first, without the pass);
// dweight[O,I] += dout[N,O]^T * inp[N,I]. With kBf16 the products are of the operands
// rounded to bf16 (dout too, as bf16 autocast's backward does), the sums fp32.
void MatmulBackward(float* dinp, float* dweight, const float* dout, const float* inp,
                    const float* weight, int64_t N, int64_t I, int64_t O,
                    bool overwrite_dinp = false, GemmOperands operands = GemmOperands::kFp32);

// Rotary tables for positions [0, T): cos/sin[T, hd/2], Hugging Face's convention
// (inv_freq[i] = theta^(-2i/hd), angle = t * inv_freq[i], computed in fp32).
void RopeTables(float* cos_t, float* sin_t, int64_t T, int64_t hd, double theta);
// In place on the q and k heads of qkv[B,T,(nh+2nkv)*hd] (rotate-half pairs (i, i+hd/2)).
void RopeForward(float* qkv, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                 int64_t nh, int64_t nkv, int64_t hd);
// In place on dqkv[B,T,(nh+2nkv)*hd]: applies the inverse rotation to the q and k parts.
void RopeBackward(float* dqkv, const float* cos_t, const float* sin_t, int64_t B, int64_t T,
                  int64_t nh, int64_t nkv, int64_t hd);

// Causal grouped-query attention (attention.cc), memory linear in T (nothing [T,T] is
// kept). Per (batch, kv head) k^T (and in backward v^T) is copied once into the thread's
// scratch; the GEMMs run on register tiles (tile_gemm.h) of kAttnTileRows query rows,
// each against the keys up to its own last row only, so the causal mask costs at most
// one partial tile of work per row tile. Forward takes a row tile's scores, its softmax
// and its P*v in one pass while the scores are in L1, and keeps the per-row
// log-sum-exp, from which backward recomputes the probabilities, P = exp(scale q k^T -
// lse), a query block of `block` rows at a time (dk and dv add up over a block's rows).
inline constexpr int64_t kAttnTileRows = 6;
// The backward's query block, measured (bench/train/attention_blocks, docs/engine.md).
inline constexpr int64_t kAttnBlock = 96;
// Scratch floats per thread: forward k^T, contiguous copies of v and q, one row tile's
// scores; backward k^T, v^T, contiguous k, q and dO, a block's P, dS and rowsum(dO * O).
// (k^T and v^T are stored in panels of 16 keys, so T is rounded up to 16 for them.)
inline int64_t AttentionForwardScratch(int64_t T, int64_t hd) {
  return hd * ((T + 15) / 16 * 16) + (2 * hd + kAttnTileRows) * T;
}
inline int64_t AttentionBackwardScratch(int64_t T, int64_t hd, int64_t block = kAttnBlock) {
  return 2 * hd * ((T + 15) / 16 * 16) + (3 * hd + 2 * std::min(T, block)) * T + std::min(T, block);
}

// qkv[B,T,(nh+2nkv)*hd] (q heads, k heads, v heads) -> out[B,T,nh*hd] and
// lse[B,nh,T] = log(sum_j<=i exp(scale * q_i . k_j)). Query head h reads key/value head
// h / (nh/nkv). Scale 1/sqrt(hd). scratch: CpuThreads() * AttentionForwardScratch(T, hd)
// floats.
void AttentionForward(float* out, float* lse, float* scratch, const float* qkv, int64_t B,
                      int64_t T, int64_t nh, int64_t nkv, int64_t hd);
// dqkv[B,T,(nh+2nkv)*hd] += gradients from dout[B,T,nh*hd], given the forward's qkv, out
// and lse. Runs per (batch, kv head), so the query heads sharing a key/value head add
// into its dk/dv from one thread (no atomics). scratch: CpuThreads() *
// AttentionBackwardScratch(T, hd, block) floats; block >= 1 query rows.
void AttentionBackward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                       const float* out, const float* lse, int64_t B, int64_t T, int64_t nh,
                       int64_t nkv, int64_t hd, int64_t block = kAttnBlock);

// out[N,I] = silu(gate) * up, where gate_up[N,2I] holds gate in [0,I) and up in [I,2I).
void SwiGluForward(float* out, const float* gate_up, int64_t N, int64_t I);
// dgate_up[N,2I] = gradients from dout[N,I] (overwrites).
void SwiGluBackward(float* dgate_up, const float* dout, const float* gate_up, int64_t N, int64_t I);

}  // namespace lote::engine

namespace lote::engine {
// Best-of-several GFLOP/s of a square fp32 GEMM (size n) run through Gemm() on all
// threads: this machine's attainable matmul peak, the denominator of MFU.
double MeasureGemmPeakGflops(int64_t n = 1024, int repeats = 5);
}  // namespace lote::engine
