#include "data/reference_tokenizer.h"

#include <sentencepiece_processor.h>

#include "data/sentencepiece_model.h"

namespace lote::data {

ReferenceTokenizer::ReferenceTokenizer()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
ReferenceTokenizer::~ReferenceTokenizer() = default;

Result<std::unique_ptr<ReferenceTokenizer>> ReferenceTokenizer::Load(
    const std::string& model_path) {
  // Parse first: a clear "not a SentencePiece model" error beats libsentencepiece's.
  auto model = SentencePieceModel::Load(model_path);
  if (!model.ok()) return model.status();
  std::unique_ptr<ReferenceTokenizer> t(new ReferenceTokenizer());
  auto st = t->sp_->Load(model_path);
  if (!st.ok()) {
    return Status::InvalidArgument(model_path +
                                   ": libsentencepiece cannot load it: " + st.ToString());
  }
  return t;
}

Status ReferenceTokenizer::Encode(std::string_view text, std::vector<int32_t>* ids) const {
  std::vector<int> out;
  auto st = sp_->Encode(absl::string_view(text.data(), text.size()), &out);
  if (!st.ok()) return Status::Internal("sentencepiece: " + st.ToString());
  ids->insert(ids->end(), out.begin(), out.end());
  return Status::Ok();
}

int32_t ReferenceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int32_t ReferenceTokenizer::bos_id() const { return sp_->bos_id(); }
int32_t ReferenceTokenizer::eos_id() const { return sp_->eos_id(); }

}  // namespace lote::data
