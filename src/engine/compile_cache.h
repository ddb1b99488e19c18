// The compile cache of `lote train --compile-cache URI` (the recipe's
// NEURON_COMPILE_CACHE_URI): what a run measured and planned before its first
// step, kept per training shape so later runs of the same shape reuse it.
//
// The shape is the model config, the layout (TP x DP), micro batch, sequence
// length, threads per rank and the CPU model; its sha256 names the entry
// <URI>/lote-train/<sha256>/plan.json. An entry holds the measured GEMM peak
// (the MFU denominator, otherwise measured at every start), the rank's memory
// plan, and which job recorded it. A precompile run (`--precompile true`, the
// recipe's DO_PRE_COMPILATION job) runs 2 steps and records the entry; a
// main run looks it up and says whether it found it (and records it when absent).
// Thread safety: functions share no state; objects go through src/objstore.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/json.h"
#include "common/status.h"
#include "engine/llama_config.h"
#include "engine/memory_plan.h"

namespace lote::engine {

struct CompilePlan {
  Json shape;                   // CompileShape(...)
  double gemm_peak_gflops = 0;  // per rank
  Json memory_plan;             // bytes per rank: params, grads, optimizer, activations, total
  std::string recorded_by;      // job id
  std::string created_at;       // ISO 8601 UTC
  std::string uri;              // where it is (set by Lookup/Record)
  Json ToJson() const;
  static Result<CompilePlan> FromJson(const Json& j);
};

Json CompileShape(const LlamaConfig& config, int tp, int dp, int64_t micro_batch, int64_t seq_len,
                  int threads);
Json MemoryPlanJson(const MemoryPlan& plan);

// The entry for `shape` under `cache_uri`, or nullopt when there is none (a
// malformed entry is an error naming it).
Result<std::optional<CompilePlan>> LookupCompilePlan(const std::string& cache_uri,
                                                     const Json& shape);
// Writes the entry (replacing one of the same shape); returns its URI.
Result<std::string> RecordCompilePlan(const std::string& cache_uri, CompilePlan plan);

}  // namespace lote::engine
