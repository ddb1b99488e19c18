#include "engine/weights_io.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "common/json.h"
#include "engine/safetensors.h"

namespace lote::engine {

namespace {

namespace fs = std::filesystem;

constexpr const char* kIndexName = "model.safetensors.index.json";

// The tensors of one weights file, or of a Hugging Face sharded checkpoint (an index
// whose weight_map names each tensor's shard file, all opened up front).
class WeightSource {
 public:
  static Result<WeightSource> Open(const std::string& path) {
    WeightSource w;
    std::error_code ec;
    std::string index = path;
    if (fs::is_directory(path, ec)) {
      index = (fs::path(path) / kIndexName).string();
      if (!fs::exists(index, ec)) {
        const std::string single = (fs::path(path) / "model.safetensors").string();
        if (fs::exists(single, ec)) return OpenSingle(single);
        return Status::NotFound(
            fmt::format("weights folder {} has neither {} (a Hugging Face sharded checkpoint) nor "
                        "model.safetensors",
                        path, kIndexName));
      }
    } else if (!path.ends_with(".json")) {
      return OpenSingle(path);
    }
    w.describe_ = fmt::format("sharded checkpoint {}", index);
    ASSIGN_OR_RETURN(Json j, ReadJsonFile(index));
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object()) {
      return Status::InvalidArgument(fmt::format(
          "{} is not a Hugging Face safetensors index: it has no \"weight_map\" object", index));
    }
    const fs::path dir = fs::path(index).parent_path();
    std::map<std::string, size_t> opened;  // shard file -> index into readers_
    for (const auto& [tensor, file] : j["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().empty()) {
        return Status::InvalidArgument(
            fmt::format("{}: weight_map[\"{}\"] must be a shard file name", index, tensor));
      }
      const std::string f = file.get<std::string>();
      auto it = opened.find(f);
      if (it == opened.end()) {
        const std::string shard = (dir / f).string();
        auto reader = SafetensorsReader::Open(shard);
        if (!reader.ok()) {
          return Status(reader.status().code(), fmt::format("{} (shard of {}): {}", shard, index,
                                                            reader.status().message()));
        }
        it = opened.emplace(f, w.readers_.size()).first;
        w.readers_.push_back(std::move(*reader));
        w.files_.push_back(shard);
      }
      w.map_[tensor] = it->second;
    }
    if (w.map_.empty()) {
      return Status::InvalidArgument(fmt::format("{}: weight_map is empty", index));
    }
    return w;
  }

  // The tensor and the file it is in; nullptr when the checkpoint does not have it.
  // A tensor that the index names but whose shard lacks it is DataLoss.
  Result<const TensorInfo*> Find(const std::string& name, size_t* reader) const {
    auto it = map_.find(name);
    if (it == map_.end()) return static_cast<const TensorInfo*>(nullptr);
    const TensorInfo* t = readers_[it->second]->Find(name);
    if (t == nullptr) {
      return Status::DataLoss(
          fmt::format("{}: the index puts tensor \"{}\" in {}, which has no "
                      "such tensor",
                      describe_, name, files_[it->second]));
    }
    *reader = it->second;
    return t;
  }
  const SafetensorsReader& reader(size_t i) const { return *readers_[i]; }
  const std::string& file(size_t i) const { return files_[i]; }
  const std::string& describe() const { return describe_; }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [name, i] : map_) out.push_back(name);
    return out;
  }

 private:
  static Result<WeightSource> OpenSingle(const std::string& path) {
    WeightSource w;
    ASSIGN_OR_RETURN(auto reader, SafetensorsReader::Open(path));
    for (const auto& [name, info] : reader->tensors()) w.map_[name] = 0;
    w.readers_.push_back(std::move(reader));
    w.files_.push_back(path);
    w.describe_ = fmt::format("weights file {}", path);
    return w;
  }

  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
  std::vector<std::string> files_;
  std::map<std::string, size_t> map_;  // tensor name -> reader
  std::string describe_;
};

}  // namespace

