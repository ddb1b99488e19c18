// Tokenizer: text -> token ids for a SentencePiece `tokenizer.model`.
//
// Two implementations return the same ids:
// - BpeTokenizer (bpe_tokenizer.h): lote's own encoder for SentencePiece BPE
//   models with identity normalization (Llama's), several times faster than
//   libsentencepiece.
// - ReferenceTokenizer (reference_tokenizer.h): libsentencepiece itself, for
//   any model.
// Encode never adds BOS/EOS; callers add them (see bos_id()).
// Thread safety: Encode may be called from many threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Appends the ids of `text` to `ids`.
  virtual Status Encode(std::string_view text, std::vector<int32_t>* ids) const = 0;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when the model has none
  virtual int32_t eos_id() const = 0;  // -1 when the model has none
  // "lote-bpe" or "sentencepiece".
  virtual std::string name() const = 0;
};

enum class TokenizerKind {
  kAuto,       // lote's BPE encoder when the model allows it, else the reference
  kLote,       // lote's BPE encoder; Unimplemented for models it cannot encode exactly
  kReference,  // libsentencepiece
};

// Loads `model_path` (a SentencePiece model file). InvalidArgument naming the
// file when it is not one.
Result<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& model_path,
                                                 TokenizerKind kind = TokenizerKind::kAuto);

}  // namespace lote::data
