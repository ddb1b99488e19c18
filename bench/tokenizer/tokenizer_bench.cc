// Tokenizer throughput on the same documents: libsentencepiece from C++ (1
// thread, one pass) and lote's encoder on 1 and N threads, with a count of
// documents whose ids differ from libsentencepiece's.
//
//   tokenizer_bench [options] MODEL FILE...   (one document per line)
//     --threads N     lote's multi-threaded run (default 2)
//     --passes K      lote encodes the corpus K times in a row per run (default 1):
//                     a longer run, and a warm word cache after the first pass, as
//                     on a corpus K times larger whose words repeat
//     --runs R        lote runs per thread count, each with a fresh tokenizer (cold
//                     word cache); the median run is reported (default 3)
//     --no-reference  skip libsentencepiece (no mismatch count)
// With LOTE_BENCH_DUMP=PATH, lote's ids (1 thread, first pass) are written
// there in `spm_encode --output_format=id` form, one line per document.
//
// Work is handed out as in `lote data prepare`: consecutive documents in
// chunks of about 64 KiB taken from a shared counter; each chunk's ids go to
// one buffer (with per-document offsets), not to one vector per document.
// Times: wall (steady clock) and CPU (all threads of the process, user+sys).
// Per thread, from /proc/thread-self/schedstat: time on a CPU, time runnable
// but waiting for a CPU (other load on the machine), and the rest of its wall
// time, i.e. blocked (locks, page faults waiting on I/O) or finished before the
// last thread (imbalance). On a busy machine the wall time mostly measures the
// other load; "free-core estimate" is the wall time the run would take on idle
// cores (see FreeCoreSeconds).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "data/bpe_tokenizer.h"
#include "data/reference_tokenizer.h"
#include "data/sentencepiece_model.h"

namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr size_t kChunkBytes = 64 << 10;

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// The ids of a run of consecutive documents.
struct Chunk {
  size_t first_doc = 0;
  std::vector<int32_t> ids;
  std::vector<size_t> ends;  // ids of document first_doc + k end at ends[k]
};

// Scheduler accounting of the calling thread, in seconds.
struct SchedStat {
  double on_cpu = 0, waiting = 0;
};
SchedStat ThreadSchedStat() {
  std::ifstream f("/proc/thread-self/schedstat");
  double run_ns = 0, wait_ns = 0;
  f >> run_ns >> wait_ns;
  return {run_ns * 1e-9, wait_ns * 1e-9};
}

struct ThreadTimes {
  double on_cpu = 0, waiting = 0, other = 0;  // other: blocked, or done before the last thread
};

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;
  std::vector<ThreadTimes> threads;
  uint64_t tokens = 0;
  size_t mismatches = 0;
  std::vector<Chunk> chunks;  // every pass, in document order
};

// Chunk boundaries over `docs`: consecutive documents of about kChunkBytes.
std::vector<size_t> ChunkStarts(const std::vector<std::string_view>& docs) {
  std::vector<size_t> starts;
  size_t bytes = kChunkBytes;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (bytes >= kChunkBytes) {
      starts.push_back(i);
      bytes = 0;
    }
    bytes += docs[i].size() + 1;
  }
  starts.push_back(docs.size());
  return starts;
}

Run Encode(const lote::data::Tokenizer& t, const std::vector<std::string_view>& docs,
           const std::vector<size_t>& starts, int threads, int passes) {
  const size_t per_pass = starts.size() - 1;
  const size_t total = per_pass * static_cast<size_t>(passes);
  Run run;
  run.chunks.resize(total);
  std::atomic<size_t> next{0};
  std::vector<SchedStat> begin_stat(static_cast<size_t>(threads)),
      end_stat(static_cast<size_t>(threads));
  const auto t0 = SteadyClock::now();
  const double c0 = CpuSeconds();
  auto work = [&](int index) {
    begin_stat[static_cast<size_t>(index)] = ThreadSchedStat();
    for (size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < total;) {
      Chunk& chunk = run.chunks[c];
      const size_t begin = starts[c % per_pass], end = starts[c % per_pass + 1];
      size_t bytes = 0;
      for (size_t i = begin; i < end; ++i) bytes += docs[i].size();
      // Local vectors, moved into the shared array once (no false sharing of
      // the vector headers between threads working on neighbouring chunks).
      std::vector<int32_t> ids;
      std::vector<size_t> ends;
      ids.reserve(bytes / 3 + (end - begin));  // as `lote data prepare` does
      ends.reserve(end - begin);
      for (size_t i = begin; i < end; ++i) {
        (void)t.Encode(docs[i], &ids);
        ends.push_back(ids.size());
      }
      chunk.first_doc = begin;
      chunk.ids = std::move(ids);
      chunk.ends = std::move(ends);
    }
    end_stat[static_cast<size_t>(index)] = ThreadSchedStat();
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work, i);
  work(0);
  for (auto& th : pool) th.join();
  run.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  run.cpu_seconds = CpuSeconds() - c0;
  for (int i = 0; i < threads; ++i) {
    ThreadTimes tt;
    tt.on_cpu = end_stat[static_cast<size_t>(i)].on_cpu - begin_stat[static_cast<size_t>(i)].on_cpu;
    tt.waiting =
        end_stat[static_cast<size_t>(i)].waiting - begin_stat[static_cast<size_t>(i)].waiting;
    tt.other = std::max(0.0, run.seconds - tt.on_cpu - tt.waiting);
    run.threads.push_back(tt);
  }
  for (const auto& c : run.chunks) run.tokens += c.ids.size();
  return run;
}

