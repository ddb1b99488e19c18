#include "engine/shm_communicator.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace lote::engine {
namespace {

using SteadyClock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x6c6f74652d73686dULL;  // "lote-shm"
constexpr uint32_t kVersion = 1;
constexpr int64_t kMaxSegmentBytes = int64_t{64} << 20;
constexpr int64_t kPage = 4096;

// One rank's line of the segment's header (its own cache line: no false sharing).
struct alignas(64) RankLine {
  std::atomic<uint64_t> phase;  // the last phase this rank arrived at
  std::atomic<uint32_t> left;   // 1 once its communicator is closed
  std::atomic<int32_t> pid;     // its process, set when it attached
};

struct Header {
  uint64_t magic;
  uint32_t version;
  int32_t ranks;
  int64_t slot_bytes;
  int64_t segment_bytes;
  alignas(64) std::atomic<uint32_t> bell;  // futex word: bumped by every arrival
  std::atomic<uint32_t> sleepers;          // ranks in (or entering) a futex wait on bell
};

static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the segment's atomics must be address-free across processes");

int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

int64_t RanksOffset() { return RoundUp(sizeof(Header), 64); }
int64_t DataOffset(int ranks) {
  return RoundUp(RanksOffset() + static_cast<int64_t>(sizeof(RankLine)) * ranks, kPage);
}

int64_t SlotBytesFor(int64_t wanted, int ranks) {
  const int64_t cap = (kMaxSegmentBytes - DataOffset(ranks)) / (2 * ranks);
  // At least a page, and a piece of every chunk of a double all-reduce (one per rank).
  const int64_t floor = std::max<int64_t>(kPage, RoundUp(ranks * 8, 64));
  return RoundUp(std::clamp(wanted, floor, std::max(floor, cap)), 64);
}

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  return ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A mapping of the group's segment, and descriptors of the peers' processes.
class Segment {
 public:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment() {
    for (int fd : pidfds_) {
      if (fd >= 0) ::close(fd);
    }
    if (base_ != nullptr) ::munmap(base_, static_cast<size_t>(bytes_));
  }

  // Rank 0: a new segment for `ranks` ranks; *fd stays open (the peers open it
  // through /proc) until the caller closes it.
  static Result<std::unique_ptr<Segment>> Create(const std::string& name, int ranks,
                                                 int64_t slot_bytes, int* fd) {
    const int64_t bytes = DataOffset(ranks) + 2 * ranks * slot_bytes;
    *fd = ::memfd_create(("lote-" + name).c_str(), MFD_CLOEXEC);
    if (*fd < 0) return Status::Unavailable(fmt::format("memfd_create: {}", std::strerror(errno)));
    if (::ftruncate(*fd, bytes) != 0) {
      return Status::Unavailable(
          fmt::format("ftruncate of the segment to {} bytes: {}", bytes, std::strerror(errno)));
    }
    auto seg = std::make_unique<Segment>();
    RETURN_IF_ERROR(seg->Map(*fd, bytes));
    Header* h = seg->header();
    h->version = kVersion;
    h->ranks = ranks;
    h->slot_bytes = slot_bytes;
    h->segment_bytes = bytes;
    std::atomic_ref<uint64_t>(h->magic).store(kMagic, std::memory_order_release);
    return seg;
  }

  // Another rank: maps the segment rank 0 holds open as descriptor `fd` of `pid`.
  static Result<std::unique_ptr<Segment>> Attach(int pid, int fd, int64_t bytes, int ranks) {
    const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
    const int own = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (own < 0) return Status::Unavailable(fmt::format("open {}: {}", path, std::strerror(errno)));
    auto seg = std::make_unique<Segment>();
    Status s = seg->Map(own, bytes);
    ::close(own);
    RETURN_IF_ERROR(s);
    const Header* h = seg->header();
    if (std::atomic_ref<uint64_t>(seg->header()->magic).load(std::memory_order_acquire) != kMagic ||
        h->version != kVersion || h->ranks != ranks || h->segment_bytes != bytes) {
      return Status::Unavailable(fmt::format("{} is not this group's segment", path));
    }
    return seg;
  }

