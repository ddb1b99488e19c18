#include "engine/zero_comm.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

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
    const std::vector<int64_t> counts = Counts(job.begin, job.end);
    Status s = Status::Ok();
    if (!failed) {
      s = job.gather ? dp_->AllGather(data + job.begin, counts)
                     : dp_->ReduceScatter(data + job.begin, counts);
    }
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
