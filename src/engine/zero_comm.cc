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
  sparse_ = Rows();
}

void ZeroComm::SetSparseRows(int64_t begin, int64_t end, int64_t row_floats,
                             std::vector<int64_t> rows) {
  std::lock_guard<std::mutex> lock(mu_);
  sparse_.begin = std::clamp<int64_t>(begin, 0, total());
  sparse_.end = std::clamp<int64_t>(end, sparse_.begin, total());
  sparse_.row_floats = std::max<int64_t>(1, row_floats);
  sparse_.rows = std::move(rows);
}

void ZeroComm::Enqueue(Job job) {
  if (job.begin >= job.end) return;
  queue_.push_back(job);
  if (job.kind == Kind::kReduce) {
    sent_ = job.begin;
  } else {
    ++gathers_;
  }
  cv_.notify_all();
}

void ZeroComm::GradsReady(int64_t begin) {
  std::lock_guard<std::mutex> lock(mu_);
  if (sent_ - begin >= bucket_) Enqueue({Kind::kReduce, begin, sent_});
}

Status ZeroComm::FinishReduce() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  Enqueue({Kind::kReduce, 0, sent_});
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  wait_s_ += Since(t0);
  return error_;
}

void ZeroComm::StartGather(float* params, int64_t rows_end, int64_t row_floats,
                           std::vector<int64_t> first_rows) {
  std::lock_guard<std::mutex> lock(mu_);
  params_ = params;
  first_ = Rows();
  first_.end = std::clamp<int64_t>(rows_end, 0, total());
  first_.row_floats = std::max<int64_t>(1, row_floats);
  first_.rows = std::move(first_rows);
  auto buckets = [this](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; b += bucket_) {
      Enqueue({Kind::kGather, b, std::min(end, b + bucket_)});
    }
  };
  // The first rows (gathered_ then jumps over their prefix), the buffer after the
  // prefix, and the prefix whole last.
  gathered_ = 0;
  Enqueue({Kind::kGatherRows, 0, first_.end});
  buckets(first_.end, total());
  buckets(0, first_.end);
}

Status ZeroComm::WaitParams(int64_t end) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [&] { return !error_.ok() || gathers_ == 0 || (end < total() && gathered_ >= end); };
  if (done()) return error_;
  const auto t0 = std::chrono::steady_clock::now();
  cv_.wait(lock, done);
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
  const int64_t sb = std::clamp(sparse_.begin, begin, end),
                se = std::clamp(sparse_.end, begin, end);
  if (se < end) RETURN_IF_ERROR(dp_->ReduceScatter(grads_ + se, Counts(se, end)));
  if (sb < se) RETURN_IF_ERROR(ReduceSparse(sb, se));
  if (begin < sb) RETURN_IF_ERROR(dp_->ReduceScatter(grads_ + begin, Counts(begin, sb)));
  return Status::Ok();
}

std::vector<ZeroComm::Segment> ZeroComm::Segments(const Rows& rows, int64_t begin, int64_t end,
                                                  std::vector<int64_t>* counts) const {
  std::vector<Segment> segments;
  counts->assign(offsets_.size() - 1, 0);
  for (int64_t row : rows.rows) {
    int64_t b = std::max(begin, rows.begin + row * rows.row_floats);
    const int64_t e = std::min(end, rows.begin + (row + 1) * rows.row_floats);
    while (b < e) {
      const size_t owner =
          static_cast<size_t>(std::upper_bound(offsets_.begin(), offsets_.end(), b) -
                              offsets_.begin()) -
          1;
      const int64_t cut = std::min(e, offsets_[owner + 1]);
      segments.push_back({b, cut - b, owner});
      (*counts)[owner] += cut - b;
      b = cut;
    }
  }
  return segments;
}

Status ZeroComm::ReduceSparse(int64_t begin, int64_t end) {
  std::vector<int64_t> counts;
  const std::vector<Segment> segments = Segments(sparse_, begin, end, &counts);
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

// Every rank packs its own segments of the first rows; one all-gather of the packs;
// every segment unpacked into place.
Status ZeroComm::GatherRows() {
  std::vector<int64_t> counts;
  const std::vector<Segment> segments = Segments(first_, first_.begin, first_.end, &counts);
  pack_.resize(static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0})));
  if (pack_.empty()) return Status::Ok();  // every rank lists the same rows
  const size_t me = static_cast<size_t>(dp_->rank());
  int64_t at = 0;
  for (const Segment& g : segments) {
    if (g.owner == me) std::copy(params_ + g.at, params_ + g.at + g.n, pack_.begin() + at);
    at += g.n;
  }
  RETURN_IF_ERROR(dp_->AllGather(pack_.data(), counts));
  at = 0;
  for (const Segment& g : segments) {
    if (g.owner != me) std::copy(pack_.begin() + at, pack_.begin() + at + g.n, params_ + g.at);
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
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    Status s = Status::Ok();
    if (!failed) {
      switch (job.kind) {
        case Kind::kReduce:
          s = Reduce(job.begin, job.end);
          break;
        case Kind::kGather:
          s = dp_->AllGather(params_ + job.begin, Counts(job.begin, job.end));
          break;
        case Kind::kGatherRows:
          s = GatherRows();
          break;
      }
    }
    const double dt = Since(t0);
    lock.lock();
    comm_s_ += dt;
    if (error_.ok() && !s.ok()) error_ = s;
    if (job.kind != Kind::kReduce) {
      // The first rows, then the buckets after their prefix, advance the mark; the
      // prefix's own buckets come last and only end the gather.
      if (job.kind == Kind::kGatherRows || job.begin == gathered_) gathered_ = job.end;
      --gathers_;
    }
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace lote::engine