  Header* header() const { return static_cast<Header*>(base_); }
  RankLine& line(int rank) const {
    return reinterpret_cast<RankLine*>(static_cast<char*>(base_) + RanksOffset())[rank];
  }
  int ranks() const { return header()->ranks; }
  int64_t slot_bytes() const { return header()->slot_bytes; }
  // Rank k's slot in the buffer of phase p.
  char* slot(uint64_t phase, int k) const {
    const int64_t buffer = static_cast<int64_t>(phase % 2);
    return static_cast<char*>(base_) + DataOffset(ranks()) + (buffer * ranks() + k) * slot_bytes();
  }

  // Descriptors of the other ranks' processes (not this one's: ranks that are threads
  // of one process share it), so a wait can tell a dead peer from a slow one.
  void WatchPeers(int self) {
    pidfds_.assign(static_cast<size_t>(ranks()), -1);
    for (int k = 0; k < ranks(); ++k) {
      const int pid = line(k).pid.load(std::memory_order_acquire);
      if (k == self || pid == ::getpid() || pid <= 0) continue;
      pidfds_[static_cast<size_t>(k)] = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    }
  }
  // Whether rank k's process has exited (false when it cannot be told).
  bool ProcessExited(int k) const {
    const int fd = pidfds_.empty() ? -1 : pidfds_[static_cast<size_t>(k)];
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      return ::poll(&p, 1, 0) > 0;
    }
    const int pid = line(k).pid.load(std::memory_order_acquire);
    return pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
  }

 private:
  Status Map(int fd, int64_t bytes) {
    void* p =
        ::mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
      return Status::Unavailable(fmt::format("mmap of {} bytes: {}", bytes, std::strerror(errno)));
    }
    base_ = p;
    bytes_ = bytes;
    return Status::Ok();
  }

  void* base_ = nullptr;
  int64_t bytes_ = 0;
  std::vector<int> pidfds_;
};

// Element-wise reduction in Gloo's form: `own` is this rank's value, `acc` what came
// before it in the chain (sum: own + acc; max: std::max(own, acc)).
template <typename T>
inline T Combine(T own, T acc, ReduceOp op) {
  if (op == ReduceOp::kSum) return own + acc;
  return own < acc ? acc : own;
}

// out[i] = chain over srcs (srcs[0] first), then combined with out[i] (this rank's own
// value, always last in the chain).
template <typename T>
void ReduceChain(T* out, const std::vector<const T*>& srcs, int64_t n, ReduceOp op) {
  if (srcs.size() == 1) {
    const T* a = srcs[0];
    if (op == ReduceOp::kSum) {
      for (int64_t i = 0; i < n; ++i) out[i] = out[i] + a[i];
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = Combine(out[i], a[i], op);
    }
    return;
  }
  constexpr int64_t kBlock = 1024;
  T acc[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    std::memcpy(acc, srcs[0] + b, sizeof(T) * static_cast<size_t>(m));
    for (size_t k = 1; k < srcs.size(); ++k) {
      const T* a = srcs[k] + b;
      for (int64_t i = 0; i < m; ++i) acc[i] = Combine(a[i], acc[i], op);
    }
    for (int64_t i = 0; i < m; ++i) out[b + i] = Combine(out[b + i], acc[i], op);
  }
}

class ShmCommunicator final : public Communicator {
 public:
  ShmCommunicator(std::unique_ptr<Segment> seg, int rank, std::string name,
                  const ShmGroupOptions& o)
      : seg_(std::move(seg)),
        rank_(rank),
        size_(seg_->ranks()),
        name_(std::move(name)),
        timeout_(o.op_timeout),
        slice_(o.wait_slice),
        spin_checks_(std::max(0, o.spin_checks)) {}

