#include "data/sentencepiece_model.h"

#include <cstring>

#include "common/files.h"

namespace lote::data {
namespace {

// A minimal protobuf wire-format reader.
class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }

  bool ReadVarint(uint64_t* out) {
    uint64_t r = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      uint8_t c = static_cast<uint8_t>(data_[pos_++]);
      r |= static_cast<uint64_t>(c & 0x7F) << shift;
      if (c < 0x80) {
        *out = r;
        return true;
      }
    }
    return false;
  }

  // Reads one field: number, wire type, and its value (varint or bytes).
  bool ReadField(uint32_t* field, uint32_t* wire, uint64_t* varint, std::string_view* bytes) {
    uint64_t key;
    if (!ReadVarint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<uint32_t>(key & 7);
    if (*field == 0) return false;
    switch (*wire) {
      case 0:
        return ReadVarint(varint);
      case 1:
        if (data_.size() - pos_ < 8) return false;
        *bytes = data_.substr(pos_, 8);
        pos_ += 8;
        return true;
      case 5:
        if (data_.size() - pos_ < 4) return false;
        *bytes = data_.substr(pos_, 4);
        pos_ += 4;
        return true;
      case 2: {
        uint64_t len;
        if (!ReadVarint(&len) || len > data_.size() - pos_) return false;
        *bytes = data_.substr(pos_, len);
        pos_ += len;
        return true;
      }
      default:
        return false;
    }
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

Status NotAModel(std::string_view why) {
  return Status::InvalidArgument("not a SentencePiece model (" + std::string(why) +
                                 "); pass the tokenizer.model file of a SentencePiece tokenizer");
}

int32_t AsInt32(uint64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }

Status ParsePiece(std::string_view bytes, SentencePiece* out) {
  WireReader r(bytes);
  bool has_piece = false;
  while (!r.done()) {
    uint32_t f, w;
    uint64_t v = 0;
    std::string_view b;
    if (!r.ReadField(&f, &w, &v, &b)) return NotAModel("malformed piece");
    if (f == 1 && w == 2) {
      out->piece = std::string(b);
      has_piece = true;
    } else if (f == 2 && w == 5) {
      std::memcpy(&out->score, b.data(), 4);
    } else if (f == 3 && w == 0) {
      if (v < 1 || v > 6) return NotAModel("unknown piece type " + std::to_string(v));
      out->type = static_cast<PieceType>(v);
    }
  }
  if (!has_piece) return NotAModel("piece without text");
  return Status::Ok();
}

Status ParseNormalizer(std::string_view bytes, SentencePieceModel* m) {
  WireReader r(bytes);
  while (!r.done()) {
    uint32_t f, w;
    uint64_t v = 0;
    std::string_view b;
    if (!r.ReadField(&f, &w, &v, &b)) return NotAModel("malformed normalizer_spec");
    if (f == 1 && w == 2) m->normalizer_name = std::string(b);
    if (f == 2 && w == 2) m->precompiled_charsmap = std::string(b);
    if (f == 3 && w == 0) m->add_dummy_prefix = v != 0;
    if (f == 4 && w == 0) m->remove_extra_whitespaces = v != 0;
    if (f == 5 && w == 0) m->escape_whitespaces = v != 0;
  }
  return Status::Ok();
}

Status ParseTrainer(std::string_view bytes, SentencePieceModel* m) {
  WireReader r(bytes);
  while (!r.done()) {
    uint32_t f, w;
    uint64_t v = 0;
    std::string_view b;
    if (!r.ReadField(&f, &w, &v, &b)) return NotAModel("malformed trainer_spec");
    if (w != 0) continue;
    switch (f) {
      case 3:
        if (v < 1 || v > 4) return NotAModel("unknown model_type " + std::to_string(v));
        m->model_type = static_cast<ModelType>(v);
        break;
      case 24:
        m->treat_whitespace_as_suffix = v != 0;
        break;
      case 35:
        m->byte_fallback = v != 0;
        break;
      case 40:
        m->unk_id = AsInt32(v);
        break;
      case 41:
        m->bos_id = AsInt32(v);
        break;
      case 42:
        m->eos_id = AsInt32(v);
        break;
      case 43:
        m->pad_id = AsInt32(v);
        break;
      default:
        break;
    }
  }
  return Status::Ok();
}

}  // namespace

Result<SentencePieceModel> SentencePieceModel::Parse(std::string_view bytes) {
  SentencePieceModel m;
  WireReader r(bytes);
  bool has_trainer = false;
  while (!r.done()) {
    uint32_t f, w;
    uint64_t v = 0;
    std::string_view b;
    if (!r.ReadField(&f, &w, &v, &b)) return NotAModel("malformed protobuf");
    if (f == 1 && w == 2) {
      SentencePiece p;
      RETURN_IF_ERROR(ParsePiece(b, &p));
      m.pieces.push_back(std::move(p));
    } else if (f == 2 && w == 2) {
      RETURN_IF_ERROR(ParseTrainer(b, &m));
      has_trainer = true;
    } else if (f == 3 && w == 2) {
      RETURN_IF_ERROR(ParseNormalizer(b, &m));
    }
  }
  if (m.pieces.empty()) return NotAModel("no pieces");
  if (!has_trainer) return NotAModel("no trainer_spec");
  const int32_t n = m.vocab_size();
  auto check_id = [&](int32_t id, std::string_view what) -> Status {
    if (id >= n)
      return NotAModel(std::string(what) + " id " + std::to_string(id) + " out of range");
    return Status::Ok();
  };
  RETURN_IF_ERROR(check_id(m.unk_id, "unk"));
  RETURN_IF_ERROR(check_id(m.bos_id, "bos"));
  RETURN_IF_ERROR(check_id(m.eos_id, "eos"));
  RETURN_IF_ERROR(check_id(m.pad_id, "pad"));
  return m;
}

Result<SentencePieceModel> SentencePieceModel::Load(const std::string& path) {
  auto bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status().WithContext("cannot read tokenizer");
  auto m = Parse(*bytes);
  if (!m.ok()) return m.status().WithContext(path);
  return m;
}

}  // namespace lote::data
