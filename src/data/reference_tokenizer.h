// ReferenceTokenizer: libsentencepiece (Debian libsentencepiece-dev) behind the
// Tokenizer interface; the truth lote's own encoder is checked against.
// Encodes whole documents of any length (there is no per-sentence length limit
// on the encoding path; the trainer's max_sentence_length does not apply).
// Thread safety: Encode is safe to call concurrently.
#pragma once

#include <memory>
#include <string>

#include "data/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace lote::data {

class ReferenceTokenizer final : public Tokenizer {
 public:
  static Result<std::unique_ptr<ReferenceTokenizer>> Load(const std::string& model_path);
  ~ReferenceTokenizer() override;

  Status Encode(std::string_view text, std::vector<int32_t>* ids) const override;
  int32_t vocab_size() const override;
  int32_t bos_id() const override;
  int32_t eos_id() const override;
  std::string name() const override { return "sentencepiece"; }

 private:
  ReferenceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace lote::data
