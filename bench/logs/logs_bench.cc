// Log store benchmarks (see bench/logs/run.sh and docs/benchmarks.md).
//
//   lote_logs_bench ingest DIR SECONDS MAX_BYTES
//     A child process writes lines to DIR/out as fast as it can for SECONDS
//     (or MAX_BYTES), while a LogIngestor stores them. Prints the stored
//     rate, verifies the stored bytes equal the written bytes (reassembled
//     from the stream, with checksums), and times `cat DIR/out >/dev/null`.
//   lote_logs_bench get DIR BYTES REQUESTS
//     Builds a stream of BYTES of log lines, then times REQUESTS random
//     GetLogEvents calls (head, tail, forward and backward tokens) through
//     LogsService, including serialising the response. Prints p50/p99/max.
//   lote_logs_bench streams ROOT N
//     Fills the log store at ROOT (e.g. $LOTE_HOME/logs) with N streams of
//     three lines each in the group /aws/batch/job, as N finished jobs leave
//     them (bench/logs/streams.py times a server's start on it). ROOT is kept.
// DIR is removed at the end (get, ingest).
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "logs/crc32c.h"
#include "logs/ingestor.h"
#include "logs/logs_service.h"

namespace {

using Clock = std::chrono::steady_clock;
using lote::logs::Crc32cExtend;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU seconds (user + system) used by this process so far.
double CpuSeconds() {
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// Lines like a training job prints, with varying numbers and lengths.
std::string MakeLines(size_t bytes, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string out;
  out.reserve(bytes + 256);
  char buf[256];
  uint64_t step = 0;
  while (out.size() < bytes) {
    int n = std::snprintf(
        buf, sizeof buf,
        "2026-11-30T07:50:%02d.%03dZ [rank %2d] step %8" PRIu64
        " loss %.4f lr %.3e tokens/s %7d grad_norm %.3f%s\n",
        static_cast<int>(rng() % 60), static_cast<int>(rng() % 1000), static_cast<int>(rng() % 32),
        step++, 2.0 + static_cast<double>(rng() % 10000) / 10000.0, 3e-4,
        static_cast<int>(rng() % 1000000), static_cast<double>(rng() % 1000) / 1000.0,
        (rng() % 8 == 0)
            ? " | checkpoint shard written to /mnt/ckpt/step_0000/model_tp0.safetensors"
            : "");
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

int Ingest(const std::string& dir, double seconds, uint64_t max_bytes) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string src = dir + "/out";
  lote::logs::LogStoreOptions so;
  so.root = dir + "/logs";
  if (const char* mb = std::getenv("LOTE_BENCH_SEGMENT_MB"))
    so.segment_bytes = std::strtoull(mb, nullptr, 10) << 20;
  auto store = lote::logs::LogStore::Open(so);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  lote::logs::IngestorOptions io;
  io.source_path = src;
  io.group = "/aws/batch/job";
  io.stream = "bench/default/0123456789abcdef0123456789abcdef";
  io.idle_poll = std::chrono::milliseconds(5);
  if (const char* kb = std::getenv("LOTE_BENCH_READ_KB"))
    io.read_bytes = std::strtoull(kb, nullptr, 10) << 10;
  auto ing = lote::logs::LogIngestor::Create(store->get(), io);
  if (!ing.ok()) {
    std::fprintf(stderr, "%s\n", ing.status().ToString().c_str());
    return 1;
  }
  std::string block = MakeLines(16 << 20, 42);
  block.resize(block.rfind('\n') + 1);
  double cpu0 = CpuSeconds();
  auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid == 0) {
    // The job: write(2) in 64 KiB pieces (like a stdio buffer), flat out.
    FILE* f = std::fopen(src.c_str(), "ab");
    if (!f) ::_exit(2);
    std::setvbuf(f, nullptr, _IOFBF, 64 * 1024);
    uint64_t written = 0;
    while (Seconds(start, Clock::now()) < seconds && written < max_bytes) {
      size_t n = std::min<uint64_t>(block.size(), max_bytes - written);
      if (n < block.size()) {  // stop at a line end, so every line is whole
        size_t nl = block.rfind('\n', n - 1);
        if (nl == std::string::npos) break;
        n = nl + 1;
      }
      if (std::fwrite(block.data(), 1, n, f) != n) ::_exit(3);
      written += n;
    }
    std::fclose(f);
    ::_exit(0);
  }
  if (!(*ing)->Start().ok()) return 1;
  int status = 0;
  ::waitpid(pid, &status, 0);
  auto writer_done = Clock::now();
  (*ing)->MarkComplete();
  lote::Status s = (*ing)->WaitUntilComplete(std::chrono::minutes(10));
  auto done = Clock::now();
  double cpu = CpuSeconds() - cpu0;
  if (!s.ok()) {
    std::fprintf(stderr, "ingest failed: %s\n", s.ToString().c_str());
    return 1;
  }
  uint64_t written = std::filesystem::file_size(src);

  // Verify: reassemble the stream (message + '\n') and compare with the file.
  uint32_t stored_crc = 0;
  uint64_t stored = 0, events = 0;
  lote::logs::ReadRequest rr;
  rr.limit = 1'000'000;
  rr.max_bytes = 256 << 20;
  for (;;) {
    auto r = (*store)->Read(io.group, io.stream, rr);
    if (!r.ok()) return 1;
    for (const auto& e : r->events) {
      stored_crc = Crc32cExtend(stored_crc, e.message.data(), e.message.size());
      stored_crc = Crc32cExtend(stored_crc, "\n", 1);
      stored += e.message.size() + 1;
      ++events;
    }
    if (r->exhausted) break;
    rr.position = r->next_position;
  }
  uint32_t file_crc = 0;
  {
    FILE* f = std::fopen(src.c_str(), "rb");
    std::string buf(1 << 20, '\0');
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), f)) > 0)
      file_crc = Crc32cExtend(file_crc, buf.data(), n);
    std::fclose(f);
  }
  // Catch-up: the same file, already complete, into a fresh stream (how fast
  // a backlog drains, e.g. after a restart).
  double catchup_s = 0, catchup_cpu = 0;
  {
    lote::logs::IngestorOptions co = io;
    co.stream = "bench/default/catch-up";
    auto c2 = lote::logs::LogIngestor::Create(store->get(), co);
    if (!c2.ok()) return 1;
    (*c2)->MarkComplete();
    double c0 = CpuSeconds();
    auto a = Clock::now();
    for (;;) {
      auto r = (*c2)->Poll();
      if (!r.ok()) return 1;
      if (*r) break;
    }
    catchup_s = Seconds(a, Clock::now());
    catchup_cpu = CpuSeconds() - c0;
  }
  auto cat_start = Clock::now();
  int rc = std::system(("cat '" + src + "' > /dev/null").c_str());
  double cat_s = Seconds(cat_start, Clock::now());
  double ingest_s = Seconds(start, done);
  double mb = static_cast<double>(written) / 1e6;
  std::printf("writer: %.1f MB in %.2f s (%.0f MB/s)\n", mb, Seconds(start, writer_done),
              mb / Seconds(start, writer_done));
  std::printf("lote ingest: %.1f MB, %" PRIu64
              " events stored in %.2f s (until fully stored): %.0f MB/s\n",
              mb, events, ingest_s, mb / ingest_s);
  std::printf("lote ingest CPU: %.2f s (user+sys) -> %.0f MB per CPU-second\n", cpu, mb / cpu);
  std::printf("stored bytes (messages + newlines): %" PRIu64 ", written: %" PRIu64
              " -> %s; checksum %s\n",
              stored, written, stored == written ? "EQUAL" : "DIFFERENT",
              stored_crc == file_crc ? "EQUAL" : "DIFFERENT");
  std::printf("cat to /dev/null (same file, same run): %.2f s: %.0f MB/s%s\n", cat_s, mb / cat_s,
              rc == 0 ? "" : " (cat failed)");
  std::printf("ratio lote ingest / cat: %.2f\n", (mb / ingest_s) / (mb / cat_s));
  std::printf(
      "catch-up (same file, already complete, fresh stream): %.2f s: %.0f MB/s (%.0f MB per "
      "CPU-second)\n",
      catchup_s, mb / catchup_s, mb / catchup_cpu);
  std::printf("ratio catch-up / cat: %.2f\n", (mb / catchup_s) / (mb / cat_s));
  std::filesystem::remove_all(dir);
  return stored == written && stored_crc == file_crc ? 0 : 1;
}

