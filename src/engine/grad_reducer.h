// GradReducer: the ZeRO-1 gradient reduce-scatter over the data-parallel group, in
// buckets, while backward is still running (as DDP does). Backward reports the
// gradients it has finished as a shrinking suffix [begin, total) of the flat buffer
// (the LM head and final norm first, then the layers from the last, then the
// embedding: LlamaModel's GradReady); every time a bucket's worth is complete the
// reducer's own thread reduce-scatters it, so the communication of the layers done
// overlaps the backward of the layers still to come. Finish queues the rest and waits.
//
// A bucket [b, e) is cut at the DP ranks' shard boundaries and reduce-scattered with
// those counts, so each element is summed by the same ring, in the same order, as one
// reduce-scatter of the whole buffer would: the result is bit-identical to it.
//
// The DP communicator belongs to the reducer's thread between Begin and Finish (the
// caller must not use it then). Not thread-safe otherwise (one caller).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "engine/communicator.h"

namespace lote::engine {

class GradReducer {
 public:
  // shard_counts: every DP rank's ZeRO-1 shard size, in rank order (they sum to the
  // buffer's length). bucket_floats: the size at which a bucket is sent.
  GradReducer(Communicator* dp, std::vector<int64_t> shard_counts, int64_t bucket_floats);
  ~GradReducer();

  // A step's reduction of `grads` starts; nothing of it is complete yet.
  void Begin(float* grads);
  // grads[begin, total) are complete (begin only decreases within a step).
  void Ready(int64_t begin);
  // Sends what is left, waits for every bucket; the first collective's error.
  Status Finish();

  // Seconds the caller has waited in Finish, and the reducer's thread spent inside
  // collectives, since creation.
  double wait_seconds() const { return wait_s_; }
  double comm_seconds() const;

 private:
  void Enqueue(int64_t begin, int64_t end);  // with mu_ held
  void Loop();
  Status Reduce(int64_t begin, int64_t end);

  Communicator* dp_;
  std::vector<int64_t> offsets_;  // shard boundaries: rank r owns [offsets_[r], offsets_[r+1])
  int64_t bucket_;
  float* grads_ = nullptr;
  int64_t sent_ = 0;  // [sent_, total) is queued or reduced
  double wait_s_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, int64_t>> queue_;
  bool busy_ = false, stop_ = false;
  Status error_;
  double comm_s_ = 0;
  std::thread thread_;
};

}  // namespace lote::engine
