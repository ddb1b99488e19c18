// CorpusReader: documents from local input files, in a fixed order.
//
// Inputs are files or directories (walked recursively, sorted by path, hidden
// entries skipped). Each file is plain text or JSON Lines, optionally gzip
// compressed (".gz"; zlib). Formats:
//   text   one document per line ("\n", a trailing "\r" is dropped); empty
//          lines are not documents. With doc_per_file the whole file is one
//          document.
//   jsonl  one JSON object per line; the document is the string field
//          `text_key`; empty lines are skipped.
//   auto   jsonl for *.jsonl, *.ndjson, *.json (before an optional .gz), else text.
// Every document must be valid UTF-8. Errors name the file and the line:
// "corpus.jsonl:17: invalid JSON: ...".
// Not thread safe: one reader thread calls NextBatch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::data {

enum class CorpusFormat { kAuto, kText, kJsonl };

struct CorpusOptions {
  CorpusFormat format = CorpusFormat::kAuto;
  std::string text_key = "text";
  bool doc_per_file = false;
};

struct CorpusFile {
  std::string path;     // local path
  uint64_t bytes = 0;   // size on disk (compressed size for .gz)
  CorpusFormat format;  // resolved (never kAuto)
  bool gzip = false;
};

// Expands files and directories into the sorted list of files. NotFound naming
// the input when one does not exist; InvalidArgument when nothing is left.
Result<std::vector<CorpusFile>> ExpandInputs(const std::vector<std::string>& inputs,
                                             const CorpusOptions& options);

// Byte offset of the first malformed UTF-8 sequence, or -1 when valid.
int64_t FindInvalidUtf8(std::string_view s);

class CorpusReader {
 public:
  CorpusReader(std::vector<CorpusFile> files, CorpusOptions options);
  ~CorpusReader();
  CorpusReader(const CorpusReader&) = delete;
  CorpusReader& operator=(const CorpusReader&) = delete;

  // Appends documents to *docs until about `max_bytes` of text were added.
  // Returns false when the corpus is exhausted (docs may still have been added).
  Result<bool> NextBatch(size_t max_bytes, std::vector<std::string>* docs);

  uint64_t bytes_read() const;  // of the input files as stored (progress)
  uint64_t total_bytes() const { return total_bytes_; }
  uint64_t documents() const { return documents_; }

 private:
  Status OpenNext();
  // Reads one line (without '\n') of the current file; false at its end.
  Result<bool> ReadLine(std::string* line);
  // DataLoss when zlib reports an error at the end of the current file.
  Status CheckEnd();
  Status AddDocument(std::string&& text, std::vector<std::string>* docs, size_t* added);

  std::vector<CorpusFile> files_;
  CorpusOptions options_;
  size_t next_file_ = 0;
  void* gz_ = nullptr;  // gzFile of the current file
  const CorpusFile* current_ = nullptr;
  uint64_t line_no_ = 0;
  std::string buf_;
  size_t buf_pos_ = 0;
  bool eof_ = false;
  uint64_t done_bytes_ = 0;  // bytes of files already finished
  uint64_t total_bytes_ = 0;
  uint64_t documents_ = 0;
};

}  // namespace lote::data
