#include "logs/record.h"

#include <algorithm>
#include <cstring>

#include "logs/crc32c.h"

namespace lote::logs {
namespace {

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

void PutVarint(std::string* out, uint64_t v) {
  char buf[10];
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  buf[n++] = static_cast<char>(v);
  out->append(buf, n);
}

bool GetVarint(const char*& p, const char* end, uint64_t* v) {
  uint64_t result = 0;
  for (int shift = 0; shift <= 63 && p < end; shift += 7) {
    uint64_t byte = static_cast<uint8_t>(*p++);
    result |= (byte & 0x7F) << shift;
    if (!(byte & 0x80)) {
      *v = result;
      return true;
    }
  }
  return false;
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
int64_t UnZigZag(uint64_t v) { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

}  // namespace

void RecordBuilder::Begin(std::string* out, uint64_t first_seq, int64_t ingestion_ms) {
  out_ = out;
  start_ = out->size();
  prev_ts_ = 0;
  header_ = RecordHeader{};
  header_.first_seq = first_seq;
  header_.ingestion_ms = ingestion_ms;
  out->resize(start_ + kRecordHeaderBytes);
}

void RecordBuilder::Add(int64_t timestamp_ms, std::string_view message) {
  if (header_.count == 0) {
    header_.min_ts = header_.max_ts = timestamp_ms;
    header_.flags = kRecordSorted;
  } else {
    if (timestamp_ms < prev_ts_) header_.flags &= ~kRecordSorted;
    header_.min_ts = std::min(header_.min_ts, timestamp_ms);
    header_.max_ts = std::max(header_.max_ts, timestamp_ms);
  }
  PutVarint(out_, ZigZag(timestamp_ms - prev_ts_));
  prev_ts_ = timestamp_ms;
  PutVarint(out_, message.size());
  out_->append(message.data(), message.size());
  ++header_.count;
}

const RecordHeader& RecordBuilder::Finish() {
  char* p = out_->data() + start_;
  size_t total = out_->size() - start_;
  header_.body_len = static_cast<uint32_t>(total - 12);
  PutU32(p + 0, kRecordMagic);
  PutU32(p + 4, header_.body_len);
  PutU32(p + 12, header_.count);
  PutU64(p + 16, header_.first_seq);
  PutU64(p + 24, static_cast<uint64_t>(header_.ingestion_ms));
  PutU64(p + 32, static_cast<uint64_t>(header_.source_end));
  PutU64(p + 40, static_cast<uint64_t>(header_.min_ts));
  PutU64(p + 48, static_cast<uint64_t>(header_.max_ts));
  PutU64(p + 56, header_.flags);
  header_.crc = Crc32cExtend(0, p + 12, total - 12);
  PutU32(p + 8, header_.crc);
  return header_;
}

bool ParseRecordHeader(std::string_view bytes, RecordHeader* h) {
  if (bytes.size() < kRecordHeaderBytes) return false;
  const char* p = bytes.data();
  if (GetU32(p) != kRecordMagic) return false;
  h->body_len = GetU32(p + 4);
  if (h->body_len < kRecordHeaderBytes - 12 || h->body_len > kMaxRecordBytes) return false;
  h->crc = GetU32(p + 8);
  h->count = GetU32(p + 12);
  h->first_seq = GetU64(p + 16);
  h->ingestion_ms = static_cast<int64_t>(GetU64(p + 24));
  h->source_end = static_cast<int64_t>(GetU64(p + 32));
  h->min_ts = static_cast<int64_t>(GetU64(p + 40));
  h->max_ts = static_cast<int64_t>(GetU64(p + 48));
  h->flags = GetU64(p + 56);
  return true;
}

bool VerifyRecord(std::string_view record, const RecordHeader& h) {
  if (record.size() != h.total_bytes()) return false;
  return Crc32cExtend(0, record.data() + 12, record.size() - 12) == h.crc;
}

Status DecodeRecord(std::string_view record, const RecordHeader& h,
                    std::vector<EventView>* events) {
  if (!VerifyRecord(record, h)) {
    return Status::DataLoss("log record at sequence " + std::to_string(h.first_seq) +
                            " fails its checksum");
  }
  const char* p = record.data() + kRecordHeaderBytes;
  const char* end = record.data() + record.size();
  int64_t ts = 0;
  for (uint32_t i = 0; i < h.count; ++i) {
    uint64_t delta, len;
    if (!GetVarint(p, end, &delta) || !GetVarint(p, end, &len) ||
        len > static_cast<uint64_t>(end - p)) {
      return Status::DataLoss("log record at sequence " + std::to_string(h.first_seq) +
                              " is malformed");
    }
    ts += UnZigZag(delta);
    events->push_back(EventView{h.first_seq + i, ts, h.ingestion_ms, std::string_view(p, len)});
    p += len;
  }
  return Status::Ok();
}

}  // namespace lote::logs
