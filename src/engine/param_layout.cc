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

// Calls fn(full_offset, shard_offset, count) for each contiguous run of the shard.
template <typename Fn>
void ForEachRun(const TensorSpec& spec, Fn&& fn) {
  if (spec.split_dim < 0) {
    fn(int64_t{0}, int64_t{0}, spec.numel);
  } else if (spec.split_dim == 0) {
    const int64_t row = spec.numel / spec.shape[0];
    fn(spec.split_begin * row, int64_t{0}, spec.numel);
  } else {
    const int64_t rows = spec.shape[0], cols = spec.shape[1], gcols = spec.global_shape[1];
    for (int64_t r = 0; r < rows; ++r) fn(r * gcols + spec.split_begin, r * cols, cols);
  }
}

}  // namespace

void SliceShard(const TensorSpec& spec, const float* full, float* shard) {
  ForEachRun(
      spec, [&](int64_t f, int64_t s, int64_t n) { std::copy(full + f, full + f + n, shard + s); });
}

void PlaceShard(const TensorSpec& spec, const float* shard, float* full) {
  ForEachRun(spec, [&](int64_t f, int64_t s, int64_t n) {
    std::copy(shard + s, shard + s + n, full + f);
  });
}

}  // namespace lote::engine
