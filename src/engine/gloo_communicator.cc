#include "engine/gloo_communicator.h"

#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <vector>

namespace lote::engine {
namespace {

using SteadyClock = std::chrono::steady_clock;

// gloo::rendezvous::Store over lote's StoreClient. Gloo expects exceptions from a
// store; they are caught where the group is made.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(StoreClient* client, std::chrono::milliseconds timeout)
      : client_(client), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status s = client_->Set(key, std::string(data.begin(), data.end()));
    if (!s.ok()) throw std::runtime_error(s.message());
  }
  std::vector<char> get(const std::string& key) override {
    Result<std::string> v = client_->Get(key, timeout_);
    if (!v.ok()) throw std::runtime_error(Describe(v.status(), key));
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    for (const auto& k : keys) {
      Result<std::string> v = client_->Get(k, timeout_);
      if (!v.ok()) throw std::runtime_error(Describe(v.status(), k));
    }
  }

 private:
  std::string Describe(const Status& s, const std::string& key) const {
    if (!s.IsNotFound()) return s.message();
    return fmt::format(
        "timed out after {} s waiting for \"{}\" in the rendezvous store at {} "
        "(a rank of the job did not start or died)",
        std::chrono::duration_cast<std::chrono::seconds>(timeout_).count(), key,
        client_->address());
  }
  StoreClient* client_;
  std::chrono::milliseconds timeout_;
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::Context> ctx, std::string name,
                   std::chrono::milliseconds timeout)
      : ctx_(std::move(ctx)), name_(std::move(name)), timeout_(timeout) {}

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  Status status() const override { return error_; }

  Status AllReduce(float* data, int64_t n, ReduceOp op) override {
    return Run("all-reduce", [&] { DoAllReduce(data, n, op); });
  }
  Status AllReduce(double* data, int64_t n, ReduceOp op) override {
    return Run("all-reduce", [&] { DoAllReduce(data, n, op); });
  }
  Status ReduceScatter(float* data, const std::vector<int64_t>& counts) override {
    return Run("reduce-scatter", [&] { Ring(data, counts, /*reduce=*/true); });
  }
  Status AllGather(float* data, const std::vector<int64_t>& counts) override {
    return Run("all-gather", [&] { Ring(data, counts, /*reduce=*/false); });
  }
  Status Broadcast(float* data, int64_t n, int root) override {
    return Run("broadcast", [&] {
      gloo::BroadcastOptions opts(ctx_);
      opts.setOutput(data, static_cast<size_t>(n));
      opts.setRoot(root);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    });
  }
  Status Barrier() override {
    return Run("barrier", [&] {
      gloo::BarrierOptions opts(ctx_);
      opts.setTag(NextTag());
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
    });
  }

 private:
  template <typename Fn>
  Status Run(const char* what, Fn&& fn) {
    if (!error_.ok()) return error_;
    if (ctx_->size == 1) return Status::Ok();
    const auto t0 = SteadyClock::now();
    try {
      fn();
    } catch (const std::exception& e) {
      error_ = Status::Unavailable(fmt::format("{} of the {} group (rank {} of {}) failed: {}",
                                               what, name_, ctx_->rank, ctx_->size, e.what()));
    }
    seconds_ += std::chrono::duration<double>(SteadyClock::now() - t0).count();
    return error_;
  }

  uint32_t NextTag() { return tag_++; }

  template <typename T>
  void DoAllReduce(T* data, int64_t n, ReduceOp op) {
    if (n == 0) return;
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(data, static_cast<size_t>(n));
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    if (op == ReduceOp::kSum) {
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>));
    } else {
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<T>));
    }
    opts.setTag(NextTag());
    opts.setTimeout(timeout_);
    gloo::allreduce(opts);
  }

  // Ring reduce-scatter (reduce=true) or all-gather (reduce=false) over chunks of
  // uneven sizes: size-1 steps, each sending one chunk to the right neighbour while
  // receiving one from the left. Reduce-scatter leaves chunk r complete on rank r;
  // all-gather starts from it.
  void Ring(float* data, const std::vector<int64_t>& counts, bool reduce) {
    const int n = ctx_->size, r = ctx_->rank;
    if (static_cast<int>(counts.size()) != n) {
      throw std::runtime_error(fmt::format("{} counts for a group of {}", counts.size(), n));
    }
    std::vector<int64_t> offsets(static_cast<size_t>(n) + 1, 0);
    for (int i = 0; i < n; ++i) offsets[i + 1] = offsets[i] + counts[static_cast<size_t>(i)];
    const int64_t max_count = *std::max_element(counts.begin(), counts.end());
    if (reduce && static_cast<int64_t>(scratch_.size()) < max_count) {
      scratch_.resize(static_cast<size_t>(max_count));
    }
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const uint64_t slot = ctx_->nextSlot();
    auto buf = ctx_->createUnboundBuffer(data, sizeof(float) * static_cast<size_t>(offsets[n]));
    auto tmp = reduce ? ctx_->createUnboundBuffer(scratch_.data(), sizeof(float) * scratch_.size())
                      : nullptr;
    auto mod = [n](int x) { return ((x % n) + n) % n; };
    for (int s = 0; s < n - 1; ++s) {
      // Reduce-scatter sends chunk r-s-1 and receives r-s-2; all-gather sends r-s and
      // receives r-s-1.
      const int send_chunk = reduce ? mod(r - s - 1) : mod(r - s);
      const int recv_chunk = reduce ? mod(r - s - 2) : mod(r - s - 1);
      const int64_t sc = counts[static_cast<size_t>(send_chunk)];
      const int64_t rc = counts[static_cast<size_t>(recv_chunk)];
      if (sc > 0) {
        buf->send(right, slot, sizeof(float) * static_cast<size_t>(offsets[send_chunk]),
                  sizeof(float) * static_cast<size_t>(sc));
      }
      if (rc > 0) {
        if (reduce) {
          tmp->recv(left, slot, 0, sizeof(float) * static_cast<size_t>(rc));
        } else {
          buf->recv(left, slot, sizeof(float) * static_cast<size_t>(offsets[recv_chunk]),
                    sizeof(float) * static_cast<size_t>(rc));
        }
      }
      if (rc > 0) {
        if (reduce) {
          if (!tmp->waitRecv(timeout_)) throw std::runtime_error("receive timed out");
          float* dst = data + offsets[recv_chunk];
          const float* src = scratch_.data();
#pragma omp parallel for schedule(static) if (rc > 65536)
          for (int64_t i = 0; i < rc; ++i) dst[i] += src[i];
        } else if (!buf->waitRecv(timeout_)) {
          throw std::runtime_error("receive timed out");
        }
      }
      if (sc > 0 && !buf->waitSend(timeout_)) throw std::runtime_error("send timed out");
    }
  }

  std::shared_ptr<gloo::Context> ctx_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  Status error_;
  uint32_t tag_ = 0;
  std::vector<float> scratch_;
};

}  // namespace

Result<std::unique_ptr<Communicator>> MakeGlooCommunicator(StoreClient* store,
                                                           const GlooGroupOptions& o) {
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.bind_address;
    attr.ai_family = AF_INET;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    ctx->setTimeout(o.rendezvous_timeout);
    GlooStoreAdapter adapter(store, o.rendezvous_timeout);
    gloo::rendezvous::PrefixStore prefixed(o.prefix, adapter);
    ctx->connectFullMesh(prefixed, device);
    ctx->setTimeout(o.op_timeout);
    return std::unique_ptr<Communicator>(
        new GlooCommunicator(std::move(ctx), o.prefix, o.op_timeout));
  } catch (const std::exception& e) {
    return Status::Unavailable(
        fmt::format("cannot connect the {} group (rank {} of {}) from {}: {}", o.prefix, o.rank,
                    o.size, o.bind_address, e.what()));
  }
}

}  // namespace lote::engine
