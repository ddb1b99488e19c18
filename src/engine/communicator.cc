#include "engine/communicator.h"

#include <algorithm>

namespace lote::engine {
namespace {

class SingleProcessCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllReduce(float*, int64_t, ReduceOp) override { return Status::Ok(); }
  Status AllReduce(double*, int64_t, ReduceOp) override { return Status::Ok(); }
  Status ReduceScatter(float*, const std::vector<int64_t>&) override { return Status::Ok(); }
  Status AllGather(float*, const std::vector<int64_t>&) override { return Status::Ok(); }
  Status Broadcast(float*, int64_t, int) override { return Status::Ok(); }
  Status Barrier() override { return Status::Ok(); }
  Status status() const override { return Status::Ok(); }
};

}  // namespace

std::unique_ptr<Communicator> MakeSingleProcessCommunicator() {
  return std::make_unique<SingleProcessCommunicator>();
}

Range EvenSplit(int64_t total, int64_t parts, int64_t index) {
  const int64_t base = total / parts, extra = total % parts;
  Range r;
  r.begin = index * base + std::min(index, extra);
  r.end = r.begin + base + (index < extra ? 1 : 0);
  return r;
}

std::vector<int64_t> EvenCounts(int64_t total, int64_t parts) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < parts; ++i) out.push_back(EvenSplit(total, parts, i).size());
  return out;
}

}  // namespace lote::engine
