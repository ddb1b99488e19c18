// LlamaConfig: the shape of a Llama model, read from a Hugging Face `config.json`.
// A plain value type; Validate() names every inconsistency and how to fix it.
// Counting functions (parameters, FLOPs) are pure functions of the config.
#pragma once

#include <cstdint>
#include <string>

#include "common/json.h"
#include "common/status.h"

namespace lote::engine {

struct LlamaConfig {
  int64_t hidden_size = 0;              // C
  int64_t intermediate_size = 0;        // I (SwiGLU width)
  int64_t num_hidden_layers = 0;        // L
  int64_t num_attention_heads = 0;      // nh
  int64_t num_key_value_heads = 0;      // nkv (GQA: nh % nkv == 0)
  int64_t vocab_size = 0;               // V
  int64_t max_position_embeddings = 0;  // longest sequence the model accepts
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  double initializer_range = 0.02;
  bool tie_word_embeddings = false;
  // 0 = hidden_size / num_attention_heads. Set only in a tensor-parallel shard's view
  // of the config (ShardConfig), whose head count is a fraction of the model's.
  int64_t explicit_head_dim = 0;

  int64_t head_dim() const {  // hd
    return explicit_head_dim > 0 ? explicit_head_dim : hidden_size / num_attention_heads;
  }
  int64_t q_dim() const { return num_attention_heads * head_dim(); }
  int64_t kv_dim() const { return num_key_value_heads * head_dim(); }
  int64_t qkv_dim() const { return q_dim() + 2 * kv_dim(); }

  // Parses the HF keys; missing num_key_value_heads means nkv = nh, missing
  // rope_theta means 10000. Runs Validate().
  static Result<LlamaConfig> FromJson(const Json& json);
  static Result<LlamaConfig> Load(const std::string& path);
  Json ToJson() const;  // HF keys, so the file loads in transformers too

  Status Validate() const;

  // Parameter counts (scalars).
  int64_t ParamsPerLayer() const;
  int64_t NumParameters() const;
  // Training FLOPs per token at sequence length T: 6 * (parameters that take part in
  // matmuls: everything but the input embedding lookup, counted once when tied) plus
  // 12 * L * C * T for attention scores and values (PaLM's formula).
  double TrainFlopsPerToken(int64_t seq_len) const;
};

}  // namespace lote::engine