int Get(const std::string& dir, uint64_t bytes, int requests) {
  std::filesystem::remove_all(dir);
  lote::logs::LogStoreOptions so;
  so.root = dir + "/logs";
  auto store = lote::logs::LogStore::Open(so);
  if (!store.ok()) return 1;
  const std::string g = "/aws/batch/job", s = "bench/default/big";
  if (!(*store)->EnsureStream(g, s).ok()) return 1;
  std::string block = MakeLines(8 << 20, 7);
  std::vector<std::string_view> lines;
  for (size_t pos = 0; pos < block.size();) {
    size_t nl = block.find('\n', pos);
    if (nl == std::string::npos) break;
    lines.emplace_back(block.data() + pos, nl - pos);
    pos = nl + 1;
  }
  auto t0 = Clock::now();
  uint64_t done = 0;
  int64_t ts = 1'700'000'000'000;
  std::vector<lote::logs::InputEvent> evs;
  while (done < bytes) {
    evs.clear();
    for (auto l : lines) {
      evs.push_back({ts, l, -1});
      done += l.size() + 1;
      if (evs.size() % 1000 == 0) ++ts;
    }
    if (!(*store)->Append(g, s, evs).ok()) return 1;
  }
  double build_s = Seconds(t0, Clock::now());
  auto info = (*store)->GetStream(g, s);
  uint64_t n = info->next_sequence;
  std::printf("built a %.2f GB stream of %" PRIu64 " events in %.1f s\n",
              static_cast<double>(done) / 1e9, n, build_s);

  lote::logs::LogsService svc(store->get(), nullptr);
  std::mt19937_64 rng(1);
  std::vector<double> lat;
  uint64_t returned = 0;
  char tok[40];
  for (int i = 0; i < requests; ++i) {
    lote::Json req = {{"logGroupName", g}, {"logStreamName", s}};
    switch (i % 4) {
      case 0:
        req["startFromHead"] = true;
        break;  // head
      case 1:
        break;  // tail
      case 2:
        std::snprintf(tok, sizeof tok, "f/%020" PRIu64, rng() % n);
        req["nextToken"] = tok;
        break;
      case 3:
        std::snprintf(tok, sizeof tok, "b/%020" PRIu64, rng() % n);
        req["nextToken"] = tok;
        break;
    }
    auto a = Clock::now();
    auto r = svc.Call("GetLogEvents", req);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    std::string body = r->dump();  // the api layer serialises it
    lat.push_back(Seconds(a, Clock::now()) * 1000);
    returned += (*r)["events"].size();
  }
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return lat[std::min(lat.size() - 1, static_cast<size_t>(p * static_cast<double>(lat.size())))];
  };
  std::printf(
      "GetLogEvents x%d (head/tail/random forward/backward tokens, default limit, ~%.0f events per "
      "page):\n",
      requests, static_cast<double>(returned) / requests);
  std::printf("  p50 %.2f ms  p99 %.2f ms  max %.2f ms\n", pct(0.50), pct(0.99), lat.back());
  std::filesystem::remove_all(dir);
  return 0;
}

