// CRC-32C (Castagnoli), the checksum of every log segment record.
// Uses the SSE4.2 instruction when the CPU has it, a table otherwise; both
// give identical results. Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

namespace lote::logs {

// Extends `crc` (0 for a fresh checksum) with `data`.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(std::string_view data) { return Crc32cExtend(0, data.data(), data.size()); }

}  // namespace lote::logs