  ~ShmCommunicator() override {
    seg_->line(rank_).left.store(1, std::memory_order_release);
    Ring();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status status() const override { return error_; }

  Status AllReduce(float* data, int64_t n, ReduceOp op) override {
    return Run("all-reduce", [&] { return DoAllReduce(data, n, op); });
  }
  Status AllReduce(double* data, int64_t n, ReduceOp op) override {
    return Run("all-reduce", [&] { return DoAllReduce(data, n, op); });
  }
  Status ReduceScatter(float* data, const std::vector<int64_t>& counts) override {
    return Run("reduce-scatter", [&] {
      RETURN_IF_ERROR(CheckCounts(counts));
      return Reduce(data, counts, /*step=*/1, ReduceOp::kSum, /*gather=*/false);
    });
  }
  Status AllGather(float* data, const std::vector<int64_t>& counts) override {
    return Run("all-gather", [&] {
      RETURN_IF_ERROR(CheckCounts(counts));
      return DoAllGather(data, counts);
    });
  }
  Status Broadcast(float* data, int64_t n, int root) override {
    return Run("broadcast", [&] { return DoBroadcast(data, n, root); });
  }
  Status Barrier() override {
    return Run("barrier", [&] { return Phase([](uint64_t) {}, [](uint64_t) {}); });
  }

 private:
  template <typename Fn>
  Status Run(const char* what, Fn&& fn) {
    if (!error_.ok()) return error_;
    if (size_ == 1) return Status::Ok();
    const auto t0 = SteadyClock::now();
    Status s = fn();
    if (!s.ok()) {
      error_ = Status::Unavailable(fmt::format("{} of the {} group (rank {} of {}) failed: {}",
                                               what, name_, rank_, size_, s.message()));
    }
    seconds_ += std::chrono::duration<double>(SteadyClock::now() - t0).count();
    return error_;
  }

  Status CheckCounts(const std::vector<int64_t>& counts) const {
    if (static_cast<int>(counts.size()) != size_) {
      return Status::InvalidArgument(
          fmt::format("{} counts for a group of {}", counts.size(), size_));
    }
    return Status::Ok();
  }

  // One phase: write this rank's part into its slot of the phase's buffer, arrive, wait
  // for every rank, read. The buffer of phase p is written again in phase p + 2, which
  // no rank starts before every rank arrived at p + 1, after its reads of phase p.
  template <typename Write, typename Read>
  Status Phase(Write&& write, Read&& read) {
    const uint64_t p = ++phase_;
    write(p);
    seg_->line(rank_).phase.store(p, std::memory_order_release);
    Ring();
    RETURN_IF_ERROR(WaitForAll(p));
    read(p);
    return Status::Ok();
  }

  void Ring() {
    Header* h = seg_->header();
    h->bell.fetch_add(1, std::memory_order_seq_cst);
    if (h->sleepers.load(std::memory_order_seq_cst) > 0)
      Futex(&h->bell, FUTEX_WAKE, INT_MAX, nullptr);
  }

  bool AllArrived(uint64_t p) const {
    for (int k = 0; k < size_; ++k) {
      if (seg_->line(k).phase.load(std::memory_order_acquire) < p) return false;
    }
    return true;
  }

  // Spins for spin_checks_, then sleeps on the bell in slices, looking between slices
  // for a peer that left or died and for the deadline.
  Status WaitForAll(uint64_t p) {
    for (int i = 0; i < spin_checks_; ++i) {
      if (AllArrived(p)) return Status::Ok();
      CpuRelax();
    }
    Header* h = seg_->header();
    const auto deadline = SteadyClock::now() + timeout_;
    const timespec slice{static_cast<time_t>(slice_.count() / 1000),
                         static_cast<long>(slice_.count() % 1000) * 1000000L};
    while (true) {
      const uint32_t bell = h->bell.load(std::memory_order_seq_cst);
      if (AllArrived(p)) return Status::Ok();
      RETURN_IF_ERROR(CheckPeers(p));
      if (SteadyClock::now() >= deadline) {
        return Status::DeadlineExceeded(fmt::format("timed out after {} s waiting for {}",
                                                    std::chrono::duration<double>(timeout_).count(),
                                                    Missing(p)));
      }
      h->sleepers.fetch_add(1, std::memory_order_seq_cst);
      Futex(&h->bell, FUTEX_WAIT, bell, &slice);
      h->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    }
  }

  Status CheckPeers(uint64_t p) const {
    for (int k = 0; k < size_; ++k) {
      if (k == rank_ || seg_->line(k).phase.load(std::memory_order_acquire) >= p) continue;
      if (seg_->line(k).left.load(std::memory_order_acquire) != 0) {
        return Status::Unavailable(
            fmt::format("rank {} left the group (its communicator closed)", k));
      }
      if (seg_->ProcessExited(k)) {
        return Status::Unavailable(fmt::format("rank {} (pid {}) exited", k,
                                               seg_->line(k).pid.load(std::memory_order_acquire)));
      }
    }
    return Status::Ok();
  }

  std::string Missing(uint64_t p) const {
    std::string out;
    for (int k = 0; k < size_; ++k) {
      if (seg_->line(k).phase.load(std::memory_order_acquire) >= p) continue;
      out += (out.empty() ? "rank " : ", ") + std::to_string(k);
    }
    return out.empty() ? "no rank" : out;
  }

  template <typename T>
  Status DoAllReduce(T* data, int64_t n, ReduceOp op) {
    if (n == 0) return Status::Ok();
    return Reduce(data, GlooAllReduceChunks(n, sizeof(T), size_), /*step=*/-1, op,
                  /*gather=*/true);
  }

  // Chunk c of data (counts[c] elements, in rank order) is reduced by rank c in the
  // order c + step, c + 2·step, ... (mod size), its own value last; with `gather` every
  // rank then holds every reduced chunk. In rounds: each round moves a piece of up to
  // `q` elements of every chunk (phase 1: the pieces of the other ranks' chunks into
  // this rank's slot; reduce its own), then, with `gather`, the reduced pieces
  // (phase 2).
  template <typename T>
  Status Reduce(T* data, const std::vector<int64_t>& counts, int step, ReduceOp op, bool gather) {
    std::vector<int64_t> offsets(static_cast<size_t>(size_) + 1, 0);
    for (int k = 0; k < size_; ++k) offsets[k + 1] = offsets[k] + counts[static_cast<size_t>(k)];
    const int64_t most = *std::max_element(counts.begin(), counts.end());
    const int64_t q = seg_->slot_bytes() / static_cast<int64_t>(sizeof(T)) / size_;
    auto piece = [&](int k, int64_t round) {  // [begin, begin + n) of chunk k this round
      const int64_t at = round * q;
      return Range{offsets[k] + at, offsets[k] + std::clamp(counts[k] - at, int64_t{0}, q) + at};
    };
    std::vector<const T*> srcs(static_cast<size_t>(size_ - 1));
    for (int64_t round = 0; round * q < most; ++round) {
      auto write = [&](uint64_t p) {
        T* mine = reinterpret_cast<T*>(seg_->slot(p, rank_));
        for (int k = 0; k < size_; ++k) {
          const Range r = piece(k, round);
          if (k != rank_ && r.size() > 0) {
            std::memcpy(mine + k * q, data + r.begin, sizeof(T) * static_cast<size_t>(r.size()));
          }
        }
      };
      auto reduce = [&](uint64_t p) {
        const Range r = piece(rank_, round);
        if (r.size() == 0) return;
        for (int t = 1; t < size_; ++t) {
          const int k = ((rank_ + step * t) % size_ + size_) % size_;
          srcs[static_cast<size_t>(t - 1)] =
              reinterpret_cast<const T*>(seg_->slot(p, k)) + rank_ * q;
        }
        ReduceChain(data + r.begin, srcs, r.size(), op);
      };
      RETURN_IF_ERROR(Phase(write, reduce));
      if (gather) RETURN_IF_ERROR(Exchange(data, [&](int k) { return piece(k, round); }));
    }
    return Status::Ok();
  }

  // One phase in which every rank k publishes data[pieces(k)] and copies the others'.
  template <typename T, typename Pieces>
  Status Exchange(T* data, Pieces&& pieces) {
    auto write = [&](uint64_t p) {
      const Range r = pieces(rank_);
      if (r.size() > 0) {
        std::memcpy(seg_->slot(p, rank_), data + r.begin,
                    sizeof(T) * static_cast<size_t>(r.size()));
      }
    };
    auto read = [&](uint64_t p) {
      for (int k = 0; k < size_; ++k) {
        const Range r = pieces(k);
        if (k == rank_ || r.size() == 0) continue;
        std::memcpy(data + r.begin, seg_->slot(p, k), sizeof(T) * static_cast<size_t>(r.size()));
      }
    };
    return Phase(write, read);
  }

  Status DoAllGather(float* data, const std::vector<int64_t>& counts) {
    std::vector<int64_t> offsets(static_cast<size_t>(size_) + 1, 0);
    for (int k = 0; k < size_; ++k) offsets[k + 1] = offsets[k] + counts[static_cast<size_t>(k)];
    const int64_t most = *std::max_element(counts.begin(), counts.end());
    const int64_t q = seg_->slot_bytes() / static_cast<int64_t>(sizeof(float));
    for (int64_t at = 0; at < most; at += q) {
      RETURN_IF_ERROR(Exchange(data, [&](int k) {
        return Range{offsets[k] + at, offsets[k] + at + std::clamp(counts[k] - at, int64_t{0}, q)};
      }));
    }
    return Status::Ok();
  }

  // The root writes up to every slot of the buffer per round; the others copy.
  Status DoBroadcast(float* data, int64_t n, int root) {
    if (root < 0 || root >= size_) {
      return Status::InvalidArgument(fmt::format("root {} outside a group of {}", root, size_));
    }
    const int64_t q = seg_->slot_bytes() * size_ / static_cast<int64_t>(sizeof(float));
    for (int64_t at = 0; at < n; at += q) {
      const size_t bytes = sizeof(float) * static_cast<size_t>(std::min(q, n - at));
      RETURN_IF_ERROR(Phase(
          [&](uint64_t p) {
            if (rank_ == root) std::memcpy(seg_->slot(p, 0), data + at, bytes);
          },
          [&](uint64_t p) {
            if (rank_ != root) std::memcpy(data + at, seg_->slot(p, 0), bytes);
          }));
    }
    return Status::Ok();
  }

  std::unique_ptr<Segment> seg_;
  int rank_, size_;
  std::string name_;
  std::chrono::milliseconds timeout_, slice_;
  int spin_checks_;
  uint64_t phase_ = 0;
  Status error_;
};

// A key of the rendezvous, waited for up to `timeout`.
Result<std::string> GetKey(StoreClient* store, const std::string& key,
                           std::chrono::milliseconds timeout) {
  Result<std::string> v = store->Get(key, timeout);
  if (v.ok() || !v.status().IsNotFound()) return v;
  return Status::Unavailable(fmt::format(
      "timed out after {} s waiting for \"{}\" in the rendezvous store at {} (a rank of the job "
      "did not start or died)",
      std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), key, store->address()));
}

