#include "engine/param_layout.h"

#include <fmt/format.h>

namespace lote::engine {

int64_t ParamLayout::Add(std::string name, std::vector<int64_t> shape, bool decay) {
  TensorSpec spec;
  spec.name = std::move(name);
  spec.numel = 1;
  for (int64_t d : shape) spec.numel *= d;
  spec.shape = std::move(shape);
  spec.offset = total_;
  spec.weight_decay = decay;
  total_ += spec.numel;
  tensors_.push_back(std::move(spec));
  return tensors_.back().offset;
}

ParamLayout::ParamLayout(const LlamaConfig& c) {
  const int64_t C = c.hidden_size, I = c.intermediate_size;
  embed_ = Add("model.embed_tokens.weight", {c.vocab_size, C}, true);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerOffsets o{};
    o.input_norm = Add(p + "input_layernorm.weight", {C}, false);
    o.wqkv = Add(p + "self_attn.q_proj.weight", {c.q_dim(), C}, true);
    Add(p + "self_attn.k_proj.weight", {c.kv_dim(), C}, true);
    Add(p + "self_attn.v_proj.weight", {c.kv_dim(), C}, true);
    o.wo = Add(p + "self_attn.o_proj.weight", {C, c.q_dim()}, true);
    o.post_norm = Add(p + "post_attention_layernorm.weight", {C}, false);
    o.wgate_up = Add(p + "mlp.gate_proj.weight", {I, C}, true);
    Add(p + "mlp.up_proj.weight", {I, C}, true);
    o.wdown = Add(p + "mlp.down_proj.weight", {C, I}, true);
    layers_.push_back(o);
  }
  final_norm_ = Add("model.norm.weight", {C}, false);
  lm_head_ = c.tie_word_embeddings ? embed_ : Add("lm_head.weight", {c.vocab_size, C}, true);
}

const TensorSpec* ParamLayout::Find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace lote::engine
