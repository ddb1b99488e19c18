#include "logs/log_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "logs/test_util.h"
#include "logs/utf8.h"

namespace lote::logs {
namespace {

using testing::TempDir;

constexpr int64_t kT0 = 1'700'000'000'000;

std::unique_ptr<LogStore> OpenStore(const std::string& root, const Clock* clock = nullptr,
                                    uint64_t segment_bytes = 64ull << 20,
                                    bool load_in_background = true) {
  LogStoreOptions o;
  o.root = root;
  o.clock = clock;
  o.segment_bytes = segment_bytes;
  o.load_in_background = load_in_background;
  auto r = LogStore::Open(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

void AppendLines(LogStore* store, const std::string& g, const std::string& s, int from, int to,
                 int64_t ts = kT0) {
  std::vector<std::string> msgs;
  for (int i = from; i < to; ++i) msgs.push_back("line " + std::to_string(i));
  std::vector<InputEvent> evs;
  for (auto& m : msgs) evs.push_back(InputEvent{ts, m, -1});
  ASSERT_TRUE(store->Append(g, s, evs).ok());
}

std::vector<LogEvent> ReadAll(const LogStore& store, const std::string& g, const std::string& s) {
  std::vector<LogEvent> all;
  ReadRequest r;
  r.limit = 100000;
  r.max_bytes = SIZE_MAX;
  for (;;) {
    auto res = store.Read(g, s, r);
    EXPECT_TRUE(res.ok()) << res.status().ToString();
    if (!res.ok()) break;
    for (auto& e : res->events) all.push_back(std::move(e));
    if (res->exhausted) break;
    r.position = res->next_position;
  }
  return all;
}

TEST(LogStore, GroupsAndStreamsPersist) {
  TempDir dir;
  const std::string weird = "node 0/default/ünïcode & spaces #1";
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->CreateGroup("/aws/batch/job").ok());
    EXPECT_TRUE(store->CreateGroup("/aws/batch/job").IsAlreadyExists());
    EXPECT_TRUE(store->CreateStream("/nope", "s").IsNotFound());
    ASSERT_TRUE(store->CreateStream("/aws/batch/job", weird).ok());
    EXPECT_TRUE(store->CreateStream("/aws/batch/job", weird).IsAlreadyExists());
    ASSERT_TRUE(store->EnsureStream("other", "x").ok());
    ASSERT_TRUE(store->EnsureStream("other", "x").ok());
    ASSERT_TRUE(store->SetRetention("other", 7).ok());
    AppendLines(store.get(), "/aws/batch/job", weird, 0, 3);
  }
  auto store = OpenStore(dir.path());
  store->WaitUntilAllStreamsLoaded();  // a group's stored bytes count the streams read
  auto groups = store->ListGroups();
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].name, "/aws/batch/job");
  EXPECT_EQ(groups[1].name, "other");
  EXPECT_EQ(groups[1].retention_days, 7);
  EXPECT_GT(groups[0].stored_bytes, 0);
  auto info = store->GetStream("/aws/batch/job", weird);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->next_sequence, 3u);
  EXPECT_EQ(info->first_event_ms, kT0);
  auto events = ReadAll(*store, "/aws/batch/job", weird);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[2].message, "line 2");
  EXPECT_EQ(events[2].sequence, 2u);
}

