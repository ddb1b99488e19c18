#include "data/bpe_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <queue>

namespace lote::data {
namespace {

constexpr std::string_view kSpaceSymbol = "\xE2\x96\x81";      // U+2581 "▁"
constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD
constexpr uint64_t kEmptyKey = ~0ull;
constexpr size_t kMaxCachedWordBytes = 96;
constexpr size_t kLinearMergeLimit = 256;

// Length of the UTF-8 character that starts with `c`, by its lead byte alone
// (libsentencepiece's OneCharLen).
inline size_t OneCharLen(unsigned char c) {
  static constexpr uint8_t kLen[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLen[c >> 4];
}

inline bool IsTrail(unsigned char c) { return (c & 0xC0) == 0x80; }
inline bool IsValidCodepoint(uint32_t c) { return c < 0xD800 || (c >= 0xE000 && c <= 0x10FFFF); }

// Length of the valid UTF-8 character at the start of s, or 0 when malformed
// (libsentencepiece's DecodeUTF8 rules).
inline size_t ValidCharLen(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  if (c < 0x80) return 1;
  if (n >= 2 && (c & 0xE0) == 0xC0) {
    uint32_t cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu);
    if (IsTrail(s[1]) && cp >= 0x80 && IsValidCodepoint(cp)) return 2;
  } else if (n >= 3 && (c & 0xF0) == 0xE0) {
    uint32_t cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu);
    if (IsTrail(s[1]) && IsTrail(s[2]) && cp >= 0x800 && IsValidCodepoint(cp)) return 3;
  } else if (n >= 4 && (c & 0xF8) == 0xF0) {
    uint32_t cp =
        ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    if (IsTrail(s[1]) && IsTrail(s[2]) && IsTrail(s[3]) && cp >= 0x10000 && IsValidCodepoint(cp))
      return 4;
  }
  return 0;
}

// Appends n ids (small n: a plain loop beats vector::insert's memmove calls).
inline void AppendIds(std::vector<int32_t>* out, const int32_t* v, size_t n) {
  const size_t old = out->size();
  out->resize(old + n);
  int32_t* d = out->data() + old;
  for (size_t i = 0; i < n; ++i) d[i] = v[i];
}

inline uint64_t MixKey(uint64_t k) {
  k ^= k >> 33;
  k *= 0xFF51AFD7ED558CCDull;
  k ^= k >> 33;
  return k;
}

inline uint32_t PackChar(std::string_view ch) {
  uint32_t v = 0;
  std::memcpy(&v, ch.data(), std::min<size_t>(ch.size(), 4));
  return v;
}

}  // namespace

BpeTokenizer::BpeTokenizer() = default;

BpeTokenizer::~BpeTokenizer() = default;

size_t BpeTokenizer::StringHash::operator()(std::string_view s) const { return WordCache::Hash(s); }

