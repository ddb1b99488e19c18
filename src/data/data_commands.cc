// `lote data prepare` and `lote data inspect`.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>

#include "common/json.h"
#include "common/recipe_config.h"
#include "data/indexed_dataset.h"
#include "data/prepare.h"
#include "lote/registry.h"
#include "objstore/objstore.h"

namespace lote::data {
namespace {

std::string HumanBytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string HumanCount(double n) {
  char buf[32];
  if (n >= 1e9)
    std::snprintf(buf, sizeof(buf), "%.2fG", n / 1e9);
  else if (n >= 1e6)
    std::snprintf(buf, sizeof(buf), "%.2fM", n / 1e6);
  else if (n >= 1e3)
    std::snprintf(buf, sizeof(buf), "%.1fk", n / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f", n);
  return buf;
}

std::string Duration(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  int64_t t = static_cast<int64_t>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(t / 3600),
                  static_cast<long long>(t / 60 % 60), static_cast<long long>(t % 60));
  else
    std::snprintf(buf, sizeof(buf), "%lld:%02lld", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  return buf;
}

// A bar redrawn in place on a terminal; a plain line every few seconds otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(::isatty(STDERR_FILENO) == 1) {}
  void operator()(const PrepareProgress& p) {
    if (!tty_ && !p.final && p.elapsed_s - last_line_s_ < 5.0) return;
    last_line_s_ = p.elapsed_s;
    const double frac =
        p.bytes_total ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total) : 0;
    const double eta = frac > 0 ? p.elapsed_s * (1 - frac) / frac : NAN;
    std::string line;
    if (p.phase == "tokenize") {
      line = HumanBytes(static_cast<double>(p.bytes_done)) + "/" +
             HumanBytes(static_cast<double>(p.bytes_total)) + "  " +
             HumanCount(static_cast<double>(p.documents)) + " docs  " +
             HumanCount(static_cast<double>(p.tokens)) + " tokens  " +
             HumanCount(p.elapsed_s > 0 ? static_cast<double>(p.tokens) / p.elapsed_s : 0) +
             " tok/s";
    } else {
      line = HumanBytes(static_cast<double>(p.bytes_done)) + "/" +
             HumanBytes(static_cast<double>(p.bytes_total)) + "  " +
             HumanBytes(p.elapsed_s > 0 ? static_cast<double>(p.bytes_done) / p.elapsed_s : 0) +
             "/s";
    }
    line += p.final ? "  done in " + Duration(p.elapsed_s) : "  ETA " + Duration(eta);
    char pct[16];
    std::snprintf(pct, sizeof(pct), "%5.1f%%", 100 * frac);
    if (tty_) {
      const int width = 24;
      int filled = static_cast<int>(frac * width);
      std::string bar(static_cast<size_t>(filled), '#');
      bar.append(static_cast<size_t>(width - filled), '.');
      std::fprintf(stderr, "\r%-8s [%s] %s  %s\033[K%s", p.phase.c_str(), bar.c_str(), pct,
                   line.c_str(), p.final ? "\n" : "");
    } else {
      std::fprintf(stderr, "%s: %s  %s\n", p.phase.c_str(), pct, line.c_str());
    }
    std::fflush(stderr);
  }

