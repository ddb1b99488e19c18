#include "engine/param_layout.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/communicator.h"

namespace lote::engine {

LlamaConfig ShardConfig(const LlamaConfig& c, TensorParallel tp) {
  if (tp.size == 1) return c;
  LlamaConfig s = c;
  s.explicit_head_dim = c.head_dim();
  s.num_attention_heads = c.num_attention_heads / tp.size;
  s.num_key_value_heads = c.num_key_value_heads / tp.size;
  s.intermediate_size = EvenSplit(c.intermediate_size, tp.size, tp.rank).size();
  s.vocab_size = EvenSplit(c.vocab_size, tp.size, tp.rank).size();
  return s;
}

int64_t ParamLayout::Add(std::string name, std::vector<int64_t> global_shape, bool decay,
                         int split_dim, int64_t begin, int64_t count) {
  TensorSpec spec;
  spec.name = std::move(name);
  spec.global_shape = global_shape;
  spec.shape = std::move(global_shape);
  spec.split_dim = split_dim;
  if (split_dim >= 0) {
    spec.shape[static_cast<size_t>(split_dim)] = count;
    spec.split_begin = begin;
  }
  spec.numel = 1;
  for (int64_t d : spec.shape) spec.numel *= d;
  spec.offset = total_;
  spec.weight_decay = decay;
  total_ += spec.numel;
  tensors_.push_back(std::move(spec));
  return tensors_.back().offset;
}

ParamLayout::ParamLayout(const LlamaConfig& c, TensorParallel tp) : tp_(tp) {
  const int64_t C = c.hidden_size, hd = c.head_dim();
  const int64_t nh = c.num_attention_heads / tp.size, nkv = c.num_key_value_heads / tp.size;
  const Range vocab = EvenSplit(c.vocab_size, tp.size, tp.rank);
  const Range mlp = EvenSplit(c.intermediate_size, tp.size, tp.rank);
  const int64_t q0 = tp.rank * nh * hd, kv0 = tp.rank * nkv * hd;
  // With one rank every tensor is whole; it is recorded as replicated.
  const int row = tp.size > 1 ? 0 : -1, col = tp.size > 1 ? 1 : -1;
  vocab_begin_ = vocab.begin;
  embed_ =
      Add("model.embed_tokens.weight", {c.vocab_size, C}, true, row, vocab.begin, vocab.size());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerOffsets o{};
    o.input_norm = Add(p + "input_layernorm.weight", {C}, false, -1, 0, 0);
    o.wqkv = Add(p + "self_attn.q_proj.weight", {c.q_dim(), C}, true, row, q0, nh * hd);
    Add(p + "self_attn.k_proj.weight", {c.kv_dim(), C}, true, row, kv0, nkv * hd);
    Add(p + "self_attn.v_proj.weight", {c.kv_dim(), C}, true, row, kv0, nkv * hd);
    o.wo = Add(p + "self_attn.o_proj.weight", {C, c.q_dim()}, true, col, q0, nh * hd);
    o.post_norm = Add(p + "post_attention_layernorm.weight", {C}, false, -1, 0, 0);
    o.wgate_up =
        Add(p + "mlp.gate_proj.weight", {c.intermediate_size, C}, true, row, mlp.begin, mlp.size());
    Add(p + "mlp.up_proj.weight", {c.intermediate_size, C}, true, row, mlp.begin, mlp.size());
    o.wdown =
        Add(p + "mlp.down_proj.weight", {C, c.intermediate_size}, true, col, mlp.begin, mlp.size());
    layers_.push_back(o);
  }
  final_norm_ = Add("model.norm.weight", {C}, false, -1, 0, 0);
  lm_head_ = c.tie_word_embeddings
                 ? embed_
                 : Add("lm_head.weight", {c.vocab_size, C}, true, row, vocab.begin, vocab.size());
}

const TensorSpec* ParamLayout::Find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

// A shard as a block of the tensor seen as a matrix [global_shape[0], the rest]:
// rows [r0, r1), columns [c0, c1).
struct Block {
  int64_t r0, r1, c0, c1;
};

Block BlockOf(const TensorSpec& spec) {
  const int64_t rows = spec.global_shape.empty() ? 1 : spec.global_shape[0];
  int64_t cols = 1;
  for (size_t d = 1; d < spec.global_shape.size(); ++d) cols *= spec.global_shape[d];
  Block b{0, rows, 0, cols};
  if (spec.split_dim == 0) {
    b.r0 = spec.split_begin;
    b.r1 = spec.split_begin + spec.shape[0];
  } else if (spec.split_dim == 1) {
    b.c0 = spec.split_begin;
    b.c1 = spec.split_begin + spec.shape[1];
  }
  return b;
}

}  // namespace

int64_t CopyOverlap(const TensorSpec& src, const float* src_data, const TensorSpec& dst,
                    float* dst_data) {
  const Block s = BlockOf(src), d = BlockOf(dst);
  const int64_t r0 = std::max(s.r0, d.r0), r1 = std::min(s.r1, d.r1);
  const int64_t c0 = std::max(s.c0, d.c0), c1 = std::min(s.c1, d.c1);
  if (r0 >= r1 || c0 >= c1) return 0;
  const int64_t sw = s.c1 - s.c0, dw = d.c1 - d.c0;
  for (int64_t r = r0; r < r1; ++r) {
    const float* from = src_data + (r - s.r0) * sw + (c0 - s.c0);
    std::copy(from, from + (c1 - c0), dst_data + (r - d.r0) * dw + (c0 - d.c0));
  }
  return (r1 - r0) * (c1 - c0);
}

bool Overlaps(const TensorSpec& a, const TensorSpec& b) {
  const Block x = BlockOf(a), y = BlockOf(b);
  return std::max(x.r0, y.r0) < std::min(x.r1, y.r1) && std::max(x.c0, y.c0) < std::min(x.c1, y.c1);
}

TensorSpec WholeSpec(const TensorSpec& spec) {
  TensorSpec whole = spec;
  whole.shape = spec.global_shape;
  whole.split_dim = -1;
  whole.split_begin = 0;
  whole.numel = 1;
  for (int64_t d : whole.shape) whole.numel *= d;
  return whole;
}

void SliceShard(const TensorSpec& spec, const float* full, float* shard) {
  CopyOverlap(WholeSpec(spec), full, spec, shard);
}

void PlaceShard(const TensorSpec& spec, const float* shard, float* full) {
  CopyOverlap(spec, shard, WholeSpec(spec), full);
}

}  // namespace lote::engine
