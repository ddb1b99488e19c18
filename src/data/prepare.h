// PrepareDataset: text corpus -> packed, tokenized Megatron dataset
// (what `lote data prepare` runs; format in indexed_dataset.h).
//
// Each document is tokenized as Hugging Face's Llama tokenizer does in the
// reference recipe: BOS first, no EOS. All documents are concatenated in input
// order and cut into blocks of block_size tokens; the remainder is dropped (HF
// group_texts). Output is byte-identical for any thread count.
// All or nothing: everything is written to a staging folder, then renamed into
// place (file://) or uploaded with manifest.json last (s3://); on error nothing
// is left at the output. An output that already holds a dataset is refused.
// Thread safety: PrepareDataset may run concurrently for different outputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/status.h"
#include "data/corpus.h"
#include "data/indexed_dataset.h"
#include "data/tokenizer.h"

namespace lote::data {

struct PrepareOptions {
  std::vector<std::string> inputs;  // files, directories, s3:// objects or prefixes
  std::string tokenizer_path;       // SentencePiece tokenizer.model
  int64_t block_size = 4096;
  std::string output_uri;  // local folder, file://, or s3://bucket/prefix
  int threads = 0;         // tokenization threads; 0 = all cores
  CorpusOptions corpus;
  TokenizerKind tokenizer = TokenizerKind::kAuto;
  size_t batch_bytes = 256 << 10;  // text per work item (small: the last items balance the threads)
};

struct PrepareProgress {
  std::string phase;  // "tokenize" or "upload"
  uint64_t bytes_done = 0;
  uint64_t bytes_total = 0;
  uint64_t documents = 0;
  uint64_t tokens = 0;
  double elapsed_s = 0;
  bool final = false;  // the last report of a phase
};
// Called from the calling thread, at most every ~100 ms and once at the end of each phase.
using PrepareProgressFn = std::function<void(const PrepareProgress&)>;

Result<DatasetManifest> PrepareDataset(const PrepareOptions& options,
                                       const PrepareProgressFn& progress = nullptr);

// Sha256 (hex) and size of a local file.
Result<std::pair<std::string, uint64_t>> HashFile(const std::string& path);

}  // namespace lote::data