int Streams(const std::string& root, size_t n) {
  lote::logs::LogStoreOptions o;
  o.root = root;
  o.load_in_background = false;
  auto store = lote::logs::LogStore::Open(o);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  const std::string group = "/aws/batch/job";
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const std::string lines[3] = {"starting", "step 1 loss 2.3456", "done"};
  Clock::time_point began = Clock::now();
  for (size_t i = 0; i < n; ++i) {
    char name[96];
    std::snprintf(name, sizeof name, "bench/default/%08zx-0000-4000-8000-%012zx", i, i);
    lote::Status st = (*store)->EnsureStream(group, name);
    std::vector<lote::logs::InputEvent> events;
    for (const std::string& line : lines) events.push_back({now, line, -1});
    if (st.ok()) st = (*store)->Append(group, name, events).status();
    if (!st.ok()) {
      std::fprintf(stderr, "stream %zu: %s\n", i, st.ToString().c_str());
      return 1;
    }
    if ((i + 1) % 10000 == 0) {
      std::fprintf(stderr, "\r%zu of %zu streams (%.0f s)", i + 1, n, Seconds(began, Clock::now()));
    }
  }
  std::fprintf(stderr, "\n");
  std::printf("%zu streams made in %.1f s\n", n, Seconds(began, Clock::now()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "ingest" && argc == 5)
    return Ingest(argv[2], std::atof(argv[3]), std::strtoull(argv[4], nullptr, 10));
  if (mode == "get" && argc == 5)
    return Get(argv[2], std::strtoull(argv[3], nullptr, 10), std::atoi(argv[4]));
  if (mode == "streams" && argc == 4) return Streams(argv[2], std::strtoull(argv[3], nullptr, 10));
  std::fprintf(stderr,
               "usage: lote_logs_bench ingest DIR SECONDS MAX_BYTES\n"
               "       lote_logs_bench get DIR BYTES REQUESTS\n"
               "       lote_logs_bench streams ROOT N\n");
  return 2;
}
