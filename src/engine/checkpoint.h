// Sharded, asynchronous checkpoints of a (distributed) training run, in the format
// of docs/checkpoints.md: per TP rank a model shard, per rank an optimizer shard,
// and manifest.json written last by rank 0 once every shard is complete (a
// checkpoint without its manifest does not exist).
//
// CheckpointWriter::Save copies this rank's state to host memory (the only time
// training is blocked) and uploads it on a background thread; at most one
// checkpoint is in flight (a second Save first waits for the first). Every rank runs
// its own writer with the same calls; the ranks never talk to each other for it:
// each writes a `<file>.done` marker with its files' sizes and checksums, and rank
// 0's writer waits for all markers before it writes the manifest, deletes the
// markers and prunes older checkpoints beyond --keep-checkpoints. Uploads are
// retried; a failure is reported by the next Save or Wait, never ignored. A rank
// whose upload fails writes `rank-<r>.failed` instead of its `.done` marker, and
// rank 0 then gives the checkpoint up (no manifest, so it never becomes "latest";
// a later checkpoint's pruning removes its files). Whether a failed checkpoint ends
// the run is the trainer's decision (checkpoint_failures.h).
//
// LoadCheckpoint reads the state for this rank's place in any layout: with the
// layout it was written with it reads only its own shards; otherwise it assembles
// whole tensors (and whole AdamW moments) from every shard and cuts this rank's
// pieces (re-sharding). Not thread-safe (one writer per rank, used by one thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "common/status.h"
#include "engine/llama_config.h"
#include "engine/parallel_dims.h"
#include "engine/param_layout.h"

namespace lote::objstore {
class ObjectStore;
}

namespace lote::engine {

// Everything a resume needs, for one rank.
struct TrainState {
  int64_t step = 0;       // optimizer steps done
  int64_t adam_step = 0;  // AdamW's bias-correction step count
  int64_t sampler_epoch = 0, sampler_position = 0;
  std::vector<float> params;      // this TP rank's whole flat buffer
  std::vector<float> exp_avg;     // AdamW m over [shard_begin, shard_end)
  std::vector<float> exp_avg_sq;  // AdamW v
  int64_t shard_begin = 0, shard_end = 0;
  Json train;  // the run's options (informational; the manifest's "train")
};

struct CheckpointOptions {
  std::string uri;  // base: checkpoints go to <uri>/<job id>/step_<N>/
  std::string job_id;
  int keep = 0;  // 0 = keep every checkpoint
  // Which run of the job this is (its attempt): rank 0 heeds only the `.failed`
  // markers of its own run, not those an earlier attempt left in a step folder.
  std::string run = "1";
  std::chrono::milliseconds wait_for_ranks = std::chrono::minutes(30);
};

class CheckpointWriter {
 public:
  static Result<std::unique_ptr<CheckpointWriter>> Create(CheckpointOptions options,
                                                          const LlamaConfig& config,
                                                          const ParallelDims& dims);
  ~CheckpointWriter();  // waits for the upload in flight

  // Takes the snapshot `state` (the caller's copy of host memory) and starts
  // uploading step_<state.step>/.
  Status Save(TrainState state);
  // The same without allocating: waits for the upload in flight, then returns the
  // writer's own snapshot buffer, whose vectors keep their memory from one checkpoint
  // to the next (filling it is a copy, not fresh pages); Start() uploads it.
  Result<TrainState*> Snapshot();
  Status Start();
  // Makes the next Start()'s upload fail with `why` without writing anything, as a
  // store that refuses every write (and every retry) until `until` (an injected
  // fault: lote:injectUploadFailSeconds, docs/faults.md). Called before Start().
  void FailNextUpload(std::string why, std::chrono::steady_clock::time_point until) {
    inject_failure_ = std::move(why);
    inject_until_ = until;
  }
  // Waits for the upload in flight; returns its result.
  Status Wait();
  // The checkpoint folder of a step (for messages).
  std::string StepUri(int64_t step) const;

 private:
  CheckpointWriter(CheckpointOptions options, const LlamaConfig& config, const ParallelDims& dims);
  Status UploadOrMarkFailed(const TrainState& state);
  Status Upload(const TrainState& state);
  Status WaitForMarkers(objstore::ObjectStore* store, const std::string& step_dir, int64_t step,
                        Json* files);
  Status WriteManifest(const TrainState& state, const std::vector<std::string>& files);
  Status Prune(int64_t newest);

  CheckpointOptions opt_;
  LlamaConfig config_;
  const ParallelDims& dims_;
  std::string job_root_;                   // <uri>/<job id>
  std::string spool_;                      // local folder for files before upload
  std::optional<std::string> local_root_;  // file:// job root: shards are written in place
  std::thread worker_;
  TrainState buffer_;           // the snapshot; written by the caller between Snapshot and Start
  Status result_;               // of the last finished upload (read after joining worker_)
  std::string inject_failure_;  // "" = none; else the next upload's injected error
  std::chrono::steady_clock::time_point inject_until_;
};

// The objects of a checkpoint folder (docs/checkpoints.md) and their safetensors
// metadata, as the writer writes them: a re-sharded checkpoint gets the same bytes as
// one trained in its layout.
std::string ModelShardFile(int tp_rank);
std::string OptimShardFile(int tp_rank, int dp_rank);
std::map<std::string, std::string> ModelShardMetadata(const ParamLayout& layout);
std::map<std::string, std::string> OptimShardMetadata(const ParamLayout& layout, int dp_rank,
                                                      int dp, Range shard);

// The newest complete checkpoint (manifest present) under <uri>/<job id>/, as its
// step folder URI; NotFound when there is none.
Result<std::string> LatestCheckpoint(const std::string& uri, const std::string& job_id);

// Reads the checkpoint at `step_uri` for the rank `dims` (any layout; see above): its
// TP rank's whole flat buffer and AdamW moments over its ZeRO-1 shard
// (dims.ZeroShard of that buffer).
Result<TrainState> LoadCheckpoint(const std::string& step_uri, const LlamaConfig& config,
                                  const ParallelDims& dims);

}  // namespace lote::engine
