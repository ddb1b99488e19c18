#include "engine/weights_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "engine/safetensors.h"

namespace lote::engine {

Status LoadWeights(LlamaModel* model, const std::string& path) {
  ASSIGN_OR_RETURN(auto reader, SafetensorsReader::Open(path));
  const ParamLayout& layout = model->layout();
  std::vector<float> full;
  for (const TensorSpec& spec : layout.tensors()) {
    const TensorInfo* t = reader->Find(spec.name);
    if (t == nullptr) {
      return Status::NotFound(fmt::format(
          "weights file {} has no tensor \"{}\"; it does not match the model config (a Llama "
          "checkpoint with Hugging Face tensor names is expected)",
          path, spec.name));
    }
    if (t->shape != spec.global_shape) {
      return Status::InvalidArgument(fmt::format(
          "weights file {}: tensor \"{}\" has shape [{}] but the model config needs [{}]", path,
          spec.name, fmt::join(t->shape, ", "), fmt::join(spec.global_shape, ", ")));
    }
    if (spec.replicated()) {
      RETURN_IF_ERROR(reader->ReadFloat(spec.name, model->params() + spec.offset, spec.numel));
    } else {
      int64_t total = 1;
      for (int64_t d : spec.global_shape) total *= d;
      full.resize(static_cast<size_t>(total));
      RETURN_IF_ERROR(reader->ReadFloat(spec.name, full.data(), total));
      SliceShard(spec, full.data(), model->params() + spec.offset);
    }
  }
  for (const auto& [name, info] : reader->tensors()) {
    if (layout.Find(name) != nullptr) continue;
    if (name.ends_with("rotary_emb.inv_freq")) continue;  // recomputed from rope_theta
    if (name == "lm_head.weight" && model->config().tie_word_embeddings) continue;
    return Status::InvalidArgument(fmt::format(
        "weights file {} has tensor \"{}\", which the model config does not have; check that "
        "the config matches the checkpoint",
        path, name));
  }
  return Status::Ok();
}

Status SaveWeights(const LlamaModel& model, const std::string& path) {
  LOTE_CHECK_MSG(model.tp().size == 1,
                 "assemble the shards first (SaveWeights from whole tensors)");
  return SaveWeights(model.config(), model.params(), path);
}

Status SaveWeights(const LlamaConfig& config, const float* params, const std::string& path) {
  const ParamLayout layout(config);
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& spec : layout.tensors()) {
    tensors.push_back({spec.name, spec.shape, params + spec.offset});
  }
  return WriteSafetensors(path, tensors, {{"format", "pt"}, {"producer", "lote"}});
}

}  // namespace lote::engine