TEST(LogStore, ForwardBackwardAndTimeRange) {
  TempDir dir;
  FakeClock clock(kT0);
  auto store = OpenStore(dir.path(), &clock);
  ASSERT_TRUE(store->EnsureStream("g", "s").ok());
  for (int i = 0; i < 100; ++i) AppendLines(store.get(), "g", "s", i, i + 1, kT0 + i * 10);
  ReadRequest r;
  r.position = 10;
  r.limit = 5;
  auto f = store->Read("g", "s", r);
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->events.size(), 5u);
  EXPECT_EQ(f->events[0].message, "line 10");
  EXPECT_EQ(f->next_position, 15u);
  EXPECT_FALSE(f->exhausted);
  EXPECT_EQ(f->events[0].ingestion_ms, kT0);

  r.direction = Direction::kBackward;
  r.position = 10;
  auto b = store->Read("g", "s", r);
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->events.size(), 5u);
  EXPECT_EQ(b->events.front().message, "line 5");
  EXPECT_EQ(b->events.back().message, "line 9");
  EXPECT_EQ(b->next_position, 5u);

  // [start, end) by timestamp, forward and backward.
  ReadRequest t;
  t.start_time_ms = kT0 + 200;
  t.end_time_ms = kT0 + 300;
  auto tf = store->Read("g", "s", t);
  ASSERT_TRUE(tf.ok());
  ASSERT_EQ(tf->events.size(), 10u);
  EXPECT_EQ(tf->events.front().message, "line 20");
  EXPECT_EQ(tf->events.back().message, "line 29");
  EXPECT_TRUE(tf->exhausted);
  t.direction = Direction::kBackward;
  t.position = UINT64_MAX;
  auto tb = store->Read("g", "s", t);
  ASSERT_TRUE(tb.ok());
  ASSERT_EQ(tb->events.size(), 10u);
  EXPECT_EQ(tb->events.front().message, "line 20");

  auto tail = store->Tail("g", "s", 3);
  ASSERT_TRUE(tail.ok());
  ASSERT_EQ(tail->size(), 3u);
  EXPECT_EQ((*tail)[2].message, "line 99");
}

TEST(LogStore, SplitsLongMessagesAndRepairsUtf8) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  ASSERT_TRUE(store->EnsureStream("g", "s").ok());
  std::string big(600 * 1024, 'a');
  for (size_t i = 0; i < big.size(); i += 997) big[i] = static_cast<char>('a' + i % 26);
  std::string bad = std::string("bin\xFF\xFE") + std::string(1, '\0') + "ary\xC3";
  std::vector<InputEvent> evs = {{kT0, big, -1}, {kT0, bad, -1}};
  auto res = store->Append("g", "s", evs);
  ASSERT_TRUE(res.ok());
  EXPECT_EQ(res->count, 4u);  // 256 KiB + 256 KiB + 88 KiB, then one
  auto events = ReadAll(*store, "g", "s");
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[0].message.size(), kMaxEventBytes);
  EXPECT_EQ(events[1].message.size(), kMaxEventBytes);
  EXPECT_EQ(events[0].message + events[1].message + events[2].message, big);
  EXPECT_EQ(events[3].message,
            std::string("bin\xEF\xBF\xBD\xEF\xBF\xBD") + std::string(1, '\0') + "ary\xEF\xBF\xBD");
  for (const auto& e : events) EXPECT_TRUE(IsValidUtf8(e.message));
}

TEST(LogStore, SegmentsRollAndReopen) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path(), nullptr, 4096);
    ASSERT_TRUE(store->EnsureStream("g", "s").ok());
    for (int i = 0; i < 500; ++i) AppendLines(store.get(), "g", "s", i * 4, i * 4 + 4);
  }
  size_t segs = 0, idxs = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(dir.path())) {
    segs += e.path().extension() == ".seg";
    idxs += e.path().extension() == ".idx";
  }
  EXPECT_GT(segs, 5u);
  EXPECT_EQ(idxs, segs - 1);  // every sealed segment has an index
  auto store = OpenStore(dir.path(), nullptr, 4096);
  auto events = ReadAll(*store, "g", "s");
  ASSERT_EQ(events.size(), 2000u);
  for (int i = 0; i < 2000; ++i)
    ASSERT_EQ(events[static_cast<size_t>(i)].message, "line " + std::to_string(i));
  AppendLines(store.get(), "g", "s", 2000, 2001);
  EXPECT_EQ(store->GetStream("g", "s")->next_sequence, 2001u);
}