 private:
  bool tty_;
  double last_line_s_ = -1e9;
};

struct PrepareArgs {
  PrepareOptions options;
  std::string format = "auto";
  std::string tokenizer_impl = "auto";
  std::string config_file;
  bool block_size_given = false;
};

// Without --input/--tokenizer/--output, the example folder's config.txt says:
// CORPUS (one or more paths), TOKENIZER, TOKENIZED_DATASET_URI and SEQ_LEN
// (blocks of SEQ_LEN + 1 tokens: inputs and shifted targets).
Status FillFromConfig(PrepareArgs* args) {
  ASSIGN_OR_RETURN(RecipeConfig config, LoadRecipeConfig(args->config_file));
  PrepareOptions& o = args->options;
  if (o.inputs.empty()) {
    ASSIGN_OR_RETURN(std::string corpus, config.Require("CORPUS"));
    size_t pos = 0;
    while (pos < corpus.size()) {
      size_t sp = corpus.find(' ', pos);
      std::string one = corpus.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
      if (!one.empty()) o.inputs.push_back(config.ResolvePath(one));
      pos = sp == std::string::npos ? corpus.size() : sp + 1;
    }
  }
  if (o.tokenizer_path.empty()) {
    ASSIGN_OR_RETURN(std::string tokenizer, config.Require("TOKENIZER"));
    o.tokenizer_path = config.ResolvePath(tokenizer);
  }
  if (o.output_uri.empty()) {
    ASSIGN_OR_RETURN(o.output_uri, config.Require("TOKENIZED_DATASET_URI"));
  }
  if (!args->block_size_given && config.Get("SEQ_LEN")) {
    ASSIGN_OR_RETURN(int64_t seq_len, config.RequireInt("SEQ_LEN"));
    o.block_size = seq_len + 1;
  }
  return Status::Ok();
}

// True when the output already holds the dataset these options would write
// (same tokenizer, block size and input files): the workflow may run again.
Result<bool> AlreadyPrepared(const PrepareOptions& o) {
  ASSIGN_OR_RETURN(auto store, objstore::OpenObjectStore(o.output_uri));
  ASSIGN_OR_RETURN(bool exists, store->Exists("manifest.json"));
  if (!exists) return false;
  ASSIGN_OR_RETURN(std::string text, store->GetBytes("manifest.json"));
  ASSIGN_OR_RETURN(Json j, ParseJson(text));
  ASSIGN_OR_RETURN(DatasetManifest m, DatasetManifest::FromJson(j));
  ASSIGN_OR_RETURN(auto tokenizer, HashFile(o.tokenizer_path));
  if (m.tokenizer_sha256 != tokenizer.first || m.block_size != o.block_size ||
      m.sources.size() != o.inputs.size()) {
    return false;
  }
  for (size_t i = 0; i < o.inputs.size(); ++i) {
    Result<std::pair<std::string, uint64_t>> h = HashFile(o.inputs[i]);
    if (!h.ok() || h->first != m.sources[i].sha256) return false;
  }
  return true;
}

int RunPrepare(PrepareArgs& args) {
  const bool from_config = args.options.inputs.empty() || args.options.tokenizer_path.empty() ||
                           args.options.output_uri.empty();
  if (from_config) {
    if (Status st = FillFromConfig(&args); !st.ok()) {
      std::fprintf(stderr,
                   "lote data prepare: %s\n(without a config.txt, pass --input, --tokenizer and "
                   "--output)\n",
                   st.message().c_str());
      return 1;
    }
    Result<bool> done = AlreadyPrepared(args.options);
    if (done.ok() && *done) {
      std::printf("%s already holds this dataset (same corpus, tokenizer and block size): kept\n",
                  args.options.output_uri.c_str());
      return 0;
    }
  }
  if (args.format == "text")
    args.options.corpus.format = CorpusFormat::kText;
  else if (args.format == "jsonl")
    args.options.corpus.format = CorpusFormat::kJsonl;
  else
    args.options.corpus.format = CorpusFormat::kAuto;
  if (args.tokenizer_impl == "lote")
    args.options.tokenizer = TokenizerKind::kLote;
  else if (args.tokenizer_impl == "sentencepiece")
    args.options.tokenizer = TokenizerKind::kReference;
  ProgressPrinter printer;
  auto result = PrepareDataset(args.options, [&](const PrepareProgress& p) { printer(p); });
  if (!result.ok()) {
    std::fprintf(stderr, "lote data prepare: %s\n", result.status().ToString().c_str());
    return 1;
  }
  const DatasetManifest& m = *result;
  std::printf("wrote %s: %lld sequences of %lld tokens (%s), from %lld documents / %lld tokens\n",
              args.options.output_uri.c_str(), static_cast<long long>(m.num_sequences),
              static_cast<long long>(m.block_size), m.dtype.c_str(),
              static_cast<long long>(m.num_documents), static_cast<long long>(m.num_source_tokens));
  return 0;
}

int RunInspect(const std::string& uri, int count) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "lote data inspect: %s\n", st.ToString().c_str());
    return 1;
  };
  auto parsed = objstore::ParseUri(uri);
  if (!parsed.ok()) return fail(parsed.status());
  if (parsed->scheme == "s3") {
    // Remote: a few ranged reads (index header and first entry, the tokens
    // shown), never the whole data.bin.
    auto store = objstore::OpenObjectStore(uri);
    if (!store.ok()) return fail(store.status());
    auto peek = PeekDataset(**store, count);
    if (!peek.ok()) return fail(peek.status());
    if (peek->manifest) std::printf("%s\n", peek->manifest->ToJson().dump(2).c_str());
    std::printf("sequences: %lld  documents (doc_idx entries): %lld  dtype code: %d\n",
                static_cast<long long>(peek->header.num_sequences),
                static_cast<long long>(peek->header.num_documents), peek->header.dtype);
    if (peek->header.num_sequences > 0) {
      std::printf("first tokens of sequence 0:");
      for (int32_t t : peek->first_tokens) std::printf(" %d", t);
      std::printf("\n");
    }
    return 0;
  }
  // Local: memory-mapped, every entry checked against data.bin.
  auto ds = IndexedDataset::Open(parsed->key);
  if (!ds.ok()) return fail(ds.status());
  if ((*ds)->manifest()) std::printf("%s\n", (*ds)->manifest()->ToJson().dump(2).c_str());
  std::printf("sequences: %lld  documents (doc_idx entries): %lld  dtype code: %d\n",
              static_cast<long long>((*ds)->num_sequences()),
              static_cast<long long>((*ds)->num_documents()), (*ds)->dtype());
  if ((*ds)->num_sequences() > 0) {
    std::printf("first tokens of sequence 0:");
    for (int i = 0; i < count && i < (*ds)->size(0); ++i) std::printf(" %d", (*ds)->token(0, i));
    std::printf("\n");
  }
  return 0;
}