Result<std::unique_ptr<BpeTokenizer>> BpeTokenizer::Create(const SentencePieceModel& model,
                                                           Options options) {
  if (model.model_type != ModelType::kBpe) {
    return Status::Unimplemented(
        "lote's encoder handles SentencePiece BPE models only; this one is not BPE");
  }
  if (!model.precompiled_charsmap.empty()) {
    return Status::Unimplemented(
        "lote's encoder handles identity normalization only; this model uses '" +
        model.normalizer_name + "'");
  }
  if (model.treat_whitespace_as_suffix) {
    return Status::Unimplemented("lote's encoder does not handle treat_whitespace_as_suffix");
  }
  std::unique_ptr<BpeTokenizer> t(new BpeTokenizer());
  t->pieces_ = model.pieces;
  t->byte_fallback_ = model.byte_fallback;
  t->add_dummy_prefix_ = model.add_dummy_prefix;
  t->remove_extra_whitespaces_ = model.remove_extra_whitespaces;
  t->escape_whitespaces_ = model.escape_whitespaces;
  t->unk_id_ = -1;
  bool single_char_reserved = false;
  for (int32_t i = 0; i < model.vocab_size(); ++i) {
    const SentencePiece& p = model.pieces[i];
    const bool normal = p.type == PieceType::kNormal || p.type == PieceType::kUserDefined ||
                        p.type == PieceType::kUnused;
    StringMap& map = normal ? t->normal_ : t->reserved_;
    if (!map.emplace(p.piece, i).second) {
      return Status::InvalidArgument("SentencePiece model has the piece '" + p.piece + "' twice");
    }
    if (p.type == PieceType::kUserDefined) {
      t->user_defined_.push_back(p.piece);
      t->max_user_defined_len_ = std::max(t->max_user_defined_len_, p.piece.size());
    }
    if (p.type == PieceType::kUnused) t->has_unused_ = true;
    if (p.type == PieceType::kUnknown) t->unk_id_ = i;
    if (!normal && !p.piece.empty() &&
        OneCharLen(static_cast<unsigned char>(p.piece[0])) == p.piece.size()) {
      single_char_reserved = true;
    }
  }
  if (t->unk_id_ < 0) return Status::InvalidArgument("SentencePiece model has no unknown piece");
  t->bos_id_ = model.bos_id >= 0 && model.pieces[model.bos_id].type == PieceType::kControl
                   ? model.bos_id
                   : -1;
  t->eos_id_ = model.eos_id >= 0 && model.pieces[model.eos_id].type == PieceType::kControl
                   ? model.eos_id
                   : -1;
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    t->byte_ids_[b] = t->PieceToId(buf);
  }

  // Is the cached, id-based path exact for this vocabulary?
  bool fast = options.allow_fast_path && t->user_defined_.empty() && !t->has_unused_ &&
              !t->remove_extra_whitespaces_ && t->escape_whitespaces_ && !single_char_reserved;
  for (const auto& [piece, id] : t->normal_) {
    if (!fast) break;
    if (t->reserved_.count(piece)) fast = false;
    for (size_t k = 0; k < piece.size() && fast;) {
      size_t len = std::min(piece.size() - k, OneCharLen(static_cast<unsigned char>(piece[k])));
      std::string_view ch(piece.data() + k, len);
      if (!t->normal_.count(ch)) fast = false;  // a character that is not itself a piece
      if (k > 0 && ch == kSpaceSymbol && !(k >= 3 && piece.compare(k - 3, 3, kSpaceSymbol) == 0)) {
        fast = false;  // a piece that spans the start of a whitespace run
      }
      k += len;
    }
  }
  t->fast_path_ = fast;
  if (fast) {
    t->words_ = std::make_unique<WordCache>(options.max_cached_words);
    std::fill(std::begin(t->ascii_ids_), std::end(t->ascii_ids_), -1);
    std::vector<std::pair<uint64_t, Merge>> merges;
    for (const auto& [piece, id] : t->normal_) {
      size_t first = OneCharLen(static_cast<unsigned char>(piece[0]));
      if (first >= piece.size()) {
        if (piece.size() == 1 && static_cast<unsigned char>(piece[0]) < 128) {
          t->ascii_ids_[static_cast<unsigned char>(piece[0])] = id;
        } else {
          t->char_ids_[PackChar(piece)] = id;
        }
        continue;
      }
      for (size_t k = first; k < piece.size();
           k += OneCharLen(static_cast<unsigned char>(piece[k]))) {
        auto l = t->normal_.find(std::string_view(piece).substr(0, k));
        auto r = t->normal_.find(std::string_view(piece).substr(k));
        if (l == t->normal_.end() || r == t->normal_.end()) continue;
        uint64_t key = (static_cast<uint64_t>(l->second) << 32) | static_cast<uint32_t>(r->second);
        merges.push_back({key, Merge{id, t->pieces_[id].score}});
      }
    }
    size_t cap = 16;
    while (cap < merges.size() * 2) cap <<= 1;
    t->merge_keys_.assign(cap, kEmptyKey);
    t->merge_values_.assign(cap, Merge{-1, 0});
    t->merge_mask_ = cap - 1;
    for (const auto& [key, m] : merges) {
      size_t i = MixKey(key) & t->merge_mask_;
      while (t->merge_keys_[i] != kEmptyKey) i = (i + 1) & t->merge_mask_;
      t->merge_keys_[i] = key;
      t->merge_values_[i] = m;
    }
  }
  return t;
}

int32_t BpeTokenizer::PieceToId(std::string_view piece) const {
  auto r = reserved_.find(piece);
  if (r != reserved_.end()) return r->second;
  auto n = normal_.find(piece);
  if (n != normal_.end()) return n->second;
  return unk_id_;
}

