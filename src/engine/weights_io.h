// Loading and saving a LlamaModel's parameters as safetensors with Hugging Face tensor
// names. Loading accepts lote's own files and HF `model.safetensors` (F32/F16/BF16);
// every tensor of the layout must be present with its exact shape.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/llama_model.h"

namespace lote::engine {

// With tensor parallelism each rank reads the whole tensors and keeps its shard.
Status LoadWeights(LlamaModel* model, const std::string& path);
// Writes `path` (model.safetensors) with metadata {"format": "pt", "producer": "lote"}.
Status SaveWeights(const LlamaModel& model, const std::string& path);
// The same from whole tensors laid out as ParamLayout(config) (one rank's view).
Status SaveWeights(const LlamaConfig& config, const float* params, const std::string& path);

}  // namespace lote::engine