CommandRegistrar reg([](CLI::App& app) {
  auto* data = app.add_subcommand(
      "data", "Dataset preparation: tokenize and pack corpora into Megatron datasets");
  data->require_subcommand(1);

  auto args = std::make_shared<PrepareArgs>();
  auto* prepare = data->add_subcommand(
      "prepare",
      "Tokenize text into a packed Megatron-LM indexed dataset (data.bin, data.idx, "
      "manifest.json).\n"
      "Each document gets BOS first and no EOS; all are concatenated and cut into --block-size\n"
      "blocks, the remainder dropped. The output appears complete or not at all.");
  prepare->add_option(
      "--input", args->options.inputs,
      "Input files, folders, or s3:// objects/prefixes (text: one document per line; "
      "JSON Lines; .gz allowed); default: CORPUS of ./config.txt");
  prepare->add_option("--tokenizer", args->options.tokenizer_path,
                      "SentencePiece tokenizer.model; default: TOKENIZER of ./config.txt");
  auto* block = prepare->add_option("--block-size", args->options.block_size,
                                    "Tokens per packed sequence (default 4096; from config.txt: "
                                    "SEQ_LEN + 1)");
  block->default_val(4096);
  prepare->add_option("--output", args->options.output_uri,
                      "Output folder, file:// or s3://bucket/prefix (must not hold a dataset); "
                      "default: TOKENIZED_DATASET_URI of ./config.txt");
  prepare->add_option("--config-file", args->config_file,
                      "The recipe's config.txt to read what is not given (default ./config.txt); "
                      "run from it again, an identical dataset already there is kept");
  prepare->add_option("--threads", args->options.threads, "Tokenization threads (0 = all cores)")
      ->default_val(0);
  prepare
      ->add_option("--text-key", args->options.corpus.text_key, "JSON Lines field holding the text")
      ->default_val("text");
  prepare->add_option("--format", args->format, "Input format")
      ->check(CLI::IsMember({"auto", "text", "jsonl"}))
      ->default_val("auto");
  prepare->add_flag("--doc-per-file", args->options.corpus.doc_per_file,
                    "Each text file is one document (instead of one per line)");
  prepare
      ->add_option("--tokenizer-impl", args->tokenizer_impl,
                   "auto: lote's fast exact encoder when the model allows it; lote; sentencepiece")
      ->check(CLI::IsMember({"auto", "lote", "sentencepiece"}))
      ->default_val("auto");
  prepare->callback([args, block] {
    args->block_size_given = block->count() > 0;
    SetExitCode(RunPrepare(*args));
  });

  auto uri = std::make_shared<std::string>();
  auto count = std::make_shared<int>(16);
  auto* inspect =
      data->add_subcommand("inspect", "Print a dataset's manifest and its first tokens");
  inspect->add_option("URI", *uri, "Dataset folder, file:// or s3:// prefix")->required();
  inspect->add_option("--tokens", *count, "How many tokens of the first sequence to print")
      ->default_val(16);
  inspect->callback([uri, count] { SetExitCode(RunInspect(*uri, *count)); });
});

}  // namespace
}  // namespace lote::data