// prefix/0 .. prefix/size-1.
Result<std::vector<std::string>> GetAll(StoreClient* store, const std::string& prefix, int size,
                                        std::chrono::milliseconds timeout) {
  std::vector<std::string> out;
  for (int k = 0; k < size; ++k) {
    ASSIGN_OR_RETURN(std::string v, GetKey(store, fmt::format("{}/{}", prefix, k), timeout));
    out.push_back(std::move(v));
  }
  return out;
}

// A descriptor closed when it goes out of scope (one owner: not copyable).
struct Fd {
  Fd() = default;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int fd = -1;
};

// Rank 0's decision, to publish as <prefix>/shm/segment: "memfd <pid> <fd> <bytes>"
// with *seg the new segment and *memfd its descriptor, or "none: <why>" when the ranks
// are not on one host or the segment cannot be made.
Result<std::string> OfferSegment(StoreClient* store, const ShmGroupOptions& o,
                                 std::unique_ptr<Segment>* seg, Fd* memfd) {
  ASSIGN_OR_RETURN(std::vector<std::string> hosts,
                   GetAll(store, o.prefix + "/shm/host", o.size, o.rendezvous_timeout));
  if (std::count(hosts.begin(), hosts.end(), hosts[0]) != o.size) {
    return std::string("none: the ranks are not all on one host");
  }
  const int64_t slot = SlotBytesFor(o.slot_bytes, o.size);
  Result<std::unique_ptr<Segment>> made = Segment::Create(o.prefix, o.size, slot, &memfd->fd);
  if (!made.ok()) return "none: rank 0 cannot make a segment: " + made.status().message();
  *seg = std::move(*made);
  (*seg)->line(0).pid.store(::getpid(), std::memory_order_release);
  return fmt::format("memfd {} {} {}", ::getpid(), memfd->fd, (*seg)->header()->segment_bytes);
}