// The wall time on idle cores: the threads' time on a CPU shared evenly (work
// is handed out in small chunks, so on free cores the threads finish together;
// on a busy machine the thread that gets more CPU simply takes more chunks),
// plus the longest time a thread was blocked or idle.
double FreeCoreSeconds(const Run& r) {
  double on_cpu = 0, other = 0;
  for (const ThreadTimes& t : r.threads) {
    on_cpu += t.on_cpu;
    other = std::max(other, t.other);
  }
  return on_cpu / static_cast<double>(r.threads.size()) + other;
}

// Calls fn(doc index, ids, count) for each document of the run, in order.
template <typename Fn>
void ForEachDoc(const Run& r, Fn fn) {
  for (const Chunk& c : r.chunks) {
    size_t begin = 0;
    for (size_t k = 0; k < c.ends.size(); ++k) {
      fn(c.first_doc + k, c.ids.data() + begin, c.ends[k] - begin);
      begin = c.ends[k];
    }
  }
}

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--threads N] [--passes K] [--runs R] [--no-reference] MODEL FILE...\n",
               argv0);
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, passes = 1, runs = 3;
  bool reference_run = true;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> int {
      if (i + 1 >= argc) {
        Usage(argv[0]);
        std::exit(2);
      }
      return std::atoi(argv[++i]);
    };
    if (a == "--threads") {
      threads = value();
    } else if (a == "--passes") {
      passes = value();
    } else if (a == "--runs") {
      runs = value();
    } else if (a == "--no-reference") {
      reference_run = false;
    } else if (a.rfind("--", 0) == 0) {
      Usage(argv[0]);
      return 2;
    } else {
      positional.push_back(a);
    }
  }
  if (positional.size() < 2 || threads < 1 || passes < 1 || runs < 1) {
    Usage(argv[0]);
    return 2;
  }
  const std::string model_path = positional[0];
  std::string corpus;
  for (size_t i = 1; i < positional.size(); ++i) {
    auto text = lote::ReadFile(positional[i]);
    if (!text.ok()) {
      std::fprintf(stderr, "%s\n", text.status().ToString().c_str());
      return 1;
    }
    corpus += *text;
    if (!corpus.empty() && corpus.back() != '\n') corpus.push_back('\n');
  }
  std::vector<std::string_view> docs;
  for (size_t pos = 0; pos < corpus.size();) {
    size_t nl = corpus.find('\n', pos);
    docs.emplace_back(corpus.data() + pos, nl - pos);
    pos = nl + 1;
  }
  const std::vector<size_t> starts = ChunkStarts(docs);
  const double mb = static_cast<double>(corpus.size()) / 1e6;
  auto model = lote::data::SentencePieceModel::Load(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 1;
  }
  std::printf(
      "corpus: %zu documents, %.2f MB, %zu chunks of ~%zu KiB; lote: %d pass%s per run, "
      "median of %d run%s\n",
      docs.size(), mb, starts.size() - 1, kChunkBytes >> 10, passes, passes > 1 ? "es" : "", runs,
      runs > 1 ? "s" : "");

  // Reference ids, one vector per document.
  std::vector<std::vector<int32_t>> want;
  double ref_seconds = 0;
  uint64_t ref_tokens = 0;
  if (reference_run) {
    auto ref = lote::data::ReferenceTokenizer::Load(model_path);
    if (!ref.ok()) {
      std::fprintf(stderr, "%s\n", ref.status().ToString().c_str());
      return 1;
    }
    Run r = Encode(**ref, docs, starts, 1, 1);
    want.resize(docs.size());
    ForEachDoc(r, [&](size_t i, const int32_t* v, size_t n) { want[i].assign(v, v + n); });
    ref_seconds = r.seconds;
    ref_tokens = r.tokens;
    std::printf("%-36s %8.3f s (cpu %7.3f s) %8.2f MB/s %10.0f tokens/s\n",
                "libsentencepiece (C++, 1 thread)", r.seconds, r.cpu_seconds, mb / r.seconds,
                static_cast<double>(r.tokens) / r.seconds);
  }

  size_t bad = 0;
  std::vector<int> thread_counts = {1};
  if (threads > 1) thread_counts.push_back(threads);
  for (int n : thread_counts) {
    std::vector<Run> results;
    for (int r = 0; r < runs; ++r) {
      auto lote = lote::data::BpeTokenizer::Create(*model);  // fresh: cold word cache
      if (!lote.ok()) {
        std::fprintf(stderr, "%s\n", lote.status().ToString().c_str());
        return 1;
      }
      Run run = Encode(**lote, docs, starts, n, passes);
      if (reference_run) {
        ForEachDoc(run, [&](size_t i, const int32_t* v, size_t k) {
          run.mismatches += k != want[i].size() || !std::equal(v, v + k, want[i].begin());
        });
      }
      if (const char* dump = std::getenv("LOTE_BENCH_DUMP"); dump && n == 1 && r == 0) {
        std::FILE* f = std::fopen(dump, "w");
        if (!f) {
          std::fprintf(stderr, "cannot write %s\n", dump);
          return 1;
        }
        size_t written = 0;
        ForEachDoc(run, [&](size_t, const int32_t* v, size_t k) {
          if (written++ >= docs.size()) return;  // first pass only
          for (size_t j = 0; j < k; ++j) std::fprintf(f, j ? " %d" : "%d", v[j]);
          std::fputc('\n', f);
        });
        std::fclose(f);
      }
      run.chunks.clear();
      run.chunks.shrink_to_fit();
      results.push_back(std::move(run));
    }
    for (const Run& r : results) bad += r.mismatches;
    auto median = [&](auto field) {
      std::vector<double> v;
      for (const Run& r : results) v.push_back(field(r));
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double wall = median([](const Run& r) { return r.seconds; });
    const double cpu = median([](const Run& r) { return r.cpu_seconds; });
    const double free_core = median([](const Run& r) { return FreeCoreSeconds(r); });
    const double total_mb = mb * passes;
    const std::string name = "lote-bpe (" + std::to_string(n) + " thread" + (n > 1 ? "s)" : ")");
    std::printf("%-36s %8.3f s (cpu %7.3f s) %8.2f MB/s %10.0f tokens/s  mismatching docs: %s\n",
                name.c_str(), wall, cpu, total_mb / wall,
                static_cast<double>(results[0].tokens) / wall,
                reference_run ? std::to_string(bad).c_str() : "-");
    std::printf("  free-core estimate %.3f s (%.2f MB/s); %.2f MB per CPU-second\n", free_core,
                total_mb / free_core, total_mb / cpu);
    for (const Run& r : results) {
      std::printf(
          "  run: wall %.3f s, cpu %.3f s, free-core %.3f s; per thread on-cpu/waiting/other:",
          r.seconds, r.cpu_seconds, FreeCoreSeconds(r));
      for (const ThreadTimes& t : r.threads)
        std::printf(" %.3f/%.3f/%.3f", t.on_cpu, t.waiting, t.other);
      std::printf("\n");
    }
    std::printf("LOTE_%dT_SECONDS=%.4f\nLOTE_%dT_CPU=%.4f\nLOTE_%dT_FREE=%.4f\n", n, wall, n, cpu,
                n, free_core);
  }
  std::printf("LOTE_THREADS=%d\nLOTE_PASSES=%d\nLOTE_REF_SECONDS=%.4f\nLOTE_MB=%.4f\n", threads,
              passes, ref_seconds, mb);
  std::printf("LOTE_TOKENS=%llu\n", static_cast<unsigned long long>(ref_tokens));
  return bad == 0 ? 0 : 3;
}
