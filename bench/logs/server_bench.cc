// Job output through a real `lote server` (driven by bench/logs/server_bench.py).
//
//   lote_logs_server_bench write SECONDS MAX_BYTES SIDE_JSON
//     The job: writes log lines to stdout as fast as it can (write(2) of
//     64 KiB pieces) for SECONDS or MAX_BYTES, ending on a line end, then
//     writes {"start_ms","end_ms","bytes","lines"} to SIDE_JSON.
//   lote_logs_server_bench wait-stored STREAM LINES TIMEOUT_S
//     Polls GetLogEvents (tail, limit 1) until stream STREAM of /aws/batch/job
//     holds LINES events; prints {"stored_ms": epoch ms when it did}.
//   lote_logs_server_bench verify STREAM BYTES
//     Reads the whole stream back through GetLogEvents, reassembles it
//     (message + '\n') and compares it byte for byte with what `write`
//     produces; prints the stored byte count and EQUAL/DIFFERENT. Executor
//     notices ("lote: ..." lines before the job's output) are counted apart.
//   lote_logs_server_bench verify-store LOGS_DIR STREAM BYTES
//     The same check on the store itself ($LOTE_HOME/logs of a stopped
//     server), much faster than through the API.
//   lote_logs_server_bench get STREAM REQUESTS
//     Times REQUESTS GetLogEvents calls through the API (a quarter each from
//     the head, the tail, random f/ and b/ tokens); prints p50/p99/max.
// The server and credentials come from the environment (eval "$(lote env)").
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cli/api_client.h"
#include "common/files.h"
#include "logs/log_store.h"

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr const char* kGroup = "/aws/batch/job";

