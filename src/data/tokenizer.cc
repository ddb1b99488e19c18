#include "data/tokenizer.h"

#include "data/bpe_tokenizer.h"
#include "data/reference_tokenizer.h"
#include "data/sentencepiece_model.h"

namespace lote::data {

Result<std::unique_ptr<Tokenizer>> OpenTokenizer(const std::string& model_path,
                                                 TokenizerKind kind) {
  if (kind == TokenizerKind::kReference) {
    ASSIGN_OR_RETURN(auto ref, ReferenceTokenizer::Load(model_path));
    return std::unique_ptr<Tokenizer>(std::move(ref));
  }
  ASSIGN_OR_RETURN(SentencePieceModel model, SentencePieceModel::Load(model_path));
  auto bpe = BpeTokenizer::Create(model);
  if (bpe.ok()) return std::unique_ptr<Tokenizer>(std::move(bpe).value());
  if (kind == TokenizerKind::kLote || bpe.status().code() != StatusCode::kUnimplemented) {
    return bpe.status().WithContext(model_path);
  }
  ASSIGN_OR_RETURN(auto ref, ReferenceTokenizer::Load(model_path));
  return std::unique_ptr<Tokenizer>(std::move(ref));
}

}  // namespace lote::data
