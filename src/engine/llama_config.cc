#include "engine/llama_config.h"

#include <fmt/format.h>

namespace lote::engine {
namespace {

Status ReadInt(const Json& json, const char* key, bool required, int64_t* out) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) {
    if (required) {
      return Status::InvalidArgument(fmt::format(
          "model config is missing \"{}\"; add it (Hugging Face Llama config.json keys)", key));
    }
    return Status::Ok();
  }
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(fmt::format("model config \"{}\" must be an integer", key));
  }
  *out = it->get<int64_t>();
  return Status::Ok();
}

Status ReadDouble(const Json& json, const char* key, double* out) {
  auto it = json.find(key);
  if (it == json.end() || it->is_null()) return Status::Ok();
  if (!it->is_number()) {
    return Status::InvalidArgument(fmt::format("model config \"{}\" must be a number", key));
  }
  *out = it->get<double>();
  return Status::Ok();
}

}  // namespace

Result<LlamaConfig> LlamaConfig::FromJson(const Json& json) {
  if (!json.is_object()) return Status::InvalidArgument("model config must be a JSON object");
  LlamaConfig c;
  RETURN_IF_ERROR(ReadInt(json, "hidden_size", true, &c.hidden_size));
  RETURN_IF_ERROR(ReadInt(json, "intermediate_size", true, &c.intermediate_size));
  RETURN_IF_ERROR(ReadInt(json, "num_hidden_layers", true, &c.num_hidden_layers));
  RETURN_IF_ERROR(ReadInt(json, "num_attention_heads", true, &c.num_attention_heads));
  c.num_key_value_heads = c.num_attention_heads;
  RETURN_IF_ERROR(ReadInt(json, "num_key_value_heads", false, &c.num_key_value_heads));
  RETURN_IF_ERROR(ReadInt(json, "vocab_size", true, &c.vocab_size));
  c.max_position_embeddings = 2048;
  RETURN_IF_ERROR(ReadInt(json, "max_position_embeddings", false, &c.max_position_embeddings));
  RETURN_IF_ERROR(ReadDouble(json, "rms_norm_eps", &c.rms_norm_eps));
  RETURN_IF_ERROR(ReadDouble(json, "rope_theta", &c.rope_theta));
  RETURN_IF_ERROR(ReadDouble(json, "initializer_range", &c.initializer_range));
  if (auto it = json.find("tie_word_embeddings"); it != json.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return Status::InvalidArgument("model config \"tie_word_embeddings\" must be true or false");
    }
    c.tie_word_embeddings = it->get<bool>();
  }
  if (auto it = json.find("rope_scaling"); it != json.end() && !it->is_null()) {
    return Status::Unimplemented(
        "model config sets \"rope_scaling\", which lote does not support; remove it or set it to "
        "null");
  }
  if (auto it = json.find("hidden_act");
      it != json.end() && it->is_string() && it->get<std::string>() != "silu") {
    return Status::Unimplemented(
        fmt::format("model config \"hidden_act\" is \"{}\"; lote's Llama supports only \"silu\"",
                    it->get<std::string>()));
  }
  RETURN_IF_ERROR(c.Validate());
  return c;
}

Result<LlamaConfig> LlamaConfig::Load(const std::string& path) {
  auto json = ReadJsonFile(path);
  if (!json.ok()) return json.status().WithContext("reading model config " + path);
  auto config = FromJson(*json);
  if (!config.ok()) return config.status().WithContext("model config " + path);
  return config;
}

Json LlamaConfig::ToJson() const {
  Json j;
  j["architectures"] = Json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["hidden_act"] = "silu";
  j["hidden_size"] = hidden_size;
  j["intermediate_size"] = intermediate_size;
  j["num_hidden_layers"] = num_hidden_layers;
  j["num_attention_heads"] = num_attention_heads;
  j["num_key_value_heads"] = num_key_value_heads;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_position_embeddings;
  j["rms_norm_eps"] = rms_norm_eps;
  j["rope_theta"] = rope_theta;
  j["initializer_range"] = initializer_range;
  j["tie_word_embeddings"] = tie_word_embeddings;
  j["torch_dtype"] = "float32";
  return j;
}

Status LlamaConfig::Validate() const {
  auto positive = [](const char* key, int64_t v) -> Status {
    if (v <= 0) {
      return Status::InvalidArgument(
          fmt::format("model config \"{}\" is {}; it must be > 0", key, v));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  RETURN_IF_ERROR(positive("num_hidden_layers", num_hidden_layers));
  RETURN_IF_ERROR(positive("num_attention_heads", num_attention_heads));
  RETURN_IF_ERROR(positive("num_key_value_heads", num_key_value_heads));
  RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  RETURN_IF_ERROR(positive("max_position_embeddings", max_position_embeddings));
  if (hidden_size % num_attention_heads != 0) {
    return Status::InvalidArgument(fmt::format(
        "model config is inconsistent: hidden_size {} is not divisible by num_attention_heads {}; "
        "choose sizes so that hidden_size = num_attention_heads * head_dim",
        hidden_size, num_attention_heads));
  }
  if (num_attention_heads % num_key_value_heads != 0) {
    return Status::InvalidArgument(fmt::format(
        "model config is inconsistent: num_attention_heads {} is not a multiple of "
        "num_key_value_heads {} (grouped-query attention shares each key/value head among a "
        "whole number of query heads)",
        num_attention_heads, num_key_value_heads));
  }
  if (head_dim() % 2 != 0) {
    return Status::InvalidArgument(fmt::format(
        "model config is inconsistent: head_dim {} (hidden_size / num_attention_heads) must be "
        "even for rotary embeddings",
        head_dim()));
  }
  if (!(rms_norm_eps > 0)) {
    return Status::InvalidArgument("model config \"rms_norm_eps\" must be > 0");
  }
  if (!(rope_theta > 0)) return Status::InvalidArgument("model config \"rope_theta\" must be > 0");
  if (!(initializer_range > 0)) {
    return Status::InvalidArgument("model config \"initializer_range\" must be > 0");
  }
  return Status::Ok();
}

int64_t LlamaConfig::ParamsPerLayer() const {
  const int64_t c = hidden_size;
  return 2 * c                          // input and post-attention RMSNorm weights
         + qkv_dim() * c + c * q_dim()  // q, k, v, o projections
         + 3 * intermediate_size * c;   // gate, up, down
}

int64_t LlamaConfig::NumParameters() const {
  const int64_t embed = vocab_size * hidden_size;
  return embed + num_hidden_layers * ParamsPerLayer() + hidden_size +
         (tie_word_embeddings ? 0 : embed);
}

double LlamaConfig::TrainFlopsPerToken(int64_t seq_len) const {
  const double matmul_params =
      static_cast<double>(num_hidden_layers * ParamsPerLayer() + vocab_size * hidden_size);
  return 6.0 * matmul_params +
         12.0 * static_cast<double>(num_hidden_layers * q_dim()) * static_cast<double>(seq_len);
}

}  // namespace lote::engine
