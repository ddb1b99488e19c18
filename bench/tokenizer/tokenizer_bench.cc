// Tokenizer throughput on the same documents: libsentencepiece from C++ (1
// thread) and lote's encoder (1 and N threads, cold cache each run), with a
// count of documents whose ids differ from libsentencepiece's.
//
//   tokenizer_bench MODEL THREADS FILE...   (one document per line)
// With LOTE_BENCH_DUMP=PATH, lote's ids (1 thread) are written there in
// `spm_encode --output_format=id` form, one line per document.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "common/files.h"
#include "data/bpe_tokenizer.h"
#include "data/reference_tokenizer.h"
#include "data/sentencepiece_model.h"

namespace {

using Clock = std::chrono::steady_clock;

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Run {
  double seconds = 0;
  double cpu_seconds = 0;  // CPU time of all threads (less sensitive to a busy machine)
  uint64_t tokens = 0;
  std::vector<std::vector<int32_t>> ids;
};

Run Encode(const lote::data::Tokenizer& t, const std::vector<std::string_view>& docs, int threads) {
  Run run;
  run.ids.resize(docs.size());
  std::atomic<size_t> next{0};
  auto t0 = Clock::now();
  const double c0 = CpuSeconds();
  auto work = [&] {
    for (;;) {
      size_t begin = next.fetch_add(64);
      if (begin >= docs.size()) break;
      size_t end = std::min(docs.size(), begin + 64);
      for (size_t i = begin; i < end; ++i) (void)t.Encode(docs[i], &run.ids[i]);
    }
  };
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  run.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  run.cpu_seconds = CpuSeconds() - c0;
  for (const auto& v : run.ids) run.tokens += v.size();
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL THREADS FILE...\n", argv[0]);
    return 2;
  }
  const std::string model_path = argv[1];
  const int threads = std::atoi(argv[2]);
  std::string corpus;
  for (int i = 3; i < argc; ++i) {
    auto text = lote::ReadFile(argv[i]);
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
  const double mb = static_cast<double>(corpus.size()) / 1e6;
  auto model = lote::data::SentencePieceModel::Load(model_path);
  auto ref = lote::data::ReferenceTokenizer::Load(model_path);
  if (!model.ok() || !ref.ok()) {
    std::fprintf(stderr, "cannot load %s\n", model_path.c_str());
    return 1;
  }
  std::printf("corpus: %zu documents, %.2f MB\n", docs.size(), mb);
  Run reference = Encode(**ref, docs, 1);
  auto report = [&](const char* name, const Run& r, bool compare) {
    size_t mismatches = 0;
    if (compare) {
      for (size_t i = 0; i < docs.size(); ++i) mismatches += r.ids[i] != reference.ids[i];
    }
    std::printf(
        "%-34s %8.2f s (cpu %6.2f s) %8.2f MB/s %10.0f tokens/s  x%.2f vs libsentencepiece  "
        "mismatching docs: %s\n",
        name, r.seconds, r.cpu_seconds, mb / r.seconds, static_cast<double>(r.tokens) / r.seconds,
        reference.seconds / r.seconds, compare ? std::to_string(mismatches).c_str() : "-");
    return mismatches;
  };
  report("libsentencepiece (C++, 1 thread)", reference, false);
  size_t bad = 0;
  for (int n : {1, threads}) {
    auto lote = lote::data::BpeTokenizer::Create(*model);  // fresh: cold word cache
    if (!lote.ok()) {
      std::fprintf(stderr, "%s\n", lote.status().ToString().c_str());
      return 1;
    }
    Run r = Encode(**lote, docs, n);
    if (const char* dump = std::getenv("LOTE_BENCH_DUMP"); dump && n == 1) {
      std::FILE* f = std::fopen(dump, "w");
      for (const auto& ids : r.ids) {
        for (size_t k = 0; k < ids.size(); ++k) std::fprintf(f, k ? " %d" : "%d", ids[k]);
        std::fputc('\n', f);
      }
      std::fclose(f);
    }
    std::string name = "lote-bpe (" + std::to_string(n) + " thread" + (n > 1 ? "s)" : ")");
    bad += report(name.c_str(), r, true);
    std::printf("LOTE_%dT_SECONDS=%.4f\nLOTE_%dT_CPU=%.4f\n", n, r.seconds, n, r.cpu_seconds);
    if (threads == 1) break;
  }
  std::printf("LOTE_REF_SECONDS=%.4f\nLOTE_MB=%.4f\nLOTE_TOKENS=%llu\n", reference.seconds, mb,
              static_cast<unsigned long long>(reference.tokens));
  return bad == 0 ? 0 : 3;
}
