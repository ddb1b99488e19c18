// ParamLayout: where every parameter tensor lives in the one flat fp32 buffer.
// Gradients and both AdamW moments use the same layout, so the optimizer is one flat
// loop and a gradient reduction is one collective call. Names are Hugging Face's
// (`model.layers.3.self_attn.q_proj.weight`), so checkpoints round-trip with the
// ecosystem. Within a layer q/k/v are adjacent (one [qkv_dim, C] matrix, one GEMM) and
// so are gate/up ([2I, C]). A pure function of the config; immutable once built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/llama_config.h"

namespace lote::engine {

struct TensorSpec {
  std::string name;            // HF name
  std::vector<int64_t> shape;  // row-major
  int64_t offset = 0;          // in floats, into the parameter buffer
  int64_t numel = 0;
  bool weight_decay = false;  // matrices decay, norm weights do not
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

class ParamLayout {
 public:
  explicit ParamLayout(const LlamaConfig& config);

  int64_t total() const { return total_; }
  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  const TensorSpec* Find(const std::string& name) const;

  int64_t embed() const { return embed_; }            // [V, C]
  int64_t final_norm() const { return final_norm_; }  // [C]
  int64_t lm_head() const { return lm_head_; }        // [V, C] (== embed() when tied)
  const LayerOffsets& layer(int64_t l) const { return layers_[static_cast<size_t>(l)]; }

 private:
  int64_t Add(std::string name, std::vector<int64_t> shape, bool decay);

  std::vector<TensorSpec> tensors_;
  std::vector<LayerOffsets> layers_;
  int64_t total_ = 0;
  int64_t embed_ = 0, final_norm_ = 0, lm_head_ = 0;
};

}  // namespace lote::engine
