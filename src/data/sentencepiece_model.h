// SentencePieceModel: the parts of a SentencePiece `ModelProto` (the
// `tokenizer.model` file) that encoding needs, parsed from the protobuf wire
// format by lote itself (no protobuf dependency).
//
// Field numbers follow sentencepiece_model.proto: ModelProto.pieces = 1,
// trainer_spec = 2, normalizer_spec = 3; SentencePiece.piece = 1, score = 2,
// type = 3; NormalizerSpec.name = 1, precompiled_charsmap = 2,
// add_dummy_prefix = 3, remove_extra_whitespaces = 4, escape_whitespaces = 5;
// TrainerSpec.model_type = 3, vocab_size = 4, treat_whitespace_as_suffix = 24,
// byte_fallback = 35, unk_id = 40, bos_id = 41, eos_id = 42, pad_id = 43.
// Absent fields take the proto2 defaults of that file.
// Immutable value type; thread safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::data {

enum class PieceType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

enum class ModelType : int32_t { kUnigram = 1, kBpe = 2, kWord = 3, kChar = 4 };

struct SentencePiece {
  std::string piece;
  float score = 0;
  PieceType type = PieceType::kNormal;
};

struct SentencePieceModel {
  std::vector<SentencePiece> pieces;  // index = token id
  // NormalizerSpec
  std::string normalizer_name;
  std::string precompiled_charsmap;  // empty for "identity"
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
  // TrainerSpec
  ModelType model_type = ModelType::kUnigram;
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;
  int32_t unk_id = 0;
  int32_t bos_id = 1;
  int32_t eos_id = 2;
  int32_t pad_id = -1;

  int32_t vocab_size() const { return static_cast<int32_t>(pieces.size()); }

  // Parses a serialized ModelProto. InvalidArgument (saying it is not a
  // SentencePiece model) when the bytes are not one.
  static Result<SentencePieceModel> Parse(std::string_view bytes);
  // Reads and parses a file; errors name the file.
  static Result<SentencePieceModel> Load(const std::string& path);
};

}  // namespace lote::data
