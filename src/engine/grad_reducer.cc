#include "engine/grad_reducer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

namespace lote::engine {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

GradReducer::GradReducer(Communicator* dp, std::vector<int64_t> shard_counts, int64_t bucket_floats)
    : dp_(dp), bucket_(std::max<int64_t>(1, bucket_floats)) {
  offsets_.push_back(0);
  for (int64_t c : shard_counts) offsets_.push_back(offsets_.back() + c);
  sent_ = offsets_.back();
  thread_ = std::thread([this] { Loop(); });
}

GradReducer::~GradReducer() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void GradReducer::Begin(float* grads) {
  std::lock_guard<std::mutex> lock(mu_);
  grads_ = grads;
  sent_ = offsets_.back();
}

void GradReducer::Enqueue(int64_t begin, int64_t end) {
  if (begin >= end) return;
  queue_.emplace_back(begin, end);
  sent_ = begin;
  cv_.notify_all();
}

void GradReducer::Ready(int64_t begin) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sent_ - begin >= bucket_) Enqueue(begin, sent_);
}

Status GradReducer::Finish() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  Enqueue(0, sent_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  wait_s_ += Since(t0);
  return error_;
}

double GradReducer::comm_seconds() const {
  std::lock_guard<std::mutex> lock(mu_);
  return comm_s_;
}

// The counts of [begin, end) cut at the shard boundaries, then one reduce-scatter.
Status GradReducer::Reduce(int64_t begin, int64_t end) {
  std::vector<int64_t> counts;
  for (size_t r = 0; r + 1 < offsets_.size(); ++r) {
    const int64_t b = std::max(begin, offsets_[r]), e = std::min(end, offsets_[r + 1]);
    counts.push_back(std::max<int64_t>(0, e - b));
  }
  return dp_->ReduceScatter(grads_ + begin, counts);
}

void GradReducer::Loop() {
  // The ring's additions run on this thread alone, beside the training threads (a new
  // thread would otherwise start an OpenMP team of the default size).
  omp_set_num_threads(1);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    const auto [begin, end] = queue_.front();
    queue_.pop_front();
    busy_ = true;
    const bool failed = !error_.ok();
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    Status s = failed ? Status::Ok() : Reduce(begin, end);
    const double dt = Since(t0);
    lock.lock();
    comm_s_ += dt;
    if (error_.ok() && !s.ok()) error_ = s;
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace lote::engine