const BpeTokenizer::Merge* BpeTokenizer::FindMerge(int32_t left, int32_t right) const {
  const uint64_t key = (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
  for (size_t i = MixKey(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const uint64_t k = merge_keys_[i];
    if (k == key) return &merge_values_[i];
    if (k == kEmptyKey) return nullptr;
  }
}

int32_t BpeTokenizer::CharId(std::string_view ch) const {
  if (ch.size() == 1 && static_cast<unsigned char>(ch[0]) < 128)
    return ascii_ids_[static_cast<unsigned char>(ch[0])];
  auto it = char_ids_.find(PackChar(ch));
  return it == char_ids_.end() ? -1 : it->second;
}

void BpeTokenizer::Normalize(std::string_view input, std::string* out) const {
  out->clear();
  const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : std::string_view(" ");
  // One normalized character (or user-defined piece) at the start of `in`, and
  // how many input bytes it consumes.
  auto next = [&](std::string_view in, size_t* consumed) -> std::string_view {
    if (!user_defined_.empty()) {
      size_t best = 0;
      for (size_t len = std::min(max_user_defined_len_, in.size()); len > 0 && best == 0; --len) {
        auto it = normal_.find(in.substr(0, len));
        if (it != normal_.end() && pieces_[it->second].type == PieceType::kUserDefined) best = len;
      }
      if (best) {
        *consumed = best;
        return in.substr(0, best);
      }
    }
    size_t len = ValidCharLen(reinterpret_cast<const unsigned char*>(in.data()), in.size());
    if (len == 0) {
      *consumed = 1;
      return kReplacementChar;
    }
    *consumed = len;
    return in.substr(0, len);
  };
  if (remove_extra_whitespaces_) {
    while (!input.empty() && input[0] == ' ') input.remove_prefix(1);
  }
  if (input.empty()) return;
  if (add_dummy_prefix_) out->append(space);
  bool is_prev_space = remove_extra_whitespaces_;
  while (!input.empty()) {
    size_t consumed = 0;
    std::string_view sp = next(input, &consumed);
    while (is_prev_space && !sp.empty() && sp[0] == ' ') sp.remove_prefix(1);
    if (!sp.empty()) {
      for (char c : sp) {
        if (c == ' ' && escape_whitespaces_) {
          out->append(kSpaceSymbol);
        } else {
          out->push_back(c);
        }
      }
      is_prev_space = sp.back() == ' ';
    }
    input.remove_prefix(consumed);
    if (!remove_extra_whitespaces_) is_prev_space = false;
  }
  if (remove_extra_whitespaces_) {
    while (out->size() >= space.size() &&
           out->compare(out->size() - space.size(), space.size(), space) == 0) {
      out->resize(out->size() - space.size());
    }
  }
}

void BpeTokenizer::EmitPiece(std::string_view piece, int32_t id, std::vector<int32_t>* ids) const {
  if (id == unk_id_ && byte_fallback_) {
    for (char c : piece) ids->push_back(byte_ids_[static_cast<unsigned char>(c)]);
  } else {
    ids->push_back(id);
  }
}

void BpeTokenizer::EncodeGeneral(std::string_view normalized, std::vector<int32_t>* ids) const {
  struct Symbol {
    int prev, next;
    bool freeze;
    std::string_view piece;
  };
  struct Pair {
    int left, right;
    float score;
    size_t size;
  };
  struct PairLess {
    bool operator()(const Pair& a, const Pair& b) const {
      return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
  };
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < normalized.size();) {
    std::string_view rest = normalized.substr(pos);
    size_t len = 0;
    bool freeze = false;
    for (size_t l = std::min(max_user_defined_len_, rest.size()); l > 0 && !user_defined_.empty();
         --l) {
      auto it = normal_.find(rest.substr(0, l));
      if (it != normal_.end() && pieces_[it->second].type == PieceType::kUserDefined) {
        len = l;
        freeze = true;
        break;
      }
    }
    if (!freeze) len = std::min(rest.size(), OneCharLen(static_cast<unsigned char>(rest[0])));
    const int index = static_cast<int>(symbols.size());
    symbols.push_back(Symbol{index - 1, pos + len < normalized.size() ? index + 1 : -1, freeze,
                             rest.substr(0, len)});
    pos += len;
  }
  std::priority_queue<Pair, std::vector<Pair>, PairLess> agenda;
  std::unordered_map<std::string, std::pair<std::string_view, std::string_view>> rev_merge;
  std::string concat;
  auto maybe_add = [&](int left, int right) {
    if (left == -1 || right == -1 || symbols[left].freeze || symbols[right].freeze) return;
    const std::string_view piece(symbols[left].piece.data(),
                                 symbols[left].piece.size() + symbols[right].piece.size());
    auto it = normal_.find(piece);
    if (it == normal_.end()) return;
    agenda.push(Pair{left, right, pieces_[it->second].score, piece.size()});
    if (pieces_[it->second].type == PieceType::kUnused) {
      rev_merge[std::string(piece)] = {symbols[left].piece, symbols[right].piece};
    }
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    maybe_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!agenda.empty()) {
    const Pair top = agenda.top();
    agenda.pop();
    Symbol& l = symbols[top.left];
    Symbol& r = symbols[top.right];
    if (l.piece.empty() || r.piece.empty() || l.piece.size() + r.piece.size() != top.size) continue;
    l.piece = std::string_view(l.piece.data(), l.piece.size() + r.piece.size());
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = top.left;
    r.piece = std::string_view();
    maybe_add(l.prev, top.left);
    maybe_add(top.left, l.next);
  }
  std::function<void(std::string_view)> resegment = [&](std::string_view w) {
    const int32_t id = PieceToId(w);
    if (pieces_[id].type != PieceType::kUnused) {
      EmitPiece(w, id, ids);
      return;
    }
    auto p = rev_merge.find(std::string(w));
    if (p == rev_merge.end()) {
      EmitPiece(w, id, ids);
      return;
    }
    resegment(p->second.first);
    resegment(p->second.second);
  };
  for (int i = symbols.empty() ? -1 : 0; i != -1; i = symbols[i].next) resegment(symbols[i].piece);
}

void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  thread_local std::vector<int32_t> sym_id;
  thread_local std::vector<uint32_t> sym_start, sym_len;
  thread_local std::vector<int32_t> pair_id;
  thread_local std::vector<float> pair_score;
  sym_id.clear();
  sym_start.clear();
  sym_len.clear();
  for (size_t pos = 0; pos < word.size();) {
    size_t len = std::min(word.size() - pos, OneCharLen(static_cast<unsigned char>(word[pos])));
    sym_id.push_back(CharId(word.substr(pos, len)));
    sym_start.push_back(static_cast<uint32_t>(pos));
    sym_len.push_back(static_cast<uint32_t>(len));
    pos += len;
  }
  size_t n = sym_id.size();
  auto emit = [&] {
    for (size_t i = 0; i < n; ++i) {
      if (sym_id[i] >= 0) {
        ids->push_back(sym_id[i]);
      } else {
        EmitPiece(word.substr(sym_start[i], sym_len[i]), unk_id_, ids);
      }
    }
  };
  if (n > kLinearMergeLimit) {
    // Long runs (no whitespace for a while): a heap over a linked list.
    struct Pair {
      float score;
      int32_t left, right, left_id, right_id, merged;
    };
    struct PairLess {
      bool operator()(const Pair& a, const Pair& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
      }
    };
    std::vector<int32_t> next(n), prev(n);
    for (size_t i = 0; i < n; ++i) {
      next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
      prev[i] = static_cast<int32_t>(i) - 1;
    }
    std::priority_queue<Pair, std::vector<Pair>, PairLess> heap;
    auto add = [&](int32_t l, int32_t r) {
      if (l < 0 || r < 0 || sym_id[l] < 0 || sym_id[r] < 0) return;
      if (const Merge* m = FindMerge(sym_id[l], sym_id[r]))
        heap.push(Pair{m->score, l, r, sym_id[l], sym_id[r], m->id});
    };
    for (size_t i = 0; i + 1 < n; ++i) add(static_cast<int32_t>(i), static_cast<int32_t>(i + 1));
    while (!heap.empty()) {
      Pair p = heap.top();
      heap.pop();
      if (sym_len[p.left] == 0 || sym_len[p.right] == 0 || next[p.left] != p.right ||
          sym_id[p.left] != p.left_id || sym_id[p.right] != p.right_id) {
        continue;
      }
      sym_id[p.left] = p.merged;
      sym_len[p.left] += sym_len[p.right];
      sym_len[p.right] = 0;
      next[p.left] = next[p.right];
      if (next[p.right] >= 0) prev[next[p.right]] = p.left;
      add(prev[p.left], p.left);
      add(p.left, next[p.left]);
    }
    size_t w = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) {
      sym_id[w] = sym_id[i];
      sym_start[w] = sym_start[i];
      sym_len[w] = sym_len[i];
      ++w;
    }
    n = w;
    emit();
    return;
  }
  // Short words: arrays, best pair by linear scan (highest score, leftmost).
  pair_id.resize(n);
  pair_score.resize(n);
  auto compute = [&](size_t i) {
    pair_id[i] = -1;
    if (sym_id[i] < 0 || sym_id[i + 1] < 0) return;
    if (const Merge* m = FindMerge(sym_id[i], sym_id[i + 1])) {
      pair_id[i] = m->id;
      pair_score[i] = m->score;
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) compute(i);
  while (n > 1) {
    size_t best = n;
    float best_score = 0;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (pair_id[i] >= 0 && (best == n || pair_score[i] > best_score)) {
        best = i;
        best_score = pair_score[i];
      }
    }
    if (best == n) break;
    sym_id[best] = pair_id[best];
    sym_len[best] += sym_len[best + 1];
    for (size_t i = best + 1; i + 1 < n; ++i) {
      sym_id[i] = sym_id[i + 1];
      sym_start[i] = sym_start[i + 1];
      sym_len[i] = sym_len[i + 1];
      pair_id[i] = pair_id[i + 1];
      pair_score[i] = pair_score[i + 1];
    }
    --n;
    if (best > 0) compute(best - 1);
    if (best + 1 < n) compute(best);
  }
  emit();
}

