#include "engine/compile_cache.h"

#include <fmt/format.h>

#include <ctime>
#include <fstream>

#include "common/clock.h"
#include "common/crypto.h"
#include "engine/cpu_kernels.h"
#include "objstore/objstore.h"

namespace lote::engine {
namespace {

constexpr const char* kFormat = "lote-compile-plan";

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

std::string EntryKey(const Json& shape) {
  return "lote-train/" + Sha256Hex(shape.dump()) + "/plan.json";
}

std::string Join(const std::string& root, const std::string& key) {
  std::string r = root;
  while (!r.empty() && r.back() == '/') r.pop_back();
  return r + "/" + key;
}

}  // namespace

Json CompilePlan::ToJson() const {
  return Json{{"format", kFormat},
              {"version", 1},
              {"shape", shape},
              {"gemm_peak_gflops", gemm_peak_gflops},
              {"memory_plan", memory_plan},
              {"recorded_by", recorded_by},
              {"created_at", created_at}};
}

Result<CompilePlan> CompilePlan::FromJson(const Json& j) {
  if (!j.is_object() || j.value("format", "") != kFormat || !j.contains("shape") ||
      !j["gemm_peak_gflops"].is_number()) {
    return Status::InvalidArgument("not a lote compile plan");
  }
  CompilePlan p;
  p.shape = j["shape"];
  p.gemm_peak_gflops = j["gemm_peak_gflops"].get<double>();
  p.memory_plan = j.value("memory_plan", Json::object());
  p.recorded_by = j.value("recorded_by", "");
  p.created_at = j.value("created_at", "");
  return p;
}

Json CompileShape(const LlamaConfig& config, int tp, int dp, int64_t micro_batch, int64_t seq_len,
                  int threads) {
  return Json{{"model", config.ToJson()},   {"tensor_parallel", tp},      {"data_parallel", dp},
              {"micro_batch", micro_batch}, {"seq_len", seq_len},         {"threads", threads},
              {"cpu", CpuModel()},          {"blas_core", BlasCoreName()}};
}

Json MemoryPlanJson(const MemoryPlan& plan) {
  return Json{{"params_bytes", plan.params_bytes},
              {"grads_bytes", plan.grads_bytes},
              {"optimizer_bytes", plan.optimizer_bytes},
              {"activation_bytes", plan.activation_bytes},
              {"activation_grad_bytes", plan.activation_grad_bytes},
              {"total_bytes", plan.total_bytes()}};
}

Result<std::optional<CompilePlan>> LookupCompilePlan(const std::string& cache_uri,
                                                     const Json& shape) {
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(cache_uri));
  const std::string key = EntryKey(shape);
  ASSIGN_OR_RETURN(bool exists, store->Exists(key));
  if (!exists) return std::optional<CompilePlan>();
  ASSIGN_OR_RETURN(std::string text, store->GetBytes(key));
  Result<Json> j = ParseJson(text);
  Result<CompilePlan> plan = j.ok() ? CompilePlan::FromJson(*j) : Result<CompilePlan>(j.status());
  if (!plan.ok()) {
    return Status::DataLoss(fmt::format("compile cache entry {} is unreadable: {}",
                                        Join(cache_uri, key), plan.status().message()));
  }
  plan->uri = Join(cache_uri, key);
  return std::optional<CompilePlan>(std::move(*plan));
}

Result<std::string> RecordCompilePlan(const std::string& cache_uri, CompilePlan plan) {
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(cache_uri));
  if (plan.created_at.empty()) plan.created_at = Iso8601Utc(SystemClock::Default()->NowMillis());
  const std::string key = EntryKey(plan.shape);
  RETURN_IF_ERROR(store->PutBytes(key, plan.ToJson().dump(2) + "\n"));
  return Join(cache_uri, key);
}

}  // namespace lote::engine
