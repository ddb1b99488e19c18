#include "logs/utf8.h"

#include <cstdint>
#include <cstring>

namespace lote::logs {
namespace {

// Length of the well-formed sequence starting at p[0] (1..4), or 0 if invalid.
size_t SequenceLength(const uint8_t* p, size_t avail) {
  uint8_t b0 = p[0];
  if (b0 < 0x80) return 1;
  auto cont = [&](size_t i) { return i < avail && (p[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) return cont(1) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (avail < 2) return 0;
    uint8_t b1 = p[1];
    if (b0 == 0xE0 && b1 < 0xA0) return 0;  // overlong
    if (b0 == 0xED && b1 > 0x9F) return 0;  // surrogate
    return cont(1) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (avail < 2) return 0;
    uint8_t b1 = p[1];
    if (b0 == 0xF0 && b1 < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && b1 > 0x8F) return 0;  // above U+10FFFF
    return cont(1) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

// Number of leading ASCII bytes (checked 8 at a time).
size_t AsciiPrefix(const uint8_t* p, size_t n) {
  size_t i = 0;
  while (i + 8 <= n) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    if (v & 0x8080808080808080ull) break;
    i += 8;
  }
  while (i < n && p[i] < 0x80) ++i;
  return i;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    i += AsciiPrefix(p + i, n - i);
    if (i >= n) break;
    size_t len = SequenceLength(p + i, n - i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

void AppendSanitizedUtf8(std::string_view text, std::string* out) {
  const auto* p = reinterpret_cast<const uint8_t*>(text.data());
  size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    size_t run = i + AsciiPrefix(p + i, n - i);
    while (run < n) {
      size_t len = SequenceLength(p + run, n - run);
      if (len == 0) break;
      run += len;
    }
    out->append(text.data() + i, run - i);
    i = run;
    if (i < n) {
      out->append("\xEF\xBF\xBD");
      ++i;
    }
  }
}

size_t Utf8PrefixLength(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text.size();
  size_t cut = max_bytes;
  // Back off over continuation bytes (at most 3) so a sequence is not cut.
  size_t backed = 0;
  while (cut > 0 && backed < 3 && (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) {
    --cut;
    ++backed;
  }
  if (cut == 0 || (static_cast<uint8_t>(text[cut]) & 0xC0) == 0x80) return max_bytes;
  // If the byte at `cut` starts a sequence that would not fit, cut before it;
  // otherwise (it was invalid anyway) cutting at max_bytes is as good.
  return cut;
}

std::vector<std::string_view> SplitUtf8(std::string_view text, size_t max_bytes) {
  std::vector<std::string_view> pieces;
  if (text.empty()) {
    pieces.push_back(text);
    return pieces;
  }
  while (!text.empty()) {
    size_t len = Utf8PrefixLength(text, max_bytes);
    if (len == 0) len = text.size() < max_bytes ? text.size() : max_bytes;
    pieces.push_back(text.substr(0, len));
    text.remove_prefix(len);
  }
  return pieces;
}

}  // namespace lote::logs
