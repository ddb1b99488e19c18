#include "engine/zero_comm.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace lote::engine {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ZeroComm::ZeroComm(Communicator* dp, std::vector<int64_t> shard_counts, int64_t bucket_floats)
    : dp_(dp), bucket_(std::max<int64_t>(1, bucket_floats)) {
  offsets_.push_back(0);
  for (int64_t c : shard_counts) offsets_.push_back(offsets_.back() + c);
  sent_ = offsets_.back();
  gathered_ = offsets_.back();
  thread_ = std::thread([this] { Loop(); });
}

ZeroComm::~ZeroComm() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void ZeroComm::BeginReduce(float* grads) {
  std::lock_guard<std::mutex> lock(mu_);
  grads_ = grads;
  sent_ = offsets_.back();
  sparse_begin_ = sparse_end_ = 0;
  sparse_rows_.clear();
}

void ZeroComm::SetSparseRows(int64_t begin, int64_t end, int64_t row_floats,
                             std::vector<int64_t> rows) {
  std::lock_guard<std::mutex> lock(mu_);
  sparse_begin_ = std::clamp<int64_t>(begin, 0, total());
  sparse_end_ = std::clamp<int64_t>(end, sparse_begin_, total());
  row_floats_ = std::max<int64_t>(1, row_floats);
  sparse_rows_ = std::move(rows);
}

void ZeroComm::Enqueue(Job job) {
  if (job.begin >= job.end) return;
  queue_.push_back(job);
  if (!job.gather) sent_ = job.begin;
  cv_.notify_all();
}

void ZeroComm::GradsReady(int64_t begin) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sent_ - begin >= bucket_) Enqueue({false, begin, sent_});
}

Status ZeroComm::FinishReduce() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  Enqueue({false, 0, sent_});
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  wait_s_ += Since(t0);
  return error_;
}

void ZeroComm::StartGather(float* params) {
  std::lock_guard<std::mutex> lock(mu_);
  params_ = params;
  gathered_ = 0;
  for (int64_t b = 0; b < total(); b += bucket_) {
    Enqueue({true, b, std::min(total(), b + bucket_)});
  }
}

Status ZeroComm::WaitParams(int64_t end) {
  std::unique_lock<std::mutex> lock(mu_);
  if (gathered_ >= end || !error_.ok()) return error_;
  const auto t0 = std::chrono::steady_clock::now();
  cv_.wait(lock, [&] { return gathered_ >= end || !error_.ok(); });
  wait_s_ += Since(t0);
  return error_;
}

double ZeroComm::comm_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_s_;
}

// The counts of [begin, end) cut at the shard boundaries.
std::vector<int64_t> ZeroComm::Counts(int64_t begin, int64_t end) const {
  std::vector<int64_t> counts;
  for (size_t r = 0; r + 1 < offsets_.size(); ++r) {
    const int64_t b = std::max(begin, offsets_[r]), e = std::min(end, offsets_[r + 1]);
    counts.push_back(std::max<int64_t>(0, e - b));
  }
  return counts;
}

// [begin, end) of the gradients: the sparse rows' part packed, the rest whole.
Status ZeroComm::Reduce(int64_t begin, int64_t end) {
  const int64_t sb = std::clamp(sparse_begin_, begin, end),
                se = std::clamp(sparse_end_, begin, end);
  if (se < end) RETURN_IF_ERROR(dp_->ReduceScatter(grads_ + se, Counts(se, end)));
  if (sb < se) RETURN_IF_ERROR(ReduceSparse(sb, se));
  if (begin < sb) RETURN_IF_ERROR(dp_->ReduceScatter(grads_ + begin, Counts(begin, sb)));
  return Status::Ok();
}

Status ZeroComm::ReduceSparse(int64_t begin, int64_t end) {
  // Each listed row clipped to [begin, end), then cut at the shard boundaries: the
  // segments in offset order, so each rank's part of the pack is contiguous.
  struct Segment {
    int64_t at, n;
    size_t owner;
  };
  std::vector<Segment> segments;
  std::vector<int64_t> counts(offsets_.size() - 1, 0);
  for (int64_t row : sparse_rows_) {
    int64_t b = std::max(begin, sparse_begin_ + row * row_floats_);
    const int64_t e = std::min(end, sparse_begin_ + (row + 1) * row_floats_);
    while (b < e) {
      const size_t owner =
          static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), b) -
                              offsets_.begin()) -
          1;
      const int64_t cut = std::min(e, offsets_[owner + 1]);
      segments.push_back({b, cut - b, owner});
      counts[owner] += cut - b;
      b = cut;
    }
  }
  pack_.resize(static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0})));
  int64_t at = 0;
  for (const Segment& g : segments) {
    std::copy(grads_ + g.at, grads_ + g.at + g.n, pack_.begin() + at);
    at += g.n;
  }
  RETURN_IF_ERROR(dp_->ReduceScatter(pack_.data(), counts));
  at = 0;
  const size_t me = static_cast<size_t>(dp_->rank());
  for (const Segment& g : segments) {
    if (g.owner == me) std::copy(pack_.begin() + at, pack_.begin() + at + g.n, grads_ + g.at);
    at += g.n;
  }
  return Status::Ok();
}

void ZeroComm::Loop() {
  // The ring's additions run on this thread alone, beside the training threads (a new
  // thread would otherwise start an OpenMP team of the default size).
  omp_set_num_threads(1);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const Job job = queue_.front();
    queue_.pop_front();
    busy_ = true;
    const bool failed = !error_.ok();
    float* data = job.gather ? params_ : grads_;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int64_t> counts =
        job.gather ? Counts(job.begin, job.end) : std::vector<int64_t>();
    Status s = Status::Ok();
    if (!failed)
      s = job.gather ? dp_->AllGather(data + job.begin, counts) : Reduce(job.begin, job.end);
    const double dt = Since(t0);
    lock.lock();
    comm_s_ += dt;
    if (error_.ok() && !s.ok()) error_ = s;
    if (job.gather) gathered_ = job.end;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace lote::engine
