// One checkpoint's shard files read a tensor at a time, for any target layout: the
// export (whole tensors), re-sharding on resume and `lote checkpoint reshard`
// (docs/checkpoints.md has the files).
//
//   ModelShards   model-tp<r>.safetensors of every TP rank, in rank order. Open parses
//                 each file's `lote_shards` metadata and checks, without reading tensor
//                 data, that together they hold exactly the tensors of `config` (names,
//                 global shapes) and tile every split tensor along one dimension.
//   OptimShards   optim-tp<r>-dp<d>.safetensors of a TP x DP layout: AdamW's moments,
//                 each file a range of TP rank r's flat buffer (ParamLayout(config,
//                 {r, TP}) order). Open checks every file's ranges and sizes.
//
// Read(dst, ...) fills dst — a shard of one tensor in any TP layout, or WholeSpec of it
// — from the source shards that overlap it (CopyOverlap). A replicated tensor is taken
// from the last TP rank that holds it (as every rank's copy was placed in turn before);
// with check_replicas (the export) every copy must be bit-identical to the first.
//
// Memory: at most one source shard of one tensor at a time (a buffer the object
// keeps; none when source and target both hold whole rows, which are read straight
// into the target), and the mapped pages are dropped every 16 MiB as they are read
// (SafetensorsReader::Evict), so reading a whole checkpoint costs about a tensor, not
// the model. Errors are values
// naming the file: DataLoss (metadata that does not assemble, a missing tensor),
// InvalidArgument (a tensor the config lacks or shaped otherwise). The readers are
// borrowed and must outlive the object. Not thread-safe (the buffer).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/llama_config.h"
#include "engine/param_layout.h"
#include "engine/safetensors.h"

namespace lote::engine {

class ModelShards {
 public:
  static Result<ModelShards> Open(const LlamaConfig& config,
                                  std::vector<const SafetensorsReader*> readers,
                                  std::vector<std::string> names);

  Status Read(const TensorSpec& dst, float* out, bool check_replicas = false);

 private:
  struct Piece {
    int rank;
    TensorSpec spec;  // as the shard's lote_shards and header describe it
  };
  ModelShards() = default;
  Status ReadPiece(const Piece& p);
  Status ReadRows(const Piece& p, const TensorSpec& dst, float* out);

  std::vector<const SafetensorsReader*> readers_;
  std::vector<std::string> names_;
  std::map<std::string, std::vector<Piece>> pieces_;  // tensor -> its shards, by rank
  std::vector<float> buf_, first_replica_;
};

class OptimShards {
 public:
  // readers[r * dp + d] is optim-tp<r>-dp<d>.safetensors.
  static Result<OptimShards> Open(const LlamaConfig& config, int tp, int dp,
                                  std::vector<const SafetensorsReader*> readers,
                                  std::vector<std::string> names);

  // `moment` is "exp_avg" or "exp_avg_sq".
  Status Read(const TensorSpec& dst, const std::string& moment, float* out);

 private:
  OptimShards() = default;

  int tp_ = 1, dp_ = 1;
  std::vector<ParamLayout> layouts_;  // per source TP rank
  std::vector<const SafetensorsReader*> readers_;
  std::vector<std::string> names_;
  std::vector<float> buf_;
};

}  // namespace lote::engine
