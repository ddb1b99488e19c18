// Megatron-LM "MMIDIDX" indexed datasets, as lote writes them (docs/datasets.md).
//
// A dataset is a folder (or object prefix) with:
//   data.bin       tokens, little-endian, uint16 when the vocabulary has at
//                  most 65536 ids, else int32; sequence after sequence.
//   data.idx       9-byte magic "MMIDIDX\0\0", uint64 version (1), uint8 dtype
//                  code (8 = uint16, 4 = int32), uint64 sequence_count,
//                  uint64 document_count, int32 sizes[sequence_count],
//                  int64 pointers[sequence_count] (byte offsets into data.bin),
//                  int64 doc_idx[document_count].
//   manifest.json  DatasetManifest below; written last: a dataset without its
//                  manifest does not exist.
// lote writes each packed block as one sequence and its own document: every
// size is block_size and doc_idx is 0, 1, ..., sequence_count.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/crypto.h"
#include "common/json.h"
#include "common/status.h"
#include "objstore/objstore.h"

namespace lote::data {

inline constexpr char kIdxMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};
inline constexpr uint8_t kDtypeUint16 = 8;
inline constexpr uint8_t kDtypeInt32 = 4;
inline constexpr const char* kDatasetPrefix = "data";
inline constexpr const char* kManifestName = "manifest.json";

struct SourceInfo {
  std::string path;  // as given (a local path or URI)
  uint64_t bytes = 0;
  std::string sha256;
};

// Size and sha256 (lowercase hex) of one file of the dataset (data.bin, data.idx).
struct FileDigest {
  std::string name;
  uint64_t bytes = 0;
  std::string sha256;
  bool operator==(const FileDigest&) const = default;
};

// The manifest.json of a dataset.
struct DatasetManifest {
  std::string format = "megatron-mmidx";
  int64_t version = 1;
  std::string prefix = kDatasetPrefix;
  std::string dtype;  // "uint16" or "int32"
  std::string tokenizer_sha256;
  int64_t vocab_size = 0;
  int64_t bos_id = 1;
  std::optional<int64_t> eos_id;  // null: no EOS is added
  int64_t block_size = 0;
  int64_t num_sequences = 0;
  int64_t num_tokens = 0;         // num_sequences * block_size
  int64_t num_documents = 0;      // source documents
  int64_t num_source_tokens = 0;  // tokens of all documents, BOS included, before packing
  std::vector<SourceInfo> sources;
  // data.bin and data.idx, in that order. Empty in manifests written before
  // lote recorded them ("files" absent): readers then can check sizes only.
  std::vector<FileDigest> files;

  // The digest of `name`, or null when the manifest does not list it.
  const FileDigest* file(std::string_view name) const;
  OrderedJson ToJson() const;
  static Result<DatasetManifest> FromJson(const Json& j);
};

// The fixed-size start of data.idx, and where its arrays lie: enough to read
// single entries with ranged reads.
struct IndexHeader {
  static constexpr uint64_t kBytes = 9 + 8 + 1 + 8 + 8;  // magic, version, dtype, 2 counts
  uint8_t dtype = 0;
  uint64_t num_sequences = 0;
  uint64_t num_documents = 0;

  uint64_t item_bytes() const { return dtype == kDtypeUint16 ? 2 : 4; }
  uint64_t size_offset(uint64_t i) const { return kBytes + 4 * i; }
  uint64_t pointer_offset(uint64_t i) const { return kBytes + 4 * num_sequences + 8 * i; }
  uint64_t idx_bytes() const { return kBytes + 12 * num_sequences + 8 * num_documents; }
};
// Parses the first IndexHeader::kBytes bytes of a data.idx. DataLoss naming
// `what` for a bad magic, version or dtype, or too few bytes.
Result<IndexHeader> ParseIndexHeader(std::string_view bytes, const std::string& what);

