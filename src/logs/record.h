// The record format of log segment files (see docs/logs.md).
//
// A segment file is a sequence of records; each record holds a batch of
// consecutive events of one stream and is checksummed as a whole, so a record
// is either entirely valid or detectably torn. Layout (little endian):
//
//   0  u32 magic "LOTB"          32 i64 source_end (-1: none)
//   4  u32 body_len (bytes 12..) 40 i64 min timestamp
//   8  u32 crc32c of bytes 12..  48 i64 max timestamp
//  12  u32 event count           56 u64 flags (bit 0: timestamps non-decreasing)
//  16  u64 first sequence        64 events: zigzag varint (timestamp - previous
//  24  i64 ingestion time ms        timestamp, starting from 0), varint length, bytes
//
// Thread safety: RecordBuilder is a plain value; the free functions are pure.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace lote::logs {

inline constexpr uint32_t kRecordMagic = 0x42544F4Cu;  // bytes 'L' 'O' 'T' 'B'
inline constexpr size_t kRecordHeaderBytes = 64;
// Flag: the record's timestamps are non-decreasing in sequence order.
inline constexpr uint64_t kRecordSorted = 1;
// A record larger than this is corrupt (the store never writes one this big).
inline constexpr uint32_t kMaxRecordBytes = 64u << 20;

struct RecordHeader {
  uint32_t body_len = 0;  // bytes after the first 12
  uint32_t crc = 0;
  uint32_t count = 0;
  uint64_t first_seq = 0;
  int64_t ingestion_ms = 0;
  int64_t source_end = -1;
  int64_t min_ts = 0;
  int64_t max_ts = 0;
  uint64_t flags = 0;  // kRecordSorted
  size_t total_bytes() const { return 12 + static_cast<size_t>(body_len); }
};

// One decoded event; `message` points into the record's buffer.
struct EventView {
  uint64_t sequence = 0;
  int64_t timestamp_ms = 0;
  int64_t ingestion_ms = 0;
  std::string_view message;
};

// Encodes one record at the end of an output buffer.
class RecordBuilder {
 public:
  // Starts a record at out->size().
  void Begin(std::string* out, uint64_t first_seq, int64_t ingestion_ms);
  void Add(int64_t timestamp_ms, std::string_view message);
  void set_source_end(int64_t offset) { header_.source_end = offset; }
  uint32_t count() const { return header_.count; }
  // Bytes of the record so far.
  size_t size() const { return out_->size() - start_; }
  // Writes the header and checksum; returns the finished header.
  const RecordHeader& Finish();

 private:
  std::string* out_ = nullptr;
  size_t start_ = 0;
  int64_t prev_ts_ = 0;
  RecordHeader header_;
};

// Parses the first kRecordHeaderBytes of `bytes`; false if it is not a
// plausible record header (wrong magic, impossible length).
bool ParseRecordHeader(std::string_view bytes, RecordHeader* header);
// Checks the checksum and decodes the events of a whole record.
Status DecodeRecord(std::string_view record, const RecordHeader& header,
                    std::vector<EventView>* events);
// True if the checksum of a whole record matches.
bool VerifyRecord(std::string_view record, const RecordHeader& header);

}  // namespace lote::logs
