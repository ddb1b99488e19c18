#include "engine/parallel_dims.h"

#include <fmt/format.h>

namespace lote::engine {

Result<ParallelDims> ParallelDims::Create(const LlamaConfig& c, int world, int tp, int rank) {
  if (world < 1 || rank < 0 || rank >= world) {
    return Status::InvalidArgument(
        fmt::format("rank {} is not in a world of {} ranks", rank, world));
  }
  if (tp < 1 || world % tp != 0) {
    return Status::InvalidArgument(
        fmt::format("--tensor-parallel-size {} does not divide the {} ranks of the job (nodes x "
                    "--nproc-per-node); data parallel = ranks / tensor parallel must be whole",
                    tp, world));
  }
  if (c.num_attention_heads % tp != 0 || c.num_key_value_heads % tp != 0) {
    return Status::InvalidArgument(fmt::format(
        "--tensor-parallel-size {} does not divide the model's attention heads ({} heads, {} "
        "key/value heads); choose a size that divides both",
        tp, c.num_attention_heads, c.num_key_value_heads));
  }
  if (c.vocab_size < tp || c.intermediate_size < tp) {
    return Status::InvalidArgument(
        fmt::format("--tensor-parallel-size {} exceeds the vocabulary ({}) or the MLP width ({})",
                    tp, c.vocab_size, c.intermediate_size));
  }
  return ParallelDims(world, tp, rank);
}

}  // namespace lote::engine
