// ParallelDims: the one owner of a run's parallel layout. A world of TP x DP ranks,
// rank = dp_rank * TP + tp_rank, so the ranks of a tensor-parallel group are
// neighbours (one node). Each rank is in three groups: the world, its tensor-parallel
// group (ranks [dp_rank*TP, (dp_rank+1)*TP), named "tp<dp_rank>") and its
// data-parallel group (ranks tp_rank, tp_rank + TP, ..., named "dp<tp_rank>").
//
// Only Create makes a layout other than the single process, and it checks it against
// the model once: TP divides the world and the model's heads and key/value heads,
// and every TP rank gets at least one vocabulary row and MLP row. Everything else
// (launcher, trainer, model, checkpoints, memory plan) reads a ParallelDims and never
// checks or recomputes the coordinates. Immutable; cheap to copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/communicator.h"
#include "engine/llama_config.h"
#include "engine/param_layout.h"

namespace lote::engine {

class ParallelDims {
 public:
  ParallelDims() = default;  // one process: world 1, TP 1, DP 1

  // The layout of `world` ranks with tensor-parallel size `tp`, as rank `rank` sees it.
  // The message names the numbers and the flag to change.
  static Result<ParallelDims> Create(const LlamaConfig& config, int world, int tp, int rank);

  int world() const { return world_; }
  int rank() const { return rank_; }
  int tp() const { return tp_; }
  int dp() const { return world_ / tp_; }
  int tp_rank() const { return rank_ % tp_; }
  int dp_rank() const { return rank_ / tp_; }
  // This rank's coordinates in its tensor-parallel group (ParamLayout's view).
  TensorParallel tensor_parallel() const { return {tp_rank(), tp_}; }

  // The group names the launcher builds communicators under (unique within the world).
  std::string tp_group() const { return "tp" + std::to_string(dp_rank()); }
  std::string dp_group() const { return "dp" + std::to_string(tp_rank()); }

  // ZeRO-1: this rank's shard of a flat buffer of n floats, and every DP rank's count.
  Range ZeroShard(int64_t n) const { return EvenSplit(n, dp(), dp_rank()); }
  std::vector<int64_t> ZeroCounts(int64_t n) const { return EvenCounts(n, dp()); }

 private:
  ParallelDims(int world, int tp, int rank) : world_(world), tp_(tp), rank_(rank) {}

  int world_ = 1;
  int tp_ = 1;
  int rank_ = 0;
};

}  // namespace lote::engine