std::string OnlySegment(const std::string& root) {
  std::string last;
  for (auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().extension() == ".seg") last = e.path().string();
  }
  return last;
}

TEST(LogStore, TornTailIsTruncatedOnReopen) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->EnsureStream("g", "s").ok());
    AppendLines(store.get(), "g", "s", 0, 10);
    AppendLines(store.get(), "g", "s", 10, 20);
  }
  std::string seg = OnlySegment(dir.path());
  auto size = std::filesystem::file_size(seg);
  // Cut the second record in half, as a crash mid-write would.
  std::filesystem::resize_file(seg, size - 40);
  {
    auto store = OpenStore(dir.path());
    auto events = ReadAll(*store, "g", "s");
    ASSERT_EQ(events.size(), 10u);
    EXPECT_EQ(events.back().message, "line 9");
    AppendLines(store.get(), "g", "s", 10, 12);
  }
  // Garbage after the last record (a torn header) is also dropped.
  {
    int fd = ::open(seg.c_str(), O_WRONLY | O_APPEND);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::write(fd, "LOTBgarbage", 11), 11);
    ::close(fd);
  }
  auto store = OpenStore(dir.path());
  auto events = ReadAll(*store, "g", "s");
  ASSERT_EQ(events.size(), 12u);
  EXPECT_EQ(events[10].message, "line 10");
  EXPECT_EQ(events[10].sequence, 10u);
}

// Opening reads no stream. Each is read when it is named (and its torn tail
// cut then), the group's listing reads the rest, and creating or deleting a
// stream that is only on disk answers as if it had been read.
TEST(LogStore, StreamsAreReadFromDiskWhenFirstNamed) {
  TempDir dir;
  int64_t bytes_of_five = 0;
  {
    auto store = OpenStore(dir.path());
    for (int i = 0; i < 5; ++i) {
      std::string name = "s" + std::to_string(i);
      ASSERT_TRUE(store->EnsureStream("g", name).ok());
      AppendLines(store.get(), "g", name, 0, 10 + i);
    }
    bytes_of_five = store->GetGroup("g")->stored_bytes;
    ASSERT_GT(bytes_of_five, 0);
  }
  {
    auto store = OpenStore(dir.path(), nullptr, 64ull << 20, /*load_in_background=*/false);
    EXPECT_EQ(store->LoadedStreamCount(), 0u);
    EXPECT_FALSE(store->AllStreamsLoaded());
    EXPECT_EQ(store->GetGroup("g")->stored_bytes, 0);  // nothing read yet

    auto s3 = store->GetStream("g", "s3");
    ASSERT_TRUE(s3.ok()) << s3.status().ToString();
    EXPECT_EQ(s3->next_sequence, 13u);
    EXPECT_EQ(store->LoadedStreamCount(), 1u);
    EXPECT_TRUE(store->GetStream("g", "nope").status().IsNotFound());
    EXPECT_EQ(store->LoadedStreamCount(), 1u);

    EXPECT_TRUE(store->CreateStream("g", "s1").IsAlreadyExists());  // on disk only
    const int64_t s2_bytes = store->GetStream("g", "s2")->stored_bytes;
    ASSERT_TRUE(store->DeleteStream("g", "s2").ok());
    EXPECT_TRUE(store->GetStream("g", "s2").status().IsNotFound());
    ASSERT_TRUE(store->CreateStream("g", "new").ok());
    const int64_t s4_before = store->GetStream("g", "s4")->stored_bytes;
    AppendLines(store.get(), "g", "s4", 14, 16);  // read from disk, then appended to
    const int64_t appended = store->GetStream("g", "s4")->stored_bytes - s4_before;
    ASSERT_GT(appended, 0);

    auto streams = store->ListStreams("g");
    ASSERT_TRUE(streams.ok()) << streams.status().ToString();
    std::vector<std::string> names;
    for (const StreamInfo& s : *streams) names.push_back(s.name);
    EXPECT_EQ(names, (std::vector<std::string>{"new", "s0", "s1", "s3", "s4"}));
    EXPECT_TRUE(store->AllStreamsLoaded());
    EXPECT_EQ(store->LoadedStreamCount(), 5u);
    int64_t listed = 0;
    for (const StreamInfo& s : *streams) listed += s.stored_bytes;
    EXPECT_EQ(store->GetGroup("g")->stored_bytes, listed);
    EXPECT_EQ(listed, bytes_of_five - s2_bytes + appended);
  }
  auto store = OpenStore(dir.path());
  store->WaitUntilAllStreamsLoaded();
  EXPECT_TRUE(store->AllStreamsLoaded());
  EXPECT_EQ(store->LoadedStreamCount(), 5u);
  EXPECT_EQ(ReadAll(*store, "g", "s4").size(), 16u);
  EXPECT_TRUE(store->GetStream("g", "s2").status().IsNotFound());
}

