// Loading and saving a LlamaModel's parameters as safetensors with Hugging Face tensor
// names. Loading accepts lote's own files and HF `model.safetensors` (F32/F16/BF16);
// every tensor of the layout must be present with its exact shape.
#pragma once

#include <string>

#include "common/status.h"
#include "engine/llama_model.h"

namespace lote::engine {

Status LoadWeights(LlamaModel* model, const std::string& path);
// Writes `path` (model.safetensors) with metadata {"format": "pt", "producer": "lote"}.
Status SaveWeights(const LlamaModel& model, const std::string& path);

}  // namespace lote::engine
