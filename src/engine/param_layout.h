// ParamLayout: where every parameter tensor lives in the one flat fp32 buffer of one
// tensor-parallel rank. Gradients and both AdamW moments use the same layout, so the
// optimizer is one flat loop and a gradient reduction is one collective call. Names
// are Hugging Face's (`model.layers.3.self_attn.q_proj.weight`), so checkpoints
// round-trip with the ecosystem. Within a layer q/k/v are adjacent (one [qkv_dim, C]
// matrix, one GEMM) and so are gate/up ([2I, C]). A pure function of (config, tensor
// parallel rank, size); immutable once built.
//
// Tensor parallelism (Megatron): q/k/v and gate/up are split by output rows
// (column-parallel), o_proj and down_proj by input columns (row-parallel), the
// embedding and LM head by vocabulary rows; norm weights are replicated. Each rank's
// buffer holds its own contiguous shard of every tensor; TensorSpec records the
// tensor's global shape, the split dimension and where the shard starts, so weights
// can be sliced on load and assembled (or re-sharded) on save.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/llama_config.h"

namespace lote::engine {

struct TensorSpec {
  std::string name;            // HF name
  std::vector<int64_t> shape;  // this rank's shard, row-major
  int64_t offset = 0;          // in floats, into the parameter buffer
  int64_t numel = 0;
  bool weight_decay = false;          // matrices decay, norm weights do not
  std::vector<int64_t> global_shape;  // the whole tensor
  int split_dim = -1;                 // -1: replicated on every TP rank; else 0 or 1
  int64_t split_begin = 0;            // first row (dim 0) or column (dim 1) of the shard
  bool replicated() const { return split_dim < 0; }
};

// Offsets (in floats) of one decoder layer's tensors.
struct LayerOffsets {
  int64_t input_norm;  // [C]
  int64_t wqkv;        // [qkv_dim, C]: q_proj rows, then k_proj, then v_proj
  int64_t wo;          // [C, q_dim]
  int64_t post_norm;   // [C]
  int64_t wgate_up;    // [2I, C]: gate_proj rows, then up_proj
  int64_t wdown;       // [C, I]
};

// One rank's coordinates in its tensor-parallel group. A valid layout comes from
// ParallelDims (parallel_dims.h), which checks it against the model; a checkpoint's
// recorded layout was checked when it was written.
struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// The model as one TP rank sees it: its share of heads, key/value heads, MLP width and
// vocabulary (explicit head_dim). With size 1, the config itself.
LlamaConfig ShardConfig(const LlamaConfig& config, TensorParallel tp);

// Copies this rank's shard of a whole tensor (full: global_shape, row-major) into
// shard (shape), and back.
void SliceShard(const TensorSpec& spec, const float* full, float* shard);
void PlaceShard(const TensorSpec& spec, const float* shard, float* full);
// Copies the elements two shards of one tensor (the same global shape, any TP sizes)
// have in common from src_data (src.shape) into dst_data (dst.shape); returns how
// many. So a tensor is re-sharded from another layout's shards without ever being
// whole in memory.
int64_t CopyOverlap(const TensorSpec& src, const float* src_data, const TensorSpec& dst,
                    float* dst_data);
// Whether two shards of one tensor have an element in common.
bool Overlaps(const TensorSpec& a, const TensorSpec& b);
// The spec of the whole tensor of a shard (split_dim -1, shape = global_shape).
TensorSpec WholeSpec(const TensorSpec& spec);

class ParamLayout {
 public:
  explicit ParamLayout(const LlamaConfig& config, TensorParallel tp = {});

  int64_t total() const { return total_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const TensorSpec* Find(const std::string& name) const;
  TensorParallel tp() const { return tp_; }

  int64_t embed() const { return embed_; }              // [V, C] (this rank's vocabulary rows)
  int64_t final_norm() const { return final_norm_; }    // [C]
  int64_t lm_head() const { return lm_head_; }          // [V, C] (== embed() when tied)
  int64_t vocab_begin() const { return vocab_begin_; }  // first vocabulary row of this rank
  const LayerOffsets& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }

 private:
  int64_t Add(std::string name, std::vector<int64_t> global_shape, bool decay, int split_dim,
              int64_t begin, int64_t count);

  TensorParallel tp_;
  std::vector<TensorSpec> tensors_;
  std::vector<LayerOffsets> layers_;
  int64_t total_ = 0;
  int64_t embed_ = 0, final_norm_ = 0, lm_head_ = 0, vocab_begin_ = 0;
};

}  // namespace lote::engine
