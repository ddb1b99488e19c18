// UTF-8 validation, repair and splitting for log messages.
//
// Log output is arbitrary bytes; CloudWatch Logs messages are UTF-8 strings.
// Every message is stored as valid UTF-8: each byte that is not part of a
// well-formed sequence (RFC 3629: no overlongs, no surrogates, nothing above
// U+10FFFF) is replaced by U+FFFD. Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace lote::logs {

// True if `text` is well-formed UTF-8.
bool IsValidUtf8(std::string_view text);

// Appends `text` to `out`, replacing each invalid byte with U+FFFD (EF BF BD).
void AppendSanitizedUtf8(std::string_view text, std::string* out);

// Length of the longest prefix of `text` that is at most `max_bytes` long and
// does not end inside a multi-byte sequence (for valid UTF-8: a character
// boundary). Returns at least 1 when `text` is non-empty and max_bytes >= 4.
size_t Utf8PrefixLength(std::string_view text, size_t max_bytes);

// Splits valid UTF-8 into pieces of at most `max_bytes` at character
// boundaries. An empty text yields one empty piece.
std::vector<std::string_view> SplitUtf8(std::string_view text, size_t max_bytes);

}  // namespace lote::logs
