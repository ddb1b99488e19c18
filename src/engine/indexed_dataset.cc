#include "engine/indexed_dataset.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "common/files.h"

namespace lote::engine {
namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;  // little-endian host assumed (x86-64, aarch64)
}

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

  const std::string idx_path = dir + "/data.idx";
  ASSIGN_OR_RETURN(std::string idx, ReadFile(idx_path));
  auto corrupt = [&](const std::string& why) {
    return Status::DataLoss(
        fmt::format("{}: {}; rewrite the dataset with `lote data prepare`", idx_path, why));
  };
  const size_t header = 9 + 8 + 1 + 8 + 8;
  if (idx.size() < header || std::memcmp(idx.data(), kMagic, 9) != 0) {
    return corrupt("not a Megatron MMIDIDX index (bad magic)");
  }
  const auto* p = reinterpret_cast<const uint8_t*>(idx.data());
  if (Load<uint64_t>(p + 9) != 1) return corrupt("unsupported index version (want 1)");
  const uint8_t code = p[17];
  if (code == 8) {
    d->token_bytes_ = 2;
  } else if (code == 4) {
    d->token_bytes_ = 4;
  } else {
    return corrupt(fmt::format("unsupported dtype code {} (want 8 = uint16 or 4 = int32)", code));
  }
  d->num_sequences_ = static_cast<int64_t>(Load<uint64_t>(p + 18));
  const uint64_t docs = Load<uint64_t>(p + 26);
  const size_t need = header + 4 * static_cast<size_t>(d->num_sequences_) +
                      8 * static_cast<size_t>(d->num_sequences_) + 8 * docs;
  if (idx.size() != need) {
    return corrupt(fmt::format("size {} bytes, expected {} for {} sequences and {} documents",
                               idx.size(), need, d->num_sequences_, docs));
  }
  if (d->num_sequences_ != manifest_count) {
    return corrupt(
        fmt::format("{} sequences but manifest.json says {}", d->num_sequences_, manifest_count));
  }
  if (auto it = d->manifest_.find("dtype"); it != d->manifest_.end() && it->is_string()) {
    const std::string want = d->token_bytes_ == 2 ? "uint16" : "int32";
    if (it->get<std::string>() != want) {
      return corrupt(
          fmt::format("index dtype is {} but manifest.json says {}", want, it->get<std::string>()));
    }
  }

  const std::string bin_path = dir + "/data.bin";
  const int fd = ::open(bin_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status::NotFound(fmt::format("cannot open {}: {}", bin_path, std::strerror(errno)));
  }
  struct stat st {};
  ::fstat(fd, &st);
  d->bin_size_ = static_cast<size_t>(st.st_size);
  if (d->bin_size_ > 0) {
    void* m = ::mmap(nullptr, d->bin_size_, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      return Status::Internal(fmt::format("cannot map {}: {}", bin_path, std::strerror(errno)));
    }
    d->bin_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);

  const uint8_t* sizes = p + header;
  const uint8_t* pointers = sizes + 4 * d->num_sequences_;
  d->pointers_.resize(static_cast<size_t>(d->num_sequences_));
  for (int64_t i = 0; i < d->num_sequences_; ++i) {
    const int32_t size = Load<int32_t>(sizes + 4 * i);
    const int64_t ptr = Load<int64_t>(pointers + 8 * i);
    if (size != d->block_size_) {
      return corrupt(fmt::format("sequence {} has {} tokens, but blocks are {} tokens", i, size,
                                 d->block_size_));
    }
    if (ptr < 0 ||
        static_cast<uint64_t>(ptr) + static_cast<uint64_t>(size) * d->token_bytes_ > d->bin_size_) {
      return corrupt(fmt::format("sequence {} lies outside data.bin ({} bytes)", i, d->bin_size_));
    }
    d->pointers_[static_cast<size_t>(i)] = ptr;
  }
  return d;
}

IndexedDataset::~IndexedDataset() {
  if (bin_ != nullptr) ::munmap(const_cast<uint8_t*>(bin_), bin_size_);
}

void IndexedDataset::Read(int64_t seq, int64_t begin, int64_t count, int32_t* out) const {
  const uint8_t* base = bin_ + pointers_[static_cast<size_t>(seq)] + begin * token_bytes_;
  if (token_bytes_ == 2) {
    for (int64_t i = 0; i < count; ++i) out[i] = Load<uint16_t>(base + 2 * i);
  } else {
    std::memcpy(out, base, sizeof(int32_t) * static_cast<size_t>(count));
  }
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
