// `lote checkpoint reshard`: a checkpoint rewritten offline for another TP x DP layout
// (docs/checkpoints.md), streaming: every output file is written tensor by tensor from
// the source shards that overlap it (ModelShards / OptimShards), so the process holds
// about twice the largest tensor, never a whole model or a rank's state. The files are
// the bytes a run in the new layout would have written (same names, metadata, order),
// and manifest.json (written last) is the source's with the new layout and files.
// `lote train --resume` reads the result like any checkpoint.
//
// Errors are values: those of ChosenCheckpoint (no complete checkpoint, a corrupt
// shard), InvalidArgument (a layout the model cannot take, an output that is not a
// local folder), and file errors naming the path. Thread safety: no shared state.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "engine/checkpoint_tools.h"

namespace lote::engine {

struct ReshardOptions {
  // A local folder (path or file:// URI): the checkpoint goes to its step_<N>/ (or to
  // the folder itself when it is named step_<N>, N the checkpoint's step); created if
  // missing, refused if it already holds a manifest.
  std::string output_dir;
  int tensor_parallel = 1;
  int data_parallel = 1;
  OpenStoreFn open_store;                     // default: objstore::OpenObjectStore
  std::function<void(std::string_view)> log;  // progress lines; may be empty
};

struct ReshardResult {
  std::string checkpoint_uri;  // the step folder read
  std::string step_dir;        // the step folder written
  int64_t step = 0;
  int from_tp = 0, from_dp = 0;
  int64_t files = 0;  // written, manifest.json excluded
  uint64_t bytes = 0;
  int64_t largest_tensor = 0;  // floats of the largest whole tensor (memory is about twice)
};

Result<ReshardResult> ReshardCheckpoint(std::string_view uri, const ReshardOptions& options);

}  // namespace lote::engine
