// ZeroComm: ZeRO-1's data-parallel communication on its own thread, overlapped with
// compute (as DDP and FSDP do):
//
//   gradients   reduce-scattered in buckets while backward is still running. Backward
//               reports the gradients it has finished as a shrinking suffix
//               [begin, total) of the flat buffer (the LM head and final norm first,
//               then the layers from the last, then the embedding: LlamaModel's
//               GradReady); every time a bucket's worth is complete the thread
//               reduce-scatters it, so the communication of the layers done overlaps
//               the backward of the layers still to come. FinishReduce queues the rest
//               and waits.
//   parameters  after the optimizer updated this rank's shard, StartGather queues the
//               all-gather of the flat buffer in buckets from offset 0 — the order the
//               next forward reads it (embedding, layers, final norm, LM head) — and
//               returns; WaitParams(end) blocks until [0, end) is gathered
//               (LlamaModel's ParamsNeeded), so the gather overlaps the next forward.
//
// Every bucket [b, e) is cut at the DP ranks' shard boundaries and sent with those
// counts, so each element is summed by the same ring in the same order as one
// reduce-scatter of the whole buffer (bit-identical), and the gather copies exactly the
// values one whole all-gather would.
//
// Sparse rows: the embedding's gradient is a scatter of the step's tokens, so of its
// V rows only those some rank's batch used are non-zero, on every rank (the rest are
// the zeros ZeroGrad wrote). SetSparseRows names them for the step; the reduce-scatter
// of that prefix then sends only those rows, packed in offset order and cut at the same
// shard boundaries, so every element sent is summed by the same ring in the same order,
// and every element not sent is 0 + 0: bit-identical to the whole reduce-scatter, at a
// fraction of the bytes (for the 60 M-class model 2 × 1024 tokens touch at most 2048 of
// 32000 rows of the 16 M-float embedding).
//
// The DP communicator belongs to the thread from BeginReduce or StartGather until
// FinishReduce or WaitParams(total) returned (the caller must not use it then). The
// methods are for one caller thread. Errors are sticky: the first collective's error
// is returned by FinishReduce and WaitParams from then on.
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

class ZeroComm {
 public:
  // shard_counts: every DP rank's ZeRO-1 shard size, in rank order (they sum to the
  // buffer's length). bucket_floats: the size at which a bucket is sent.
  ZeroComm(Communicator* dp, std::vector<int64_t> shard_counts, int64_t bucket_floats);
  ~ZeroComm();

  // A step's reduction of `grads` starts; nothing of it is complete yet.
  void BeginReduce(float* grads);
  // For this step (until the next BeginReduce): of grads[begin, end), rows of
  // row_floats floats from begin, only `rows` (ascending, unique) may be non-zero on
  // any rank. Call between BeginReduce and the GradsReady that reaches end.
  void SetSparseRows(int64_t begin, int64_t end, int64_t row_floats, std::vector<int64_t> rows);
  // grads[begin, total) are complete (begin only decreases within a step).
  void GradsReady(int64_t begin);
  // Sends what is left, waits for every queued bucket; the first collective's error.
  Status FinishReduce();

  // This rank's shard of params is up to date; the rest is gathered in the background.
  void StartGather(float* params);
  // Waits until params[0, end) hold every rank's values (at once when no gather runs).
  Status WaitParams(int64_t end);
  int64_t total() const { return offsets_.back(); }

  // Seconds the caller has waited (FinishReduce, WaitParams), and the thread spent
  // inside collectives, since creation.
  double wait_seconds() const { return wait_s_; }
  double comm_seconds() const;

 private:
  struct Job {
    bool gather;
    int64_t begin, end;
  };
  void Enqueue(Job job);  // with mu_ held
  void Loop();
  std::vector<int64_t> Counts(int64_t begin, int64_t end) const;
  Status Reduce(int64_t begin, int64_t end);        // on the thread
  Status ReduceSparse(int64_t begin, int64_t end);  // [begin, end) inside the sparse rows

  Communicator* dp_;
  std::vector<int64_t> offsets_;  // shard boundaries: rank r owns [offsets_[r], offsets_[r+1])
  int64_t bucket_;
  float* grads_ = nullptr;
  float* params_ = nullptr;
  int64_t sent_ = 0;  // [sent_, total) of the gradients is queued or reduced
  // The step's sparse rows (SetSparseRows); read by the thread only while a job runs.
  int64_t sparse_begin_ = 0, sparse_end_ = 0, row_floats_ = 1;
  std::vector<int64_t> sparse_rows_;
  std::vector<float> pack_;  // the thread's: the sparse rows packed
  double wait_s_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  int64_t gathered_ = 0;  // params[0, gathered_) are complete
  bool busy_ = false, stop_ = false;
  Status error_;
  double comm_s_ = 0;
  std::thread thread_;
};

}  // namespace lote::engine
