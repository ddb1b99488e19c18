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
//               With first rows named (the embedding rows the next step's tokens
//               read), those rows go first, packed, and the rest of their prefix
//               last, so the first forward waits for a few rows instead of the
//               whole embedding.
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
  // first_rows: rows of row_floats floats of the prefix [0, rows_end) (ascending,
  // unique) that are sent before everything else; the rest of the prefix is sent
  // last. Without them the buffer is sent from offset 0.
  void StartGather(float* params, int64_t rows_end = 0, int64_t row_floats = 1,
                   std::vector<int64_t> first_rows = {});
  // Waits until params[0, end) hold every rank's values (at once when no gather runs),
  // except that for end < total() only the first rows of the prefix are waited for
  // (the caller reads no other row of it before it asks for total()).
  Status WaitParams(int64_t end);
  int64_t total() const { return offsets_.back(); }

  // Seconds the caller has waited (FinishReduce, WaitParams), and the thread spent
  // inside collectives, since creation.
  double wait_seconds() const { return wait_s_; }
  double comm_seconds() const;

 private:
  enum class Kind { kReduce, kGather, kGatherRows };
  struct Job {
    Kind kind;
    int64_t begin, end;
  };
  // Listed rows clipped to [begin, end) and cut at the shard boundaries, in offset
  // order (so each rank's part of a pack is contiguous), and each rank's count.
  struct Segment {
    int64_t at, n;
    size_t owner;
  };
  struct Rows {
    int64_t begin = 0, end = 0, row_floats = 1;
    std::vector<int64_t> rows;
  };
  std::vector<Segment> Segments(const Rows& rows, int64_t begin, int64_t end,
                                std::vector<int64_t>* counts) const;
  void Enqueue(Job job);  // with mu_ held
  void Loop();
  std::vector<int64_t> Counts(int64_t begin, int64_t end) const;
  Status Reduce(int64_t begin, int64_t end);        // on the thread
  Status ReduceSparse(int64_t begin, int64_t end);  // [begin, end) inside the sparse rows
  Status GatherRows();                              // the first rows of the gather

  Communicator* dp_;
  std::vector<int64_t> offsets_;  // shard boundaries: rank r owns [offsets_[r], offsets_[r+1])
  int64_t bucket_;
  float* grads_ = nullptr;
  float* params_ = nullptr;
  int64_t sent_ = 0;  // [sent_, total) of the gradients is queued or reduced
  // The step's sparse rows (SetSparseRows) and the gather's first rows (StartGather);
  // read by the thread only while a job of theirs runs.
  Rows sparse_, first_;
  std::vector<float> pack_;  // the thread's: the sparse rows packed
  double wait_s_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  // params[0, gathered_) are complete, but for the rest of the first rows' prefix
  // while gathers_ > 0 (gather jobs queued or running).
  int64_t gathered_ = 0;
  int gathers_ = 0;
  bool busy_ = false, stop_ = false;
  Status error_;
  double comm_s_ = 0;
  std::thread thread_;
};

}  // namespace lote::engine
