// The GEMM of bf16 mixed precision: C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C,
// with every element of A and B rounded to bf16 (FloatToBf16: nearest, ties to even) and
// the products summed in fp32. Row-major, the same arguments as Gemm (cpu_kernels.h).
//
// Two kernels, chosen at run time:
//   - kAvx512Bf16: where the CPU has avx512_bf16 (cpuid), A and B are rounded to bf16 as
//     they are packed and multiplied with vdpbf16ps (two bf16 products per fp32 lane,
//     summed in fp32). The binary still runs on a CPU without it: only this kernel's
//     functions are compiled for AVX-512 (a target attribute), and they are reached only
//     after the check.
//   - kFp32: elsewhere (or when forced, for tests), Gemm on the operands as they are: the
//     engine's operands are already bf16 values (weights and activations are rounded
//     where made), so this is the same products with fp32 arithmetic; an operand that is
//     not (a gradient) is then used unrounded, which is more precise, not less.
// The two differ by fp32 summation order (and gradients' rounding), within bf16-mixed's
// documented tolerance (docs/engine.md). Each output is one sum over k in a fixed order
// that does not depend on the thread count or on how the output is split, so a run is
// reproducible bit for bit on the same kernel. vdpbf16ps treats subnormal inputs as zero
// and flushes subnormal results; the fp32 kernel does not.
//
// Threading as Gemm: the larger output dimension is split over OpenMP threads unless
// already inside a parallel region. Packing buffers are per thread, allocated on the
// first call and kept (Bf16GemmScratchBytes each). Never fails.
#pragma once

#include <cstdint>

namespace lote::engine {

enum class Bf16GemmKernel { kAvx512Bf16, kFp32 };

// The kernel Bf16Gemm runs: kAvx512Bf16 where the CPU has avx512_bf16 and it is not
// forced off. Thread-safe.
Bf16GemmKernel ActiveBf16GemmKernel();
const char* Bf16GemmKernelName(Bf16GemmKernel kernel);
// Whether this CPU has avx512_bf16 (what a non-forced choice follows).
bool CpuHasAvx512Bf16();
// Forces the kFp32 kernel (true) or returns to the CPU's choice (false). For tests and
// the environment variable LOTE_BF16_GEMM=fp32 (read at InitCpuBackend); call it
// between steps, never during a GEMM.
void ForceBf16GemmFallback(bool force);

void Bf16Gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc);

// Bytes of packing buffer one thread keeps once it has run a kAvx512Bf16 GEMM.
int64_t Bf16GemmScratchBytes();

}  // namespace lote::engine