// A stream folder that cannot be read no longer stops the store from opening:
// the other streams work, and listing the group names the bad folder.
TEST(LogStore, AnUnreadableStreamFolderFailsOnlyWhatNeedsIt) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->EnsureStream("g", "good").ok());
    AppendLines(store.get(), "g", "good", 0, 3);
  }
  std::string streams;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/groups"))
    streams = e.path().string() + "/streams";
  // No stream.json, but a segment: events nobody can name.
  ASSERT_TRUE(std::filesystem::create_directory(streams + "/broken.0123"));
  std::ofstream(streams + "/broken.0123/00000000000000000000.seg") << "events";
  auto store = OpenStore(dir.path(), nullptr, 64ull << 20, /*load_in_background=*/false);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(ReadAll(*store, "g", "good").size(), 3u);
  auto listed = store->ListStreams("g");
  ASSERT_FALSE(listed.ok());
  EXPECT_NE(listed.status().ToString().find("broken.0123"), std::string::npos)
      << listed.status().ToString();
  EXPECT_FALSE(store->AllStreamsLoaded());
}

// A stream made without a sync (the job output's) is read back like any
// other; one whose stream.json a machine crash lost before any event (its
// folder and nothing in it) is removed when the store opens, and the others
// list and work.
TEST(LogStore, AStreamMadeWithoutSyncAndAnInterruptedOne) {
  TempDir dir;
  std::string streams;
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->EnsureStream("g", "unsynced", /*durable=*/false).ok());
    AppendLines(store.get(), "g", "unsynced", 0, 2);
    ASSERT_TRUE(store->EnsureStream("g", "cut", /*durable=*/false).ok());
    for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/groups"))
      streams = e.path().string() + "/streams";
  }
  // The crash: "cut"'s folder is there, its stream.json is not.
  std::string cut;
  for (const auto& e : std::filesystem::directory_iterator(streams))
    if (e.path().filename().string().rfind("cut.", 0) == 0) cut = e.path().string();
  ASSERT_FALSE(cut.empty());
  ASSERT_TRUE(std::filesystem::remove(cut + "/stream.json"));
  {
    // Named before the folder was read (a re-ingested job's output): made again.
    auto store = OpenStore(dir.path(), nullptr, 64ull << 20, /*load_in_background=*/false);
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(store->EnsureStream("g", "cut", /*durable=*/false).ok());
    AppendLines(store.get(), "g", "cut", 0, 1);
    EXPECT_EQ(ReadAll(*store, "g", "cut").size(), 1u);
    ASSERT_TRUE(store->DeleteStream("g", "cut").ok());
  }
  ASSERT_TRUE(std::filesystem::create_directory(cut));  // cut short again
  auto store = OpenStore(dir.path(), nullptr, 64ull << 20, /*load_in_background=*/false);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(ReadAll(*store, "g", "unsynced").size(), 2u);
  auto listed = store->ListStreams("g");
  ASSERT_TRUE(listed.ok()) << listed.status().ToString();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].name, "unsynced");
  EXPECT_FALSE(std::filesystem::exists(cut));
  // The name is free again.
  EXPECT_TRUE(store->CreateStream("g", "cut").ok());
}