Status BpeTokenizer::Encode(std::string_view text, std::vector<int32_t>* ids) const {
  const size_t first_new = ids->size();
  if (!fast_path_) {
    std::string normalized;
    Normalize(text, &normalized);
    EncodeGeneral(normalized, ids);
  } else if (!text.empty()) {
    // Per-thread scratch buffers (no state: any thread may encode any text).
    struct Scratch {
      std::string key_buf, norm_buf;
      std::vector<int32_t> word_ids;
    };
    thread_local Scratch scratch;
    WordCache& words = *words_;
    // Normalizes one raw segment (' ' -> ▁, malformed bytes -> U+FFFD) and encodes it.
    auto encode_raw = [&](std::string_view r, std::vector<int32_t>* out) {
      std::string& norm = scratch.norm_buf;
      norm.clear();
      for (size_t i = 0; i < r.size();) {
        const unsigned char c = static_cast<unsigned char>(r[i]);
        if (c == ' ') {
          norm.append(kSpaceSymbol);
          ++i;
          continue;
        }
        size_t len =
            ValidCharLen(reinterpret_cast<const unsigned char*>(r.data()) + i, r.size() - i);
        if (len == 0) {
          norm.append(kReplacementChar);
          ++i;
        } else {
          norm.append(r.substr(i, len));
          i += len;
        }
      }
      EncodeWord(norm, out);
    };
    auto encode_segment = [&](std::string_view raw) {
      if (raw.size() > kMaxCachedWordBytes) {
        encode_raw(raw, ids);
        return;
      }
      const uint64_t h = WordCache::Hash(raw);
      std::span<const int32_t> cached;
      if (words.Find(raw, h, &cached)) {
        AppendIds(ids, cached.data(), cached.size());
        return;
      }
      scratch.word_ids.clear();
      encode_raw(raw, &scratch.word_ids);
      words.Insert(raw, h, scratch.word_ids);
      AppendIds(ids, scratch.word_ids.data(), scratch.word_ids.size());
    };

    const size_t n = text.size();
    const char* s = text.data();
    size_t seg_start = 0;
    bool first = true;
    bool prev_space = add_dummy_prefix_;
    auto flush = [&](size_t end) {
      std::string_view raw(s + seg_start, end - seg_start);
      if (first && add_dummy_prefix_) {
        scratch.key_buf.assign(" ");
        scratch.key_buf.append(raw);
        encode_segment(scratch.key_buf);
      } else if (!raw.empty()) {
        encode_segment(raw);
      }
      first = false;
    };
    for (size_t i = 0; i < n;) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      size_t space_len = 0;
      if (c == ' ') {
        space_len = 1;
      } else if (c == 0xE2 && i + 2 < n && static_cast<unsigned char>(s[i + 1]) == 0x96 &&
                 static_cast<unsigned char>(s[i + 2]) == 0x81) {
        space_len = 3;
      }
      if (space_len) {
        if (!prev_space && i > seg_start) {
          flush(i);
          seg_start = i;
        }
        prev_space = true;
        i += space_len;
      } else {
        prev_space = false;
        ++i;
      }
    }
    flush(n);
  }
  if (!byte_fallback_) {
    // libsentencepiece merges a run of unknown pieces into one unknown.
    size_t w = first_new;
    for (size_t r = first_new; r < ids->size(); ++r) {
      if ((*ids)[r] == unk_id_ && w > first_new && (*ids)[w - 1] == unk_id_) continue;
      (*ids)[w++] = (*ids)[r];
    }
    ids->resize(w);
  }
  return Status::Ok();
}

}  // namespace lote::data