Status LoadWeights(LlamaModel* model, const std::string& path) {
  ASSIGN_OR_RETURN(WeightSource source, WeightSource::Open(path));
  const ParamLayout& layout = model->layout();
  std::vector<float> full;
  for (const TensorSpec& spec : layout.tensors()) {
    size_t r = 0;
    ASSIGN_OR_RETURN(const TensorInfo* t, source.Find(spec.name, &r));
    if (t == nullptr) {
      return Status::NotFound(
          fmt::format("{} has no tensor \"{}\"; it does not match the model config (a Llama "
                      "checkpoint with Hugging Face tensor names is expected)",
                      source.describe(), spec.name));
    }
    if (t->shape != spec.global_shape) {
      return Status::InvalidArgument(
          fmt::format("{}: tensor \"{}\" (in {}) has shape [{}] but the model config needs [{}]",
                      source.describe(), spec.name, source.file(r), fmt::join(t->shape, ", "),
                      fmt::join(spec.global_shape, ", ")));
    }
    const SafetensorsReader& reader = source.reader(r);
    if (spec.replicated()) {
      RETURN_IF_ERROR(reader.ReadFloat(spec.name, model->params() + spec.offset, spec.numel));
    } else {
      int64_t total = 1;
      for (int64_t d : spec.global_shape) total *= d;
      full.resize(static_cast<size_t>(total));
      RETURN_IF_ERROR(reader.ReadFloat(spec.name, full.data(), total));
      SliceShard(spec, full.data(), model->params() + spec.offset);
    }
  }
  for (const std::string& name : source.names()) {
    if (layout.Find(name) != nullptr) continue;
    if (name.ends_with("rotary_emb.inv_freq")) continue;  // recomputed from rope_theta
    if (name == "lm_head.weight" && model->config().tie_word_embeddings) continue;
    return Status::InvalidArgument(
        fmt::format("{} has tensor \"{}\", which the model config does not have; check that "
                    "the config matches the checkpoint",
                    source.describe(), name));
  }
  return Status::Ok();
}

Status SaveWeights(const LlamaModel& model, const std::string& path) {
  LOTE_CHECK_MSG(model.tp().size == 1,
                 "assemble the shards first (SaveWeights from whole tensors)");
  return SaveWeights(model.config(), model.params(), path);
}

namespace {

const std::map<std::string, std::string>& WeightsMetadata() {
  static const std::map<std::string, std::string> kMetadata{{"format", "pt"}, {"producer", "lote"}};
  return kMetadata;
}

}  // namespace

Status SaveWeights(const LlamaConfig& config, const float* params, const std::string& path) {
  const ParamLayout layout(config);
  std::vector<TensorToWrite> tensors;
  for (const TensorSpec& spec : layout.tensors()) {
    tensors.push_back({spec.name, spec.shape, params + spec.offset});
  }
  return WriteSafetensors(path, tensors, WeightsMetadata());
}

Status SaveWeightsGathered(const LlamaModel& model, Communicator* tp, bool write,
                           const std::string& path) {
  const LlamaConfig& config = model.config();
  const int size = model.tp().size;
  const ParamLayout global(config);
  std::vector<ParamLayout> ranks;  // every TP rank's layout: the same tensors, in order
  for (int r = 0; r < size; ++r) ranks.emplace_back(config, TensorParallel{r, size});
  Status written;
  std::unique_ptr<SafetensorsWriter> writer;
  if (write) {
    std::vector<TensorHeader> headers;
    for (const TensorSpec& t : global.tensors()) headers.push_back({t.name, t.shape});
    auto created = SafetensorsWriter::Create(path, headers, WeightsMetadata());
    if (created.ok()) writer = std::move(*created);
    written = created.status();
  }
  std::vector<float> gathered, whole;
  std::vector<int64_t> counts(static_cast<size_t>(size));
  for (size_t i = 0; i < global.tensors().size(); ++i) {
    const TensorSpec& g = global.tensors()[i];
    const TensorSpec& mine = model.layout().tensors()[i];
    const float* data = model.params() + mine.offset;
    if (!mine.replicated()) {
      int64_t total = 0, at = 0;
      for (int r = 0; r < size; ++r) {
        counts[static_cast<size_t>(r)] = ranks[static_cast<size_t>(r)].tensors()[i].numel;
        if (r == model.tp().rank) at = total;
        total += counts[static_cast<size_t>(r)];
      }
      gathered.resize(static_cast<size_t>(total));
      std::copy(data, data + mine.numel, gathered.begin() + at);
      RETURN_IF_ERROR(tp->AllGather(gathered.data(), counts));
      whole.resize(static_cast<size_t>(g.numel));
      at = 0;
      for (int r = 0; r < size; ++r) {
        CopyOverlap(ranks[static_cast<size_t>(r)].tensors()[i], gathered.data() + at, g,
                    whole.data());
        at += counts[static_cast<size_t>(r)];
      }
      data = whole.data();
    }
    if (writer != nullptr && written.ok()) written = writer->Append(data, g.numel);
  }
  if (writer != nullptr && written.ok()) written = writer->Finish();
  return written;
}

}  // namespace lote::engine