// A child process appends lines and reports each acknowledged one through a
// pipe; it is killed with SIGKILL mid-stream. Every acknowledged line must be
// there after reopening, in order, and nothing torn.
TEST(LogStore, KillNineLosesNothingAcknowledged) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->EnsureStream("g", "s").ok());
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    LogStoreOptions o;
    o.root = dir.path();
    o.segment_bytes = 64 * 1024;  // exercise sealing too
    auto store = LogStore::Open(o);
    if (!store.ok()) ::_exit(2);
    std::string msg;
    for (uint32_t i = 0;; ++i) {
      msg = "line " + std::to_string(i) + " " + std::string(i % 50, 'x');
      InputEvent ev{kT0 + i, msg, -1};
      if (!(*store)->Append("g", "s", std::span<const InputEvent>(&ev, 1)).ok()) ::_exit(3);
      if (::write(fds[1], &i, 4) != 4) ::_exit(4);
    }
  }
  ::close(fds[1]);
  uint32_t acked = 0, v;
  bool any = false;
  while (::read(fds[0], &v, 4) == 4) {
    acked = v;
    any = true;
    if (acked >= 3000) break;
  }
  ::kill(pid, SIGKILL);
  while (::read(fds[0], &v, 4) == 4) acked = v;  // acknowledgements already sent
  ::close(fds[0]);
  int status;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(any);
  ASSERT_TRUE(WIFSIGNALED(status));

  auto store = OpenStore(dir.path());
  auto events = ReadAll(*store, "g", "s");
  ASSERT_GE(events.size(), acked + 1);
  EXPECT_LE(events.size(), acked + 2);  // at most one unacknowledged extra
  for (size_t i = 0; i < events.size(); ++i) {
    ASSERT_EQ(events[i].message, "line " + std::to_string(i) + " " + std::string(i % 50, 'x'));
    ASSERT_EQ(events[i].sequence, i);
  }
}

TEST(LogStore, RetentionDeletesOldSegmentsKeepsSequence) {
  TempDir dir;
  FakeClock clock(kT0);
  constexpr int64_t kDay = 86'400'000;
  {
    auto store = OpenStore(dir.path(), &clock, 2048);
    ASSERT_TRUE(store->EnsureStream("g", "s").ok());
    ASSERT_TRUE(store->EnsureStream("keep", "s").ok());
    AppendLines(store.get(), "g", "s", 0, 300, kT0 - 10 * kDay);  // several sealed segments
    AppendLines(store.get(), "keep", "s", 0, 300, kT0 - 10 * kDay);
    ASSERT_TRUE(store->SetRetention("g", 7).ok());
    ASSERT_TRUE(store->EnforceRetention(clock.NowMillis()).ok());
    auto info = store->GetStream("g", "s");
    EXPECT_EQ(info->first_sequence, 300u);
    EXPECT_EQ(info->next_sequence, 300u);
    EXPECT_EQ(info->stored_bytes, 0);
    EXPECT_TRUE(ReadAll(*store, "g", "s").empty());
    EXPECT_EQ(ReadAll(*store, "keep", "s").size(), 300u);  // no policy: kept
    AppendLines(store.get(), "g", "s", 300, 310, kT0);
  }
  auto store = OpenStore(dir.path(), &clock, 2048);
  auto events = ReadAll(*store, "g", "s");
  ASSERT_EQ(events.size(), 10u);
  EXPECT_EQ(events[0].sequence, 300u);
  EXPECT_EQ(events[0].message, "line 300");
  // Recent events survive retention.
  ASSERT_TRUE(store->EnforceRetention(clock.NowMillis()).ok());
  EXPECT_EQ(ReadAll(*store, "g", "s").size(), 10u);
}

