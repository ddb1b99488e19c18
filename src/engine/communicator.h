// Communicator: the narrow set of collectives the engine needs (all-reduce,
// reduce-scatter, all-gather, broadcast, barrier) over a fixed group of ranks, so the
// training loop never names a transport. Implementations: SingleProcessCommunicator
// (a group of one: every call is a no-op) and Gloo over TCP (gloo_communicator.h);
// NCCL can serve a CUDA backend behind the same calls later.
//
// Contract: every rank of the group makes the same calls in the same order with the
// same sizes. Calls block until the group has finished. Errors are sticky: once a
// collective fails (a peer died, a timeout) every later call returns the same error
// at once, so a training step can run to its end and check status() once.
// Not thread-safe: one caller at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"

namespace lote::engine {

enum class ReduceOp { kSum, kMax };

// What every transport's group needs: the group's name, this member's place in it and
// how long to wait. Each transport's options extend it with its own.
struct GroupOptions {
  std::string prefix;  // unique per group, the same on all its members
  int rank = 0;        // within the group
  int size = 1;
  std::chrono::milliseconds rendezvous_timeout = std::chrono::minutes(15);
  std::chrono::milliseconds op_timeout = std::chrono::minutes(30);
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // In place: data[n] becomes the element-wise reduction over the group. Every rank
  // ends with bitwise identical values.
  virtual Status AllReduce(float* data, int64_t n, ReduceOp op) = 0;
  virtual Status AllReduce(double* data, int64_t n, ReduceOp op) = 0;
  // data holds sum(counts) floats, rank i's chunk at offset counts[0] + ... + counts[i-1].
  // On return this rank's chunk holds the sum over the group of that chunk; the other
  // chunks are scratch (their contents are unspecified).
  virtual Status ReduceScatter(float* data, const std::vector<int64_t>& counts) = 0;
  // data as for ReduceScatter: each rank's own chunk goes in; on return every chunk
  // holds its owner's values on every rank.
  virtual Status AllGather(float* data, const std::vector<int64_t>& counts) = 0;
  virtual Status Broadcast(float* data, int64_t n, int root) = 0;
  virtual Status Barrier() = 0;

  // OK, or the first collective's failure.
  virtual Status status() const = 0;
  // Wall seconds spent inside collectives since creation (the communication share).
  double seconds_in_collectives() const { return seconds_; }

 protected:
  double seconds_ = 0.0;
};

// A group of one rank: all-reduce and friends leave data unchanged.
std::unique_ptr<Communicator> MakeSingleProcessCommunicator();

// [begin, end) of chunk `index` when `total` elements are split over `parts` as evenly
// as possible (the first total % parts chunks get one more). Used for every shard:
// vocabulary and MLP rows across tensor-parallel ranks, ZeRO-1 shards across
// data-parallel ranks.
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range EvenSplit(int64_t total, int64_t parts, int64_t index);
std::vector<int64_t> EvenCounts(int64_t total, int64_t parts);

}  // namespace lote::engine
