// Reading checkpoints written by `lote train --checkpoint-uri` (docs/checkpoints.md)
// from outside the training loop: listing a job's checkpoints, and exporting one as a
// consolidated Hugging Face `model.safetensors` + `config.json`.
//
//   ListCheckpoints(job_uri)   one CheckpointSummary per `step_<N>/` folder under the
//                              job folder (or the one folder, when job_uri names a
//                              `step_<N>` folder), sorted by step. A checkpoint is
//                              complete when its manifest.json parses, names its own
//                              step, lists a model shard per TP rank, and every file
//                              it lists is in the store with the listed size.
//   ExportCheckpoint(uri)      uri names one `step_<N>` folder (it must be complete) or
//                              a job folder (its latest complete checkpoint). Every
//                              model shard's size and sha256 are checked against the
//                              manifest before it is read; whole tensors are assembled
//                              from the shards' `lote_shards` metadata (each shard
//                              placed at split_begin along split_dim; the shards must
//                              tile every tensor exactly) and checked against the
//                              layout of the manifest's config.
//
// Objects are read through src/objstore (file:// is read in place, s3:// is downloaded
// into a temporary folder inside the output folder and removed afterwards). Errors are
// values: NotFound (no such job/checkpoint, no complete checkpoint), DataLoss (a file
// whose size or sha256 differs from the manifest, or shards that do not assemble; the
// message names the file), InvalidArgument (a malformed manifest or URI), and the
// object store's errors. Thread safety: the functions share no state.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/files.h"
#include "common/json.h"
#include "common/status.h"
#include "engine/checkpoint_shards.h"
#include "engine/llama_config.h"
#include "engine/safetensors.h"
#include "objstore/objstore.h"

namespace lote::engine {

// Opens an object store at a root URI; the default is objstore::OpenObjectStore.
using OpenStoreFn =
    std::function<Result<std::unique_ptr<objstore::ObjectStore>>(std::string_view root_uri)>;

struct CheckpointSummary {
  std::string uri;   // the step folder's URI (no trailing '/')
  std::string name;  // "step_40"
  int64_t step = 0;
  uint64_t total_bytes = 0;  // every object in the folder, manifest included
  int64_t objects = 0;
  bool complete = false;
  std::string problem;  // why it is incomplete ("no manifest.json", ...); empty if complete
  // From the manifest's layout; without a manifest, guessed from the file names
  // (model-tp<r>, optim-tp<r>-dp<d>); 0 when unknown.
  int tensor_parallel = 0;
  int data_parallel = 0;
  std::string created_at;  // the manifest's, if any
  Json ToJson() const;
};

// The job folder for `lote checkpoints list URI|JOB_ID --checkpoint-uri BASE`: an
// argument without '/' is a job id (a "#node" suffix is dropped) under `base` when
// base is given; anything else is a URI (or local path) used as is.
std::string ResolveJobUri(std::string_view uri_or_job_id, std::string_view base);

// True when the last segment of `uri` is "step_<N>" (N digits); sets *step.
bool IsStepFolder(std::string_view uri, int64_t* step);

Result<std::vector<CheckpointSummary>> ListCheckpoints(std::string_view uri,
                                                       const OpenStoreFn& open_store = nullptr);

// A complete checkpoint chosen from a step folder (it must be complete) or a job folder
// (its latest complete one), with its manifest and model config. Shard(name) checks a
// file against the manifest (size, then sha256) and opens it: file:// shards in place,
// others downloaded first into a staging folder inside `work_dir` that is removed with
// the object. The readers live as long as the object. Not thread-safe.
class ChosenCheckpoint {
 public:
  static Result<ChosenCheckpoint> Open(std::string_view uri, const OpenStoreFn& open_store,
                                       const std::string& work_dir);

  const CheckpointSummary& summary() const { return summary_; }
  const Json& manifest() const { return manifest_; }
  const LlamaConfig& config() const { return config_; }

  Result<const SafetensorsReader*> Shard(const std::string& name,
                                         const std::function<void(std::string_view)>& log = {});
  // Every TP rank's model shard, as ModelShards.
  Result<ModelShards> OpenModel(const std::function<void(std::string_view)>& log = {});

 private:
  ChosenCheckpoint() = default;

  CheckpointSummary summary_;
  Json manifest_;
  LlamaConfig config_;
  std::unique_ptr<objstore::ObjectStore> store_;
  std::string folder_;                 // "step_<N>/" inside store_
  std::string local_dir_;              // where the shard files are read
  std::unique_ptr<DirGuard> staging_;  // non-file:// stores: the download folder
  std::vector<std::unique_ptr<SafetensorsReader>> readers_;
};

struct ExportOptions {
  std::string output_dir;  // created if missing; model.safetensors and config.json go here
  OpenStoreFn open_store;  // default: objstore::OpenObjectStore
  std::function<void(std::string_view)> log;  // progress lines; may be empty
  // The tensors' dtype in model.safetensors: kF32 (the master weights as they are) or
  // kBF16 (rounded to nearest even; config.json's torch_dtype then says bfloat16).
  DType dtype = DType::kF32;
};

struct ExportResult {
  std::string checkpoint_uri;  // the step folder exported
  int64_t step = 0;
  int tensor_parallel = 0;
  int64_t tensors = 0;     // whole tensors written
  int64_t parameters = 0;  // floats written
  std::string model_path, config_path;
};

Result<ExportResult> ExportCheckpoint(std::string_view uri, const ExportOptions& options);

// Assembles whole tensors from the model shards of every TP rank (in rank order),
// using their `lote_shards` metadata, into params laid out as ParamLayout(config)
// (resized to its total). `names` are the shards' file names for messages.
Status AssembleModelShards(const LlamaConfig& config,
                           const std::vector<const SafetensorsReader*>& shards,
                           const std::vector<std::string>& names, std::vector<float>* params);

// sha256 (lowercase hex) and size of a local file, streamed.
Result<std::string> Sha256File(const std::string& path, uint64_t* size);

}  // namespace lote::engine
