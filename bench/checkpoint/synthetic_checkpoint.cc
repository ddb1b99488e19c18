// A real lote checkpoint of any model config and TP x DP layout without training it,
// for measuring the checkpoint tools at 7B scale (bench/checkpoint/rss.sh): every
// rank's state is filled with values that are a function of (tensor, element of the
// whole tensor, parameter / moment), so all layouts agree, and written by the training
// loop's own CheckpointWriter, one rank at a time (rank 0 last, as it waits for the
// others' markers). Memory: one rank's state (its TP shard and ZeRO-1 moments).
//
//   write  --config C --tp T --dp D --uri BASE --job J [--step N]
//   load   --config C --tp T --dp D --rank R --uri STEP_URI
//          resume's LoadCheckpoint for that rank (any source layout); prints the
//          state's bytes and the process's peak RSS.
// One JSON line on stdout.
#include <fmt/format.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/json.h"
#include "engine/checkpoint.h"
#include "engine/llama_config.h"
#include "engine/parallel_dims.h"
#include "engine/param_layout.h"

namespace {

using lote::Json;
using lote::Status;
using lote::engine::ParamLayout;
using lote::engine::TensorSpec;

int Die(const Status& s) {
  fmt::print(stderr, "error: {}\n", s.ToString());
  return 1;
}

int64_t PeakRssBytes() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;
}

uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Value `which` (0 parameter, 1 m, 2 v) of element `global` of a tensor.
float Value(uint64_t tensor, int64_t global, int which) {
  const uint64_t h = Mix(tensor + static_cast<uint64_t>(global) * 4 + static_cast<uint64_t>(which));
  const float u = static_cast<float>(h >> 40) * 0x1.0p-24f;  // [0, 1)
  return which == 2 ? u * 1e-4f : (u - 0.5f) * 0.04f;
}

// Fills `out` (the spec's shard) with Value() of each element's place in the whole tensor.
void FillShard(const TensorSpec& t, int which, float* out) {
  uint64_t name = 1469598103934665603ULL;
  for (char c : t.name) name = (name ^ static_cast<uint8_t>(c)) * 1099511628211ULL;
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  const int64_t cols = rows == 0 ? 0 : t.numel / rows;
  const int64_t gcols = t.global_shape.size() > 1 ? t.global_shape[1] : 1;
  const int64_t r0 = t.split_dim == 0 ? t.split_begin : 0;
  const int64_t c0 = t.split_dim == 1 ? t.split_begin : 0;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[r * cols + c] = Value(name, (r0 + r) * gcols + (c0 + c), which);
    }
  }
}

lote::engine::TrainState RankState(const lote::engine::LlamaConfig& config,
                                   const lote::engine::ParallelDims& dims, int64_t step) {
  const ParamLayout layout(config, dims.tensor_parallel());
  const lote::engine::Range shard = dims.ZeroShard(layout.total());
  lote::engine::TrainState st;
  st.step = st.adam_step = step;
  st.params.resize(static_cast<size_t>(layout.total()));
  st.exp_avg.resize(static_cast<size_t>(shard.size()));
  st.exp_avg_sq.resize(st.exp_avg.size());
  st.shard_begin = shard.begin;
  st.shard_end = shard.end;
  std::vector<float> moment;
  for (const TensorSpec& t : layout.tensors()) {
    FillShard(t, 0, st.params.data() + t.offset);
    const int64_t lo = std::max(t.offset, shard.begin);
    const int64_t hi = std::min(t.offset + t.numel, shard.end);
    if (lo >= hi) continue;
    moment.resize(static_cast<size_t>(t.numel));
    for (int which : {1, 2}) {
      FillShard(t, which, moment.data());
      std::vector<float>& dst = which == 1 ? st.exp_avg : st.exp_avg_sq;
      std::copy(moment.begin() + (lo - t.offset), moment.begin() + (hi - t.offset),
                dst.begin() + (lo - shard.begin));
    }
  }
  st.train = Json{{"synthetic", true}};
  return st;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("a lote checkpoint without training, for the checkpoint tools' benchmarks");
  std::string mode, config_path, uri, job = "synthetic";
  int tp = 1, dp = 1, rank = 0;
  int64_t step = 1;
  app.add_option("mode", mode, "write | load")->required();
  app.add_option("--config", config_path, "Hugging Face config.json")->required();
  app.add_option("--tp", tp)->capture_default_str();
  app.add_option("--dp", dp)->capture_default_str();
  app.add_option("--rank", rank, "load: the rank")->capture_default_str();
  app.add_option("--uri", uri, "write: base URI; load: the step folder")->required();
  app.add_option("--job", job)->capture_default_str();
  app.add_option("--step", step)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto config = lote::engine::LlamaConfig::Load(config_path);
  if (!config.ok()) return Die(config.status());
  const auto t0 = std::chrono::steady_clock::now();
  if (mode == "write") {
    for (int r = tp * dp - 1; r >= 0; --r) {
      auto dims = lote::engine::ParallelDims::Create(*config, tp * dp, tp, r);
      if (!dims.ok()) return Die(dims.status());
      auto writer = lote::engine::CheckpointWriter::Create({uri, job}, *config, *dims);
      if (!writer.ok()) return Die(writer.status());
      if (auto s = (*writer)->Save(RankState(*config, *dims, step)); !s.ok()) return Die(s);
      if (auto s = (*writer)->Wait(); !s.ok()) return Die(s);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{}\n",
               Json{{"mode", "write"}, {"seconds", s}, {"peak_rss_bytes", PeakRssBytes()}}.dump());
    return 0;
  }
  if (mode == "load") {
    auto dims = lote::engine::ParallelDims::Create(*config, tp * dp, tp, rank);
    if (!dims.ok()) return Die(dims.status());
    auto st = lote::engine::LoadCheckpoint(uri, *config, *dims);
    if (!st.ok()) return Die(st.status());
    const int64_t peak = PeakRssBytes();  // before the check below doubles the memory
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // The state must be the synthetic one the writer made, whatever the source layout.
    const lote::engine::TrainState want = RankState(*config, *dims, st->step);
    if (st->params != want.params || st->exp_avg != want.exp_avg ||
        st->exp_avg_sq != want.exp_avg_sq) {
      return Die(Status::DataLoss("the loaded state differs from the synthetic one"));
    }
    const int64_t state =
        static_cast<int64_t>(4 * (st->params.size() + st->exp_avg.size() + st->exp_avg_sq.size()));
    fmt::print(
        "{}\n",
        Json{{"mode", "load"}, {"seconds", s}, {"state_bytes", state}, {"peak_rss_bytes", peak}}
            .dump());
    return 0;
  }
  return Die(Status::InvalidArgument("mode is write or load"));
}
