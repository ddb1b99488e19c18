#include "logs/ingestor.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "logs/test_util.h"
#include "logs/utf8.h"

namespace lote::logs {
namespace {

using testing::TempDir;

std::unique_ptr<LogStore> OpenStore(const std::string& root) {
  LogStoreOptions o;
  o.root = root + "/logs";
  auto r = LogStore::Open(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

void AppendToFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::vector<std::string> Messages(const LogStore& store, const std::string& g = "g",
                                  const std::string& s = "s") {
  std::vector<std::string> out;
  ReadRequest r;
  r.limit = 1'000'000;
  r.max_bytes = SIZE_MAX;
  for (;;) {
    auto res = store.Read(g, s, r);
    EXPECT_TRUE(res.ok());
    if (!res.ok()) break;
    for (auto& e : res->events) out.push_back(e.message);
    if (res->exhausted) break;
    r.position = res->next_position;
  }
  return out;
}

IngestorOptions Opts(const std::string& source) {
  IngestorOptions o;
  o.source_path = source;
  o.group = "g";
  o.stream = "s";
  o.idle_poll = std::chrono::milliseconds(2);
  return o;
}

TEST(LogIngestor, LinesPartialLinesAndCompletion) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  std::string src = dir.path() + "/node0.out";
  auto ing = LogIngestor::Create(store.get(), Opts(src));
  ASSERT_TRUE(ing.ok()) << ing.status().ToString();
  ASSERT_FALSE(*(*ing)->Poll());  // no file yet: nothing, not complete
  AppendToFile(src, "one\ntwo\n\nthr");
  ASSERT_FALSE(*(*ing)->Poll());
  EXPECT_EQ(Messages(*store), (std::vector<std::string>{"one", "two", ""}));
  AppendToFile(src, "ee\r\nfour");
  ASSERT_FALSE(*(*ing)->Poll());
  EXPECT_EQ(Messages(*store), (std::vector<std::string>{"one", "two", "", "three\r"}));
  (*ing)->MarkComplete();
  ASSERT_TRUE(*(*ing)->Poll());
  EXPECT_EQ(Messages(*store), (std::vector<std::string>{"one", "two", "", "three\r", "four"}));
  auto st = (*ing)->stats();
  EXPECT_TRUE(st.complete);
  EXPECT_EQ(st.source_offset, 20);
  EXPECT_EQ(st.bytes_consumed, 20u);
  EXPECT_EQ(*store->SourceOffset("g", "s"), 20);
}

TEST(LogIngestor, ProgressLinesAreReportedAndStored) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  std::string src = dir.path() + "/out";
  std::vector<Json> reports;
  IngestorOptions o = Opts(src);
  o.on_progress = [&](const ProgressReport& r) { reports.push_back(r.values); };
  auto ing = LogIngestor::Create(store.get(), o);
  ASSERT_TRUE(ing.ok());
  AppendToFile(src,
               "LOTE_PROGRESS {\"step\": 1, \"loss\": 2.5}\n"
               "LOTE_PROGRESS {broken\n"
               "LOTE_PROGRESS [1,2]\n"
               "xLOTE_PROGRESS {\"step\": 9}\n"
               "LOTE_PROGRESS {\"step\": 2, \"total_steps\": 10}\n");
  (*ing)->MarkComplete();
  ASSERT_TRUE(*(*ing)->Poll());
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0]["step"], 1);
  EXPECT_EQ(reports[0]["loss"], 2.5);
  EXPECT_EQ(reports[1]["total_steps"], 10);
  EXPECT_EQ((*ing)->stats().malformed_progress, 2u);
  EXPECT_EQ((*ing)->stats().progress_reports, 2u);
  EXPECT_EQ(Messages(*store).size(), 5u);
}