TEST(LogStore, InterleavedWritersAndFollowingReaders) {
  TempDir dir;
  auto store = OpenStore(dir.path(), nullptr, 32 * 1024);
  constexpr int kStreams = 4, kLines = 5000;
  for (int s = 0; s < kStreams; ++s)
    ASSERT_TRUE(store->EnsureStream("g", "node" + std::to_string(s)).ok());
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> seen(kStreams);
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {  // a follower
      std::string name = "node" + std::to_string(s);
      ReadRequest r;
      while (r.position < kLines) {
        auto ok = store->WaitForEvents("g", name, r.position, std::chrono::seconds(10));
        if (!ok.ok() || !*ok) return;
        auto res = store->Read("g", name, r);
        if (!res.ok()) return;
        for (auto& e : res->events) seen[static_cast<size_t>(s)].push_back(e.message);
        r.position = res->next_position;
      }
    });
  }
  for (int s = 0; s < kStreams; ++s) {
    threads.emplace_back([&, s] {  // a writer
      std::string name = "node" + std::to_string(s);
      for (int i = 0; i < kLines; i += 5) {
        std::vector<std::string> msgs;
        for (int k = i; k < i + 5; ++k)
          msgs.push_back("[node " + std::to_string(s) + "] " + std::to_string(k));
        std::vector<InputEvent> evs;
        for (auto& m : msgs) evs.push_back(InputEvent{kT0, m, -1});
        if (!store->Append("g", name, evs).ok()) return;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int s = 0; s < kStreams; ++s) {
    ASSERT_EQ(seen[static_cast<size_t>(s)].size(), static_cast<size_t>(kLines));
    for (int k = 0; k < kLines; ++k) {
      ASSERT_EQ(seen[static_cast<size_t>(s)][static_cast<size_t>(k)],
                "[node " + std::to_string(s) + "] " + std::to_string(k));
    }
  }
}

TEST(LogStore, WaitTimesOutAndDeleteWakesWaiters) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  ASSERT_TRUE(store->EnsureStream("g", "s").ok());
  auto r = store->WaitForEvents("g", "s", 0, std::chrono::milliseconds(10));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  std::thread waiter([&] {
    auto w = store->WaitForEvents("g", "s", 0, std::chrono::seconds(30));
    EXPECT_TRUE(w.status().IsNotFound());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(store->DeleteStream("g", "s").ok());
  waiter.join();
  EXPECT_TRUE(store->GetStream("g", "s").status().IsNotFound());
  EXPECT_TRUE(store->DeleteStream("g", "s").IsNotFound());
  ASSERT_TRUE(store->DeleteGroup("g").ok());
  EXPECT_TRUE(store->GetGroup("g").status().IsNotFound());
  auto reopened = OpenStore(dir.path());
  EXPECT_TRUE(reopened->ListGroups().empty());
}

TEST(LogStore, SourceOffsetTravelsWithEvents) {
  TempDir dir;
  {
    auto store = OpenStore(dir.path());
    ASSERT_TRUE(store->EnsureStream("g", "s").ok());
    EXPECT_EQ(*store->SourceOffset("g", "s"), -1);
    std::vector<InputEvent> evs = {{kT0, "a", 2}, {kT0, "bb", 5}};
    ASSERT_TRUE(store->Append("g", "s", evs).ok());
    std::vector<InputEvent> user = {{kT0, "from PutLogEvents", -1}};
    ASSERT_TRUE(store->Append("g", "s", user).ok());
    EXPECT_EQ(*store->SourceOffset("g", "s"), 5);
  }
  auto store = OpenStore(dir.path());
  EXPECT_EQ(*store->SourceOffset("g", "s"), 5);
}

}  // namespace
}  // namespace lote::logs
