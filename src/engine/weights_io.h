// Loading and saving a LlamaModel's parameters as safetensors with Hugging Face tensor
// names. Loading accepts lote's own files, HF `model.safetensors` (F32/F16/BF16) and
// HF sharded checkpoints: a `model.safetensors.index.json` (its "weight_map" names
// each tensor's shard file, beside the index) or a folder holding one (a folder with
// only `model.safetensors` loads that file). Every tensor of the layout must be
// present with its exact shape, and no other tensor may be (errors name the file).
#pragma once

#include <string>

#include "common/status.h"
#include "engine/communicator.h"
#include "engine/llama_model.h"

namespace lote::engine {

// With tensor parallelism each rank reads the whole tensors and keeps its shard.
Status LoadWeights(LlamaModel* model, const std::string& path);
// Writes `path` (model.safetensors) with metadata {"format": "pt", "producer": "lote"}.
Status SaveWeights(const LlamaModel& model, const std::string& path);
// The same from whole tensors laid out as ParamLayout(config) (one rank's view).
Status SaveWeights(const LlamaConfig& config, const float* params, const std::string& path);
// The same from a tensor-parallel model: every rank of the TP group `tp` calls it; each
// tensor's shards are all-gathered and placed one tensor at a time, and the rank with
// `write` writes path (the bytes SaveWeights writes for the whole model). Beyond the
// model a rank holds twice the largest tensor. A write error is returned after the
// gathers, so the group stays in step.
Status SaveWeightsGathered(const LlamaModel& model, Communicator* tp, bool write,
                           const std::string& path);

}  // namespace lote::engine