// Rank `rank`'s mapping of the segment rank 0 offered.
Result<std::unique_ptr<Segment>> AttachOffer(const std::string& offer, int rank, int ranks) {
  int pid = 0, fd = -1;
  int64_t bytes = 0;
  std::istringstream in(offer.substr(offer.find(' ') + 1));
  if (!(in >> pid >> fd >> bytes)) return Status::Internal("cannot read the offer " + offer);
  ASSIGN_OR_RETURN(std::unique_ptr<Segment> seg, Segment::Attach(pid, fd, bytes, ranks));
  seg->line(rank).pid.store(::getpid(), std::memory_order_release);
  return seg;
}

}  // namespace

std::string ShmHostIdentity() {
  std::string boot = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  if (boot.empty()) {
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    boot = host;
  }
  char ns[128] = {};
  const ssize_t len = ::readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
  return fmt::format("{} {}", boot, len > 0 ? std::string(ns, static_cast<size_t>(len)) : "?");
}

std::vector<int64_t> GlooAllReduceChunks(int64_t n, int64_t element_size, int ranks) {
  if (n == 0) return std::vector<int64_t>(static_cast<size_t>(ranks), 0);
  // gloo::allreduce (RING, libgloo 2022-05): as many segments of at most 1 MiB as it
  // takes, at least two per rank and the same number on every rank, each of
  // ceil(bytes / segments) rounded up to whole elements; rank c reduces the c-th run.
  const int64_t total = n * element_size, max_segment = element_size * ((1 << 20) / element_size);
  const int64_t segments =
      RoundUp(std::max((total + max_segment - 1) / max_segment, int64_t{ranks} * 2), ranks);
  const int64_t segment = RoundUp((total + segments - 1) / segments, element_size);
  const int64_t chunk = segments / ranks * segment;
  std::vector<int64_t> counts;
  for (int c = 0; c < ranks; ++c) {
    const int64_t begin = std::min(total, c * chunk), end = std::min(total, (c + 1) * chunk);
    counts.push_back((end - begin) / element_size);
  }
  return counts;
}

