// IndexedDataset: the training view of the dataset `lote data prepare` writes
// (data.bin, data.idx, manifest.json; format in src/data/indexed_dataset.h and
// docs/datasets.md). The Megatron index is read and memory-mapped by lote_data's
// reader (data::IndexedDataset); this class adds what training needs: a
// manifest.json with vocab_size, block_size and num_sequences that agree with
// the index, and every sequence exactly one block long. Open checks all of
// that, so reads never fail afterwards. Immutable after Open; safe to read from
// several threads.
//
// BatchSampler: turns blocks into training samples. A sample is seq_len+1 consecutive
// tokens inside one block (inputs = the first seq_len, targets = the last seq_len, the
// label shift); a block of S tokens yields floor((S-1)/seq_len) samples. When seq_len
// equals the block size the shift happens inside the block and the last position has
// no target (-1). The last `val_fraction` of the blocks are held out for validation.
// Training samples come in a permutation per epoch drawn from (seed, epoch); the
// position (epoch, index) can be saved and restored. Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "data/indexed_dataset.h"

namespace lote::engine {

class IndexedDataset {
 public:
  static Result<std::unique_ptr<IndexedDataset>> Open(const std::string& dir);
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  int64_t num_sequences() const { return data_->num_sequences(); }
  int64_t block_size() const { return block_size_; }
  int64_t vocab_size() const { return vocab_size_; }
  const Json& manifest() const { return manifest_; }
  // out[0, count) = tokens [begin, begin+count) of sequence `seq` (caller keeps in range).
  void Read(int64_t seq, int64_t begin, int64_t count, int32_t* out) const {
    data_->Read(seq, begin, count, out);
  }

 private:
  IndexedDataset() = default;
  Json manifest_;
  int64_t block_size_ = 0, vocab_size_ = 0;
  std::unique_ptr<data::IndexedDataset> data_;
};

struct SamplerState {
  uint64_t epoch = 0;
  int64_t position = 0;  // next index into the epoch's permutation
  Json ToJson() const;
  static Result<SamplerState> FromJson(const Json& json);
};

class BatchSampler {
 public:
  static Result<std::unique_ptr<BatchSampler>> Create(const IndexedDataset* data, int64_t seq_len,
                                                      double val_fraction, uint64_t seed);

  int64_t num_train_samples() const { return train_blocks_ * windows_; }
  int64_t num_val_samples() const { return val_blocks_ * windows_; }
  // inputs/targets [B, seq_len]: the next B training samples.
  void NextTrainBatch(int64_t B, int32_t* inputs, int32_t* targets);
  // Advances past B training samples exactly as NextTrainBatch would (another
  // data-parallel rank's share of the global batch).
  void SkipTrainBatch(int64_t B);
  // Validation sample `index` in [0, num_val_samples()).
  void ValSample(int64_t index, int32_t* inputs, int32_t* targets) const;
  SamplerState state() const { return state_; }
  Status Restore(const SamplerState& state);

 private:
  BatchSampler() = default;
  void Sample(int64_t block, int64_t window, int32_t* inputs, int32_t* targets) const;
  void Shuffle();

  const IndexedDataset* data_ = nullptr;
  int64_t seq_len_ = 0, windows_ = 0, train_blocks_ = 0, val_blocks_ = 0;
  uint64_t seed_ = 0;
  SamplerState state_;
  std::vector<int64_t> order_;        // permutation of training samples for state_.epoch
  mutable std::vector<int32_t> buf_;  // one sample of seq_len+1 tokens
};

}  // namespace lote::engine