TEST(LogIngestor, LongLinesAndBinaryOutput) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  std::string src = dir.path() + "/out";
  std::string big(600 * 1024, 'z');
  std::string binary;
  for (int i = 0; i < 4096; ++i) binary.push_back(static_cast<char>(i * 37 + 11));
  AppendToFile(src, big + "\n");
  AppendToFile(src, binary);  // no trailing newline; some bytes are '\n'
  auto ing = LogIngestor::Create(store.get(), Opts(src));
  ASSERT_TRUE(ing.ok());
  (*ing)->MarkComplete();
  ASSERT_TRUE(*(*ing)->Poll());
  auto msgs = Messages(*store);
  ASSERT_GE(msgs.size(), 4u);
  EXPECT_EQ(msgs[0].size(), kMaxEventBytes);
  EXPECT_EQ(msgs[1].size(), kMaxEventBytes);
  EXPECT_EQ(msgs[0] + msgs[1] + msgs[2], big);
  for (const auto& m : msgs) EXPECT_TRUE(IsValidUtf8(m));
  EXPECT_EQ((*ing)->stats().source_offset, static_cast<int64_t>(big.size() + 1 + binary.size()));
}

TEST(LogIngestor, LongPartialLineIsStoredInPiecesWhileWaiting) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  std::string src = dir.path() + "/out";
  auto ing = LogIngestor::Create(store.get(), Opts(src));
  ASSERT_TRUE(ing.ok());
  AppendToFile(src, std::string(300 * 1024, 'p'));  // a progress bar with no newline
  ASSERT_FALSE(*(*ing)->Poll());
  EXPECT_EQ(Messages(*store).size(), 1u);  // the first 256 KiB; 44 KiB wait
  AppendToFile(src, "q\n");
  ASSERT_FALSE(*(*ing)->Poll());
  auto msgs = Messages(*store);
  ASSERT_EQ(msgs.size(), 2u);
  EXPECT_EQ(msgs[1], std::string(300 * 1024 - kMaxEventBytes, 'p') + "q");
}

TEST(LogIngestor, DoneMarkerCompletes) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  std::string src = dir.path() + "/out";
  IngestorOptions o = Opts(src);
  o.done_marker_path = dir.path() + "/out.done";
  auto ing = LogIngestor::Create(store.get(), o);
  ASSERT_TRUE(ing.ok());
  ASSERT_TRUE((*ing)->Start().ok());
  AppendToFile(src, "a\nlast without newline");
  EXPECT_TRUE((*ing)->WaitUntilComplete(std::chrono::milliseconds(50)).code() ==
              StatusCode::kDeadlineExceeded);
  AppendToFile(o.done_marker_path, "0\n");
  ASSERT_TRUE((*ing)->WaitUntilComplete(std::chrono::seconds(30)).ok());
  EXPECT_EQ(Messages(*store), (std::vector<std::string>{"a", "last without newline"}));
  EXPECT_TRUE((*ing)->Stop().ok());
}

// A restart in the middle (with a partial line pending) neither loses nor
// repeats a line.
TEST(LogIngestor, ResumesAfterRestartWithoutLossOrDuplicates) {
  TempDir dir;
  std::string src = dir.path() + "/out";
  {
    auto store = OpenStore(dir.path());
    auto ing = LogIngestor::Create(store.get(), Opts(src));
    ASSERT_TRUE(ing.ok());
    AppendToFile(src, "l0\nl1\nl2 partial");
    ASSERT_FALSE(*(*ing)->Poll());
  }
  AppendToFile(src, " done\nl3\n");
  auto store = OpenStore(dir.path());
  auto ing = LogIngestor::Create(store.get(), Opts(src));
  ASSERT_TRUE(ing.ok());
  EXPECT_EQ((*ing)->stats().source_offset, 6);
  (*ing)->MarkComplete();
  ASSERT_TRUE(*(*ing)->Poll());
  EXPECT_EQ(Messages(*store), (std::vector<std::string>{"l0", "l1", "l2 partial done", "l3"}));
}

