#include "logs/record.h"

#include <gtest/gtest.h>

namespace lote::logs {
namespace {

TEST(Record, RoundTrip) {
  std::string buf = "prefix";
  RecordBuilder b;
  b.Begin(&buf, 42, 1000);
  b.Add(1700000000000, "first");
  b.Add(1700000000005, "");
  b.Add(1699999999999, std::string(300, 'x'));
  b.set_source_end(12345);
  RecordHeader h = b.Finish();
  std::string_view rec = std::string_view(buf).substr(6);
  RecordHeader parsed;
  ASSERT_TRUE(ParseRecordHeader(rec, &parsed));
  EXPECT_EQ(parsed.count, 3u);
  EXPECT_EQ(parsed.first_seq, 42u);
  EXPECT_EQ(parsed.source_end, 12345);
  EXPECT_EQ(parsed.min_ts, 1699999999999);
  EXPECT_EQ(parsed.max_ts, 1700000000005);
  EXPECT_EQ(parsed.flags & kRecordSorted, 0u);
  EXPECT_EQ(parsed.total_bytes(), h.total_bytes());
  std::vector<EventView> events;
  ASSERT_TRUE(DecodeRecord(rec, parsed, &events).ok());
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].message, "first");
  EXPECT_EQ(events[1].message, "");
  EXPECT_EQ(events[1].sequence, 43u);
  EXPECT_EQ(events[2].timestamp_ms, 1699999999999);
  EXPECT_EQ(events[2].ingestion_ms, 1000);
}

TEST(Record, CorruptionIsDetected) {
  std::string buf;
  RecordBuilder b;
  b.Begin(&buf, 0, 1);
  b.Add(5, "hello world");
  RecordHeader h = b.Finish();
  buf[buf.size() - 3] ^= 0x20;
  std::vector<EventView> events;
  Status s = DecodeRecord(buf, h, &events);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  RecordHeader parsed;
  EXPECT_FALSE(ParseRecordHeader(std::string_view(buf).substr(0, 10), &parsed));
  buf[0] = 'X';
  EXPECT_FALSE(ParseRecordHeader(buf, &parsed));
}

}  // namespace
}  // namespace lote::logs
