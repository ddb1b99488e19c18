// BpeTokenizer: lote's exact encoder for SentencePiece BPE models.
//
// Returns the same ids as libsentencepiece's SentencePieceProcessor::Encode
// for models with model_type=BPE and identity normalization (an empty
// precompiled_charsmap, as Llama's): whitespace escaped to U+2581 "▁",
// add_dummy_prefix, remove_extra_whitespaces, malformed UTF-8 replaced by
// U+FFFD one byte at a time, user-defined pieces matched first and never
// merged, merges chosen by piece score (ties: leftmost), UNUSED pieces
// re-split, unknown characters to byte pieces (byte_fallback) or to one unk id
// per run of unknowns.
//
// Speed: when the vocabulary allows it (no piece contains "x▁" with x not "▁",
// every character of a piece is itself a piece, no user-defined or unused
// pieces) the text is cut before each run of whitespace into words that merges
// can never cross; each distinct word is encoded once and kept in a WordCache
// shared by all threads (lock-free reads, no per-thread copies), and merges
// are looked up by (left id, right id). Otherwise the whole text goes through
// the general algorithm, which mirrors libsentencepiece step by step.
// The ids never depend on the cache's state, so output is identical for any
// number of threads and any order of calls.
// Thread safety: immutable after Create except for the word cache, which is
// safe for concurrent use; Encode may be called from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/sentencepiece_model.h"
#include "data/tokenizer.h"
#include "data/word_cache.h"

namespace lote::data {

class BpeTokenizer final : public Tokenizer {
 public:
  struct Options {
    bool allow_fast_path = true;  // false: always the general algorithm (tests)
    // Distinct words kept, for all threads together; words first seen after
    // that are encoded each time they occur.
    size_t max_cached_words = 1 << 20;
  };

  // Unimplemented (naming the reason) for models it cannot encode exactly:
  // not BPE, a non-identity normalizer, treat_whitespace_as_suffix.
  static Result<std::unique_ptr<BpeTokenizer>> Create(const SentencePieceModel& model,
                                                      Options options);
  static Result<std::unique_ptr<BpeTokenizer>> Create(const SentencePieceModel& model) {
    return Create(model, Options());
  }
  ~BpeTokenizer() override;

  Status Encode(std::string_view text, std::vector<int32_t>* ids) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  std::string name() const override { return "lote-bpe"; }

  // Whether the cached word-level path is in use for this model.
  bool fast_path() const { return fast_path_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const;
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
  struct Merge {
    int32_t id;
    float score;
  };

  BpeTokenizer();
  // libsentencepiece's PieceToId: reserved pieces, then normal ones, else unk.
  int32_t PieceToId(std::string_view piece) const;
  // Normalizes `text` as SentencePiece's identity normalizer does.
  void Normalize(std::string_view text, std::string* out) const;
  // The general algorithm over normalized text; appends ids.
  void EncodeGeneral(std::string_view normalized, std::vector<int32_t>* ids) const;
  // Appends the ids of one piece of surface text (unknown -> bytes or unk).
  void EmitPiece(std::string_view piece, int32_t id, std::vector<int32_t>* ids) const;
  // Fast path: one normalized word -> ids.
  void EncodeWord(std::string_view normalized_word, std::vector<int32_t>* ids) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;
  int32_t CharId(std::string_view ch) const;

  std::vector<SentencePiece> pieces_;
  StringMap normal_;    // NORMAL, USER_DEFINED, UNUSED
  StringMap reserved_;  // CONTROL, UNKNOWN, BYTE
  std::vector<std::string> user_defined_;
  size_t max_user_defined_len_ = 0;
  int32_t unk_id_ = 0;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  int32_t byte_ids_[256];
  bool byte_fallback_ = false;
  bool add_dummy_prefix_ = true;
  bool remove_extra_whitespaces_ = false;
  bool escape_whitespaces_ = true;
  bool has_unused_ = false;

  bool fast_path_ = false;
  int32_t ascii_ids_[128];
  std::unordered_map<uint32_t, int32_t> char_ids_;  // UTF-8 bytes packed little-endian -> id
  std::vector<uint64_t> merge_keys_;                // open addressing, key 0 = empty
  std::vector<Merge> merge_values_;
  uint64_t merge_mask_ = 0;
  // Fast path: distinct words (raw text) -> ids. A cache: inserting into it
  // from const Encode changes no observable result.
  std::unique_ptr<WordCache> words_;
};

}  // namespace lote::data