int64_t EpochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double Seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// 16 MiB of whole lines like a training job prints, varied; the job writes
// this block over and over.
std::string Block() {
  std::mt19937_64 rng(42);
  std::string out;
  out.reserve((16 << 20) + 256);
  char buf[256];
  uint64_t step = 0;
  for (;;) {
    int n = std::snprintf(
        buf, sizeof buf,
        "2026-11-30T11:00:%02d.%03dZ [rank %2d] step %8" PRIu64
        " loss %.4f lr %.3e tokens/s %7d grad_norm %.3f%s\n",
        static_cast<int>(rng() % 60), static_cast<int>(rng() % 1000), static_cast<int>(rng() % 32),
        step++, 2.0 + static_cast<double>(rng() % 10000) / 10000.0, 3e-4,
        static_cast<int>(rng() % 1000000), static_cast<double>(rng() % 1000) / 1000.0,
        (rng() % 8 == 0) ? " | checkpoint shard written to /mnt/ckpt/step_0000/model.safetensors"
                         : "");
    if (out.size() + static_cast<size_t>(n) > (16u << 20)) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

int Write(double seconds, uint64_t max_bytes, const std::string& side) {
  const std::string block = Block();
  const int64_t start_ms = EpochMs();
  auto start = SteadyClock::now();
  uint64_t written = 0, lines = 0;
  size_t pos = 0;  // next byte of `block` to write
  constexpr size_t kPiece = 64 * 1024;
  for (bool last = false; !last;) {
    size_t n = std::min(kPiece, block.size() - pos);
    if (written + n >= max_bytes || Seconds(start, SteadyClock::now()) >= seconds) {
      last = true;  // finish the current line (the block ends with one), then stop
      n = block.find('\n', pos) - pos + 1;
    }
    for (size_t off = 0; off < n;) {
      ssize_t w = ::write(1, block.data() + pos + off, n - off);
      if (w < 0) {
        std::perror("write");
        return 3;
      }
      off += static_cast<size_t>(w);
    }
    lines += static_cast<uint64_t>(std::count(block.data() + pos, block.data() + pos + n, '\n'));
    written += n;
    pos = (pos + n) % block.size();
  }
  lote::Json j = {
      {"start_ms", start_ms}, {"end_ms", EpochMs()}, {"bytes", written}, {"lines", lines}};
  lote::Status s = lote::WriteFileAtomic(side, j.dump() + "\n", 0644);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

std::unique_ptr<lote::cli::ApiClient> Client() {
  lote::cli::ClientOptions o;
  o.timeout_seconds = 120;
  auto c = lote::cli::ApiClient::Create(o);
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    std::exit(1);
  }
  return std::move(*c);
}

lote::Result<lote::Json> GetLogEvents(lote::cli::ApiClient* c, lote::Json req) {
  return c->JsonTarget("logs", "Logs_20140328.GetLogEvents", req);
}

// Events in the stream now: the tail page's forward token is f/<count>.
lote::Result<uint64_t> EventCount(lote::cli::ApiClient* c, const std::string& stream) {
  ASSIGN_OR_RETURN(
      lote::Json r,
      GetLogEvents(c, {{"logGroupName", kGroup}, {"logStreamName", stream}, {"limit", 1}}));
  std::string fwd = r.value("nextForwardToken", "");
  if (fwd.size() < 3 || fwd[0] != 'f') return lote::Status::Internal("odd token " + fwd);
  return std::strtoull(fwd.c_str() + 2, nullptr, 10);
}

// The executor may put its own notices (lines starting "lote: ", e.g. that
// resource limits are not enforced on this host) before the job's output.
bool IsExecutorNotice(const std::string& message) { return message.rfind("lote: ", 0) == 0; }

// How many executor notices open the stream.
lote::Result<uint64_t> LeadingNotices(lote::cli::ApiClient* c, const std::string& stream) {
  ASSIGN_OR_RETURN(lote::Json r, GetLogEvents(c, {{"logGroupName", kGroup},
                                                  {"logStreamName", stream},
                                                  {"startFromHead", true},
                                                  {"limit", 16}}));
  uint64_t n = 0;
  for (const lote::Json& e : r["events"]) {
    if (!IsExecutorNotice(e.value("message", ""))) break;
    ++n;
  }
  return n;
}

int WaitStored(const std::string& stream, uint64_t lines, double timeout_s) {
  auto c = Client();
  auto start = SteadyClock::now();
  std::optional<uint64_t> notices;
  while (Seconds(start, SteadyClock::now()) < timeout_s) {
    if (!notices) {
      lote::Result<uint64_t> n = LeadingNotices(c.get(), stream);
      if (n.ok()) notices = *n;
    }
    lote::Result<uint64_t> n = EventCount(c.get(), stream);
    if (notices && n.ok() && *n >= lines + *notices) {
      std::printf("{\"stored_ms\": %" PRId64 ", \"events\": %" PRIu64 ", \"notices\": %" PRIu64
                  "}\n",
                  EpochMs(), *n, *notices);
      return *n == lines + *notices ? 0 : 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::fprintf(stderr, "stream %s did not reach %" PRIu64 " events in %.0f s\n", stream.c_str(),
               lines, timeout_s);
  return 1;
}

int Verify(const std::string& stream, uint64_t bytes) {
  auto c = Client();
  const std::string block = Block();
  uint64_t stored = 0, events = 0, notices = 0;
  size_t pos = 0;
  bool equal = true;
  auto compare = [&](const char* data, size_t n) {
    for (size_t i = 0; i < n;) {
      size_t k = std::min(n - i, block.size() - pos);
      if (equal && std::memcmp(data + i, block.data() + pos, k) != 0) equal = false;
      i += k;
      pos = (pos + k) % block.size();
    }
  };
  auto start = SteadyClock::now();
  lote::Json req = {{"logGroupName", kGroup}, {"logStreamName", stream}, {"startFromHead", true}};
  for (;;) {
    lote::Result<lote::Json> r = GetLogEvents(c.get(), req);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    for (const lote::Json& e : (*r)["events"]) {
      const std::string& m = e["message"].get_ref<const std::string&>();
      if (stored == 0 && IsExecutorNotice(m)) {
        ++notices;
        continue;
      }
      compare(m.data(), m.size());
      compare("\n", 1);
      stored += m.size() + 1;
      ++events;
    }
    std::string next = r->value("nextForwardToken", "");
    if (req.contains("nextToken") && req["nextToken"] == next) break;
    req["nextToken"] = next;
  }
  double s = Seconds(start, SteadyClock::now());
  bool same = equal && stored == bytes;
  std::printf("{\"stored_bytes\": %" PRIu64 ", \"events\": %" PRIu64 ", \"written_bytes\": %" PRIu64
              ", \"content\": \"%s\", \"read_back_s\": %.2f, \"executor_notices\": %" PRIu64 "}\n",
              stored, events, bytes, same ? "EQUAL" : "DIFFERENT", s, notices);
  return same ? 0 : 1;
}

int VerifyStore(const std::string& logs_dir, const std::string& stream, uint64_t bytes) {
  lote::logs::LogStoreOptions options;
  options.root = logs_dir;
  auto store = lote::logs::LogStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  const std::string block = Block();
  uint64_t stored = 0, events = 0, notices = 0;
  size_t pos = 0;
  bool equal = true;
  auto compare = [&](const char* data, size_t n) {
    for (size_t i = 0; i < n;) {
      size_t k = std::min(n - i, block.size() - pos);
      if (equal && std::memcmp(data + i, block.data() + pos, k) != 0) equal = false;
      i += k;
      pos = (pos + k) % block.size();
    }
  };
  auto start = SteadyClock::now();
  lote::logs::ReadRequest rr;
  rr.limit = 1'000'000;
  rr.max_bytes = 256 << 20;
  for (;;) {
    auto r = (*store)->Read(kGroup, stream, rr);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    for (const lote::logs::LogEvent& e : r->events) {
      ++events;
      if (stored == 0 && IsExecutorNotice(e.message)) {
        ++notices;
        continue;
      }
      compare(e.message.data(), e.message.size());
      compare("\n", 1);
      stored += e.message.size() + 1;
    }
    if (r->exhausted) break;
    rr.position = r->next_position;
  }
  double s = Seconds(start, SteadyClock::now());
  bool same = equal && stored == bytes;
  std::printf("{\"stored_bytes\": %" PRIu64 ", \"events\": %" PRIu64 ", \"written_bytes\": %" PRIu64
              ", \"content\": \"%s\", \"read_back_s\": %.2f, \"executor_notices\": %" PRIu64 "}\n",
              stored, events, bytes, same ? "EQUAL" : "DIFFERENT", s, notices);
  return same ? 0 : 1;
}

int Get(const std::string& stream, int requests) {
  auto c = Client();
  lote::Result<uint64_t> count = EventCount(c.get(), stream);
  if (!count.ok() || *count == 0) {
    std::fprintf(stderr, "empty or missing stream %s\n", stream.c_str());
    return 1;
  }
  const uint64_t n = *count;
  std::mt19937_64 rng(1);
  std::vector<double> lat;
  uint64_t returned = 0, bytes = 0;
  char tok[40];
  for (int i = 0; i < requests; ++i) {
    lote::Json req = {{"logGroupName", kGroup}, {"logStreamName", stream}};
    switch (i % 4) {
      case 0:
        req["startFromHead"] = true;
        break;
      case 1:
        break;  // the tail
      case 2:
        std::snprintf(tok, sizeof tok, "f/%020" PRIu64, rng() % n);
        req["nextToken"] = tok;
        break;
      default:
        std::snprintf(tok, sizeof tok, "b/%020" PRIu64, rng() % n);
        req["nextToken"] = tok;
        break;
    }
    auto a = SteadyClock::now();
    lote::Result<lote::Json> r = GetLogEvents(c.get(), req);
    lat.push_back(Seconds(a, SteadyClock::now()) * 1000);
    if (!r.ok()) {
      std::fprintf(stderr, "%s\n", r.status().ToString().c_str());
      return 1;
    }
    returned += (*r)["events"].size();
    for (const lote::Json& e : (*r)["events"])
      bytes += e["message"].get_ref<const std::string&>().size();
  }
  std::sort(lat.begin(), lat.end());
  auto pct = [&](double p) {
    return lat[std::min(lat.size() - 1, static_cast<size_t>(p * static_cast<double>(lat.size())))];
  };
  std::printf("{\"events_in_stream\": %" PRIu64
              ", \"requests\": %d, \"events_per_page\": %.0f, "
              "\"kb_per_page\": %.0f, \"p50_ms\": %.2f, \"p99_ms\": %.2f, \"max_ms\": %.2f}\n",
              n, requests, static_cast<double>(returned) / requests,
              static_cast<double>(bytes) / requests / 1024, pct(0.50), pct(0.99), lat.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "write" && argc == 5)
    return Write(std::atof(argv[2]), std::strtoull(argv[3], nullptr, 10), argv[4]);
  if (mode == "wait-stored" && argc == 5)
    return WaitStored(argv[2], std::strtoull(argv[3], nullptr, 10), std::atof(argv[4]));
  if (mode == "verify" && argc == 4) return Verify(argv[2], std::strtoull(argv[3], nullptr, 10));
  if (mode == "verify-store" && argc == 5)
    return VerifyStore(argv[2], argv[3], std::strtoull(argv[4], nullptr, 10));
  if (mode == "get" && argc == 4) return Get(argv[2], std::atoi(argv[3]));
  std::fprintf(stderr,
               "usage: lote_logs_server_bench write SECONDS MAX_BYTES SIDE_JSON\n"
               "       lote_logs_server_bench wait-stored STREAM LINES TIMEOUT_S\n"
               "       lote_logs_server_bench verify STREAM BYTES\n"
               "       lote_logs_server_bench verify-store LOGS_DIR STREAM BYTES\n"
               "       lote_logs_server_bench get STREAM REQUESTS\n");
  return 2;
}