Result<std::unique_ptr<Communicator>> MakeShmCommunicator(StoreClient* store,
                                                          const ShmGroupOptions& o,
                                                          std::string* why_not) {
  const std::string base = o.prefix + "/shm";
  const auto timeout = o.rendezvous_timeout;
  RETURN_IF_ERROR(store->Set(fmt::format("{}/host/{}", base, o.rank),
                             o.host.empty() ? ShmHostIdentity() : o.host));
  std::unique_ptr<Segment> seg;
  Fd memfd;  // rank 0's, open until every rank has mapped the segment or given up
  if (o.rank == 0) {
    ASSIGN_OR_RETURN(std::string offer, OfferSegment(store, o, &seg, &memfd));
    RETURN_IF_ERROR(store->Set(base + "/segment", offer));
  }
  ASSIGN_OR_RETURN(std::string offer, GetKey(store, base + "/segment", timeout));
  if (offer.rfind("none: ", 0) == 0) {
    *why_not = offer.substr(6);
    return std::unique_ptr<Communicator>();
  }
  std::string attached = "ok";
  if (o.rank != 0) {
    Result<std::unique_ptr<Segment>> got = AttachOffer(offer, o.rank, o.size);
    if (got.ok()) {
      seg = std::move(*got);
    } else {
      attached = got.status().message();
    }
  }
  RETURN_IF_ERROR(store->Set(fmt::format("{}/attached/{}", base, o.rank), attached));
  ASSIGN_OR_RETURN(std::vector<std::string> all,
                   GetAll(store, base + "/attached", o.size, timeout));
  for (int k = 0; k < o.size; ++k) {
    if (all[static_cast<size_t>(k)] != "ok") {
      *why_not = fmt::format("rank {} cannot map the segment: {}", k, all[static_cast<size_t>(k)]);
      return std::unique_ptr<Communicator>();
    }
  }
  seg->WatchPeers(o.rank);
  return std::unique_ptr<Communicator>(new ShmCommunicator(std::move(seg), o.rank, o.prefix, o));
}

}  // namespace lote::engine