// The server (store + ingestor) is killed with SIGKILL while a job writes;
// a new server finishes the ingestion: every line exactly once, in order.
TEST(LogIngestor, ServerKilledMidIngestionResumesExactlyOnce) {
  TempDir dir;
  std::string src = dir.path() + "/out";
  constexpr int kLines = 200'000;
  std::string all;
  for (int i = 0; i < kLines; ++i) all += "line " + std::to_string(i) + " of the training log\n";
  {
    auto store = OpenStore(dir.path());  // create the layout once
    ASSERT_TRUE(store->EnsureStream("g", "s").ok());
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    LogStoreOptions so;
    so.root = dir.path() + "/logs";
    so.record_bytes = 4096;  // many small records: kill lands between them
    auto store = LogStore::Open(so);
    if (!store.ok()) ::_exit(2);
    IngestorOptions o = Opts(src);
    o.read_bytes = 8192;
    auto ing = LogIngestor::Create(store->get(), o);
    if (!ing.ok()) ::_exit(3);
    bool told = false;
    for (;;) {
      if (!(*ing)->Poll().ok()) ::_exit(4);
      if (!told && (*ing)->stats().events > 1000) {
        char c = 'x';
        if (::write(fds[1], &c, 1) != 1) ::_exit(5);
        told = true;
      }
    }
  }
  ::close(fds[1]);
  // Write the output in uneven chunks while the child ingests.
  size_t half = all.size() / 2 + 7;
  AppendToFile(src, all.substr(0, half));
  char c;
  ASSERT_EQ(::read(fds[0], &c, 1), 1);
  ::kill(pid, SIGKILL);
  int status;
  ::waitpid(pid, &status, 0);
  ::close(fds[0]);
  AppendToFile(src, all.substr(half));

  auto store = OpenStore(dir.path());
  auto ing = LogIngestor::Create(store.get(), Opts(src));
  ASSERT_TRUE(ing.ok());
  EXPECT_GT((*ing)->stats().source_offset, 0);
  (*ing)->MarkComplete();
  ASSERT_TRUE(*(*ing)->Poll());
  auto msgs = Messages(*store);
  ASSERT_EQ(msgs.size(), static_cast<size_t>(kLines));
  for (int i = 0; i < kLines; ++i) {
    ASSERT_EQ(msgs[static_cast<size_t>(i)], "line " + std::to_string(i) + " of the training log");
  }
}

// The job itself is killed with SIGKILL mid-output: every line it wrote
// before dying (acknowledged through a pipe) is in the stream, in order.
TEST(LogIngestor, JobKilledMidOutputKeepsEveryWrittenLine) {
  TempDir dir;
  auto store = OpenStore(dir.path());
  std::string src = dir.path() + "/out";
  auto ing = LogIngestor::Create(store.get(), Opts(src));
  ASSERT_TRUE(ing.ok());
  ASSERT_TRUE((*ing)->Start().ok());
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the job: unbuffered writes straight to its output file
    ::close(fds[0]);
    int fd = ::open(src.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) ::_exit(2);
    for (uint32_t i = 0;; ++i) {
      std::string line = "step " + std::to_string(i) + "\n";
      if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(3);
      if (::write(fds[1], &i, 4) != 4) ::_exit(4);
    }
  }
  ::close(fds[1]);
  uint32_t acked = 0, v;
  while (::read(fds[0], &v, 4) == 4) {
    acked = v;
    if (acked >= 20000) break;
  }
  ::kill(pid, SIGKILL);
  while (::read(fds[0], &v, 4) == 4) acked = v;
  ::close(fds[0]);
  int status;
  ::waitpid(pid, &status, 0);
  (*ing)->MarkComplete();  // what the executor does once the process is gone
  ASSERT_TRUE((*ing)->WaitUntilComplete(std::chrono::seconds(60)).ok());
  auto msgs = Messages(*store);
  ASSERT_GE(msgs.size(), acked + 1);
  for (uint32_t i = 0; i <= acked; ++i) ASSERT_EQ(msgs[i], "step " + std::to_string(i));
}

}  // namespace
}  // namespace lote::logs