// What `lote data inspect` prints, read from any object store with a few
// small reads: manifest.json (when present), the data.idx header and first
// entry (ranged), the sizes of data.idx and data.bin (Head), and the first
// `count` tokens of sequence 0 from data.bin (ranged); data.bin is never
// downloaded. DataLoss when the index disagrees with the files' sizes.
struct DatasetPeek {
  std::optional<DatasetManifest> manifest;
  IndexHeader header;
  std::vector<int32_t> first_tokens;  // of sequence 0 (empty when there is none)
};
Result<DatasetPeek> PeekDataset(objstore::ObjectStore& store, int64_t count);

// Appends packed sequences to data.bin and writes data.idx at Finish.
// Not thread safe. Files are written in `dir` (which must exist).
class IndexedDatasetWriter {
 public:
  static Result<std::unique_ptr<IndexedDatasetWriter>> Create(const std::string& dir,
                                                              int64_t vocab_size,
                                                              int64_t block_size);
  ~IndexedDatasetWriter();

  // Appends one sequence of exactly block_size tokens.
  Status AddSequence(const int32_t* tokens);
  // Flushes data.bin, writes data.idx, fsyncs both.
  Status Finish();
  int64_t num_sequences() const { return num_sequences_; }
  // Sizes and sha256 of data.bin and data.idx (hashed as they are written);
  // valid after a successful Finish.
  const std::vector<FileDigest>& files() const { return files_; }
  const char* dtype_name() const { return dtype_ == kDtypeUint16 ? "uint16" : "int32"; }

 private:
  IndexedDatasetWriter() = default;
  std::string dir_;
  uint8_t dtype_ = kDtypeUint16;
  int64_t block_size_ = 0;
  int64_t num_sequences_ = 0;
  std::FILE* bin_ = nullptr;
  std::vector<char> buffer_;
  std::unique_ptr<Sha256Hasher> bin_hash_;
  uint64_t bin_bytes_ = 0;
  std::vector<FileDigest> files_;
};

// Read-only, memory-mapped view of a local dataset folder (data.idx, data.bin
// and, when present, manifest.json). Validates the index against the .bin size.
// Thread safety: immutable after Open; safe to share.
class IndexedDataset {
 public:
  struct Options {
    // Parse manifest.json when the folder has one (callers with their own
    // manifest rules, like the training engine, turn this off).
    bool read_manifest = true;
  };
  static Result<std::unique_ptr<IndexedDataset>> Open(const std::string& dir, Options options);
  static Result<std::unique_ptr<IndexedDataset>> Open(const std::string& dir) {
    return Open(dir, Options());
  }
  ~IndexedDataset();

  uint8_t dtype() const { return dtype_; }
  int64_t num_sequences() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t num_documents() const { return static_cast<int64_t>(doc_idx_.size()); }
  int32_t size(int64_t i) const { return sizes_[i]; }
  int64_t pointer(int64_t i) const { return pointers_[i]; }
  const std::vector<int64_t>& doc_idx() const { return doc_idx_; }
  // Token `pos` of sequence `i`; bounds are the caller's to respect.
  int32_t token(int64_t i, int64_t pos) const;
  // A copy of sequence i as int32 ids.
  std::vector<int32_t> Sequence(int64_t i) const;
  // out[0, count) = tokens [begin, begin + count) of sequence i (the caller
  // keeps them inside the sequence).
  void Read(int64_t i, int64_t begin, int64_t count, int32_t* out) const;
  // The manifest, when the folder has one.
  const std::optional<DatasetManifest>& manifest() const { return manifest_; }

 private:
  IndexedDataset() = default;
  uint8_t dtype_ = 0;
  std::vector<int32_t> sizes_;
  std::vector<int64_t> pointers_;
  std::vector<int64_t> doc_idx_;
  const uint8_t* bin_ = nullptr;
  size_t bin_size_ = 0;
  std::optional<DatasetManifest> manifest_;
};

}  // namespace lote::data
