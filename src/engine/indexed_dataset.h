// IndexedDataset: read-only, memory-mapped view of the dataset `lote data prepare`
// writes: a directory with data.bin (little-endian uint16 or int32 tokens), data.idx
// (Megatron MMIDIDX index: one entry per packed block of block_size tokens) and
// manifest.json (vocab_size, block_size, num_sequences, dtype, tokenizer_sha256,
// bos_id). Open validates the index against the manifest and the .bin size, so reads
// never fail afterwards. Immutable after Open; safe to read from several threads.
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

namespace lote::engine {

class IndexedDataset {
 public:
  static Result<std::unique_ptr<IndexedDataset>> Open(const std::string& dir);
  ~IndexedDataset();
  IndexedDataset(const IndexedDataset&) = delete;
  IndexedDataset& operator=(const IndexedDataset&) = delete;

  int64_t num_sequences() const { return num_sequences_; }
  int64_t block_size() const { return block_size_; }
  int64_t vocab_size() const { return vocab_size_; }
  const Json& manifest() const { return manifest_; }
  // out[0, count) = tokens [begin, begin+count) of sequence `seq` (caller keeps in range).
  void Read(int64_t seq, int64_t begin, int64_t count, int32_t* out) const;

 private:
  IndexedDataset() = default;
  Json manifest_;
  int64_t num_sequences_ = 0, block_size_ = 0, vocab_size_ = 0;
  int token_bytes_ = 2;
  std::vector<int64_t> pointers_;  // byte offset of each sequence in data.bin
  const uint8_t* bin_ = nullptr;
  size_t bin_size_ = 0;
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
