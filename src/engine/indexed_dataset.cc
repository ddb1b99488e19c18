#include "engine/indexed_dataset.h"

#include <fmt/format.h>

#include <cmath>

#include "common/files.h"

namespace lote::engine {
namespace {

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Result<int64_t> ManifestInt(const Json& m, const char* key, const std::string& path) {
  auto it = m.find(key);
  if (it == m.end() || !it->is_number_integer()) {
    return Status::DataLoss(fmt::format(
        "{} lacks integer \"{}\"; rewrite the dataset with `lote data prepare`", path, key));
  }
  return it->get<int64_t>();
}

}  // namespace

Result<std::unique_ptr<IndexedDataset>> IndexedDataset::Open(const std::string& dir) {
  std::unique_ptr<IndexedDataset> d(new IndexedDataset());
  const std::string manifest_path = dir + "/manifest.json";
  if (!FileExists(manifest_path)) {
    return Status::NotFound(fmt::format(
        "{} is not a lote dataset (no manifest.json); make one with `lote data prepare`", dir));
  }
  auto manifest = ReadJsonFile(manifest_path);
  if (!manifest.ok()) return manifest.status().WithContext("reading " + manifest_path);
  d->manifest_ = std::move(*manifest);
  ASSIGN_OR_RETURN(d->vocab_size_, ManifestInt(d->manifest_, "vocab_size", manifest_path));
  ASSIGN_OR_RETURN(d->block_size_, ManifestInt(d->manifest_, "block_size", manifest_path));
  ASSIGN_OR_RETURN(int64_t manifest_count,
                   ManifestInt(d->manifest_, "num_sequences", manifest_path));

  // The index and data.bin: lote_data's reader (checks the header, the index
  // size and that every sequence lies inside data.bin).
  auto data = data::IndexedDataset::Open(dir, {.read_manifest = false});
  if (!data.ok()) {
    return data.status().WithContext("rewrite the dataset with `lote data prepare`");
  }
  d->data_ = std::move(*data);
  const std::string idx_path = dir + "/data.idx";
  auto corrupt = [&](const std::string& why) {
    return Status::DataLoss(
        fmt::format("{}: {}; rewrite the dataset with `lote data prepare`", idx_path, why));
  };
  const int64_t count = d->data_->num_sequences();
  if (count != manifest_count) {
    return corrupt(fmt::format("{} sequences but manifest.json says {}", count, manifest_count));
  }
  if (auto it = d->manifest_.find("dtype"); it != d->manifest_.end() && it->is_string()) {
    const std::string want = d->data_->dtype() == data::kDtypeUint16 ? "uint16" : "int32";
    if (it->get<std::string>() != want) {
      return corrupt(
          fmt::format("index dtype is {} but manifest.json says {}", want, it->get<std::string>()));
    }
  }
  for (int64_t i = 0; i < count; ++i) {
    if (d->data_->size(i) != d->block_size_) {
      return corrupt(fmt::format("sequence {} has {} tokens, but blocks are {} tokens", i,
                                 d->data_->size(i), d->block_size_));
    }
  }
  return d;
}

Json SamplerState::ToJson() const { return Json{{"epoch", epoch}, {"position", position}}; }

Result<SamplerState> SamplerState::FromJson(const Json& json) {
  if (!json.is_object() || !json.contains("epoch") || !json.contains("position")) {
    return Status::InvalidArgument("sampler state needs \"epoch\" and \"position\"");
  }
  SamplerState s;
  s.epoch = json["epoch"].get<uint64_t>();
  s.position = json["position"].get<int64_t>();
  return s;
}

Result<std::unique_ptr<BatchSampler>> BatchSampler::Create(const IndexedDataset* data,
                                                           int64_t seq_len, double val_fraction,
                                                           uint64_t seed) {
  if (seq_len > data->block_size()) {
    return Status::InvalidArgument(fmt::format(
        "--seq-len {} is longer than the dataset's blocks ({} tokens); lower --seq-len or "
        "prepare the dataset with a larger block size",
        seq_len, data->block_size()));
  }
  if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
    return Status::InvalidArgument("validation fraction must be in [0, 1)");
  }
  std::unique_ptr<BatchSampler> s(new BatchSampler());
  s->data_ = data;
  s->seq_len_ = seq_len;
  s->seed_ = seed;
  s->windows_ = std::max<int64_t>(1, (data->block_size() - 1) / seq_len);
  const int64_t n = data->num_sequences();
  s->val_blocks_ = val_fraction > 0 && n >= 2
                       ? std::max<int64_t>(1, static_cast<int64_t>(std::llround(n * val_fraction)))
                       : 0;
  s->train_blocks_ = n - s->val_blocks_;
  if (s->train_blocks_ <= 0) {
    return Status::InvalidArgument(fmt::format(
        "the dataset has {} blocks, too few for a training split; prepare more data", n));
  }
  s->buf_.resize(static_cast<size_t>(seq_len + 1));
  s->Shuffle();
  return s;
}

void BatchSampler::Shuffle() {
  const int64_t n = num_train_samples();
  order_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order_[static_cast<size_t>(i)] = i;
  uint64_t state = seed_ * 0x9E3779B97F4A7C15ull + state_.epoch;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(SplitMix(&state) % static_cast<uint64_t>(i + 1));
    std::swap(order_[static_cast<size_t>(i)], order_[static_cast<size_t>(j)]);
  }
}

void BatchSampler::Sample(int64_t block, int64_t window, int32_t* inputs, int32_t* targets) const {
  const int64_t begin = window * seq_len_;
  const int64_t count = std::min(seq_len_ + 1, data_->block_size() - begin);
  int32_t* buf = buf_.data();
  data_->Read(block, begin, count, buf);
  for (int64_t t = 0; t < seq_len_; ++t) {
    inputs[t] = buf[t];
    targets[t] = t + 1 < count ? buf[t + 1] : -1;
  }
}

void BatchSampler::NextTrainBatch(int64_t B, int32_t* inputs, int32_t* targets) {
  for (int64_t b = 0; b < B; ++b) {
    if (state_.position >= num_train_samples()) {
      ++state_.epoch;
      state_.position = 0;
      Shuffle();
    }
    const int64_t sample = order_[static_cast<size_t>(state_.position++)];
    Sample(sample / windows_, sample % windows_, inputs + b * seq_len_, targets + b * seq_len_);
  }
}

void BatchSampler::SkipTrainBatch(int64_t B) {
  for (int64_t b = 0; b < B; ++b) {
    if (state_.position >= num_train_samples()) {
      ++state_.epoch;
      state_.position = 0;
      Shuffle();
    }
    ++state_.position;
  }
}

void BatchSampler::ValSample(int64_t index, int32_t* inputs, int32_t* targets) const {
  Sample(train_blocks_ + index / windows_, index % windows_, inputs, targets);
}

Status BatchSampler::Restore(const SamplerState& state) {
  if (state.position < 0 || state.position > num_train_samples()) {
    return Status::InvalidArgument(
        fmt::format("sampler position {} is outside the epoch of {} samples", state.position,
                    num_train_samples()));
  }
  state_ = state;
  Shuffle();
  return Status::Ok();
}

}  // namespace lote::engine
