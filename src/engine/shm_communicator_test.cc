// The shared-memory communicator against sums computed here in the fixed order it
// promises and against Gloo on the same inputs (2, 3 and 4 ranks on threads, slots small
// enough that every call runs in many rounds, uneven and empty counts, n = 0), across
// forked processes, and with a rank that leaves, dies or stays silent.
#include "engine/shm_communicator.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm_test_group.h"

namespace lote::engine {
namespace {

using comm_test::Connect;
using comm_test::MakeGroup;
using comm_test::StartStore;
using comm_test::Transport;

// Values whose float sums depend on the order of addition (magnitudes 2^-20..2^20,
// both signs), different on every rank.
template <typename T>
T Value(int rank, int64_t i, int salt) {
  uint64_t h = (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL) ^
               (static_cast<uint64_t>(rank + 1) * 0xc2b2ae3d27d4eb4fULL) ^
               static_cast<uint64_t>(salt);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 29;
  const T mantissa = T(1) + static_cast<T>(h & 0xffffff) / T(1 << 24);
  const T v = std::ldexp(mantissa, static_cast<int>((h >> 24) % 41) - 20);
  return (h >> 63) != 0 ? -v : v;
}

template <typename T>
std::vector<T> Values(int rank, int64_t n, int salt) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = Value<T>(rank, i, salt);
  return v;
}

// Element i summed in the order the communicators promise: owner c's chain starts at
// rank c + step and ends with rank c.
template <typename T>
T ChainSum(int ranks, int owner, int step, int64_t i, int salt) {
  T acc = Value<T>(((owner + step) % ranks + ranks) % ranks, i, salt);
  for (int t = 2; t <= ranks; ++t)
    acc = Value<T>(((owner + step * t) % ranks + ranks) % ranks, i, salt) + acc;
  return acc;
}

// The owner of element i when chunks of `counts` are laid out in rank order.
int Owner(const std::vector<int64_t>& counts, int64_t i) {
  int c = 0;
  for (int64_t at = counts[0]; i >= at; at += counts[static_cast<size_t>(++c)]) {
  }
  return c;
}

std::vector<int64_t> Offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> out(counts.size() + 1, 0);
  for (size_t k = 0; k < counts.size(); ++k) out[k + 1] = out[k] + counts[k];
  return out;
}

template <typename T>
bool SameBits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(T) * a.size()) == 0;
}

// Each call on both transports from the same input; the shared-memory result must be
// Gloo's, bit for bit, and the reference computed here.
void CompareCollectives(int r, int n, Communicator* gloo, Communicator* shm) {
  for (int64_t len : {int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1000}, int64_t{2200000}}) {
    const int salt = static_cast<int>(len);
    std::vector<float> a = Values<float>(r, len, salt), b = a;
    ASSERT_TRUE(gloo->AllReduce(a.data(), len, ReduceOp::kSum).ok());
    ASSERT_TRUE(shm->AllReduce(b.data(), len, ReduceOp::kSum).ok());
    ASSERT_TRUE(SameBits(a, b)) << "all-reduce of " << len << " on rank " << r;
    const std::vector<int64_t> chunks = GlooAllReduceChunks(len, sizeof(float), n);
    for (int64_t i = 0; i < len; i += 1 + len / 5000) {  // a sample of the big ones
      ASSERT_EQ(b[static_cast<size_t>(i)], ChainSum<float>(n, Owner(chunks, i), -1, i, salt))
          << "element " << i << " of " << len;
    }
  }
  std::vector<double> da = Values<double>(r, 1001, 7), db = da;
  ASSERT_TRUE(gloo->AllReduce(da.data(), 1001, ReduceOp::kSum).ok());
  ASSERT_TRUE(shm->AllReduce(db.data(), 1001, ReduceOp::kSum).ok());
  ASSERT_TRUE(SameBits(da, db));
  std::vector<float> ma = Values<float>(r, 1000, 8), mb = ma;
  ASSERT_TRUE(gloo->AllReduce(ma.data(), 1000, ReduceOp::kMax).ok());
  ASSERT_TRUE(shm->AllReduce(mb.data(), 1000, ReduceOp::kMax).ok());
  ASSERT_TRUE(SameBits(ma, mb));
  for (int64_t i = 0; i < 1000; ++i) {
    float want = Value<float>(0, i, 8);
    for (int k = 1; k < n; ++k) want = std::max(want, Value<float>(k, i, 8));
    ASSERT_EQ(mb[static_cast<size_t>(i)], want);
  }

  std::vector<int64_t> tiny = {5, 0, 7, 3};
  tiny.resize(static_cast<size_t>(n));
  for (const std::vector<int64_t>& counts :
       {tiny, EvenCounts(100003, n), std::vector<int64_t>(static_cast<size_t>(n), 0)}) {
    const std::vector<int64_t> at = Offsets(counts);
    const int64_t total = at.back();
    std::vector<float> a = Values<float>(r, total, 9), b = a;
    ASSERT_TRUE(gloo->ReduceScatter(a.data(), counts).ok());
    ASSERT_TRUE(shm->ReduceScatter(b.data(), counts).ok());
    for (int64_t i = at[r]; i < at[r + 1]; ++i) {
      ASSERT_EQ(b[i], a[i]) << "reduce-scatter element " << i << " on rank " << r;
      ASSERT_EQ(b[i], ChainSum<float>(n, r, +1, i, 9));
    }
    std::vector<float> g(static_cast<size_t>(total), -1.0f);
    for (int64_t i = at[r]; i < at[r + 1]; ++i) g[i] = Value<float>(r, i, 10);
    std::vector<float> h = g;
    ASSERT_TRUE(gloo->AllGather(g.data(), counts).ok());
    ASSERT_TRUE(shm->AllGather(h.data(), counts).ok());
    ASSERT_TRUE(SameBits(g, h));
    for (int64_t i = 0; i < total; ++i) ASSERT_EQ(h[i], Value<float>(Owner(counts, i), i, 10));
  }
  for (int64_t len : {int64_t{0}, int64_t{7}, int64_t{300001}}) {
    std::vector<float> x = Values<float>(r, len, 11);
    ASSERT_TRUE(shm->Broadcast(x.data(), len, n - 1).ok());
    ASSERT_TRUE(SameBits(x, Values<float>(n - 1, len, 11))) << "broadcast of " << len;
  }
  ASSERT_TRUE(shm->Barrier().ok());
  EXPECT_GT(shm->seconds_in_collectives(), 0.0);
}

struct Layout {
  int ranks;
  int64_t slot_bytes;
};

class ShmCommunicatorTest : public ::testing::TestWithParam<Layout> {};
INSTANTIATE_TEST_SUITE_P(Layouts, ShmCommunicatorTest,
                         ::testing::Values(Layout{2, 4096}, Layout{2, 4 << 20}, Layout{3, 4096},
                                           Layout{4, 4096}, Layout{4, 4 << 20}),
                         [](const auto& info) {
                           return std::to_string(info.param.ranks) + "ranks_slot" +
                                  std::to_string(info.param.slot_bytes);
                         });

TEST_P(ShmCommunicatorTest, CollectivesEqualGlooAndTheReference) {
  const int n = GetParam().ranks;
  auto server = StartStore(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto client = Connect(server->port());
      auto gloo = MakeGroup(Transport::kGloo, client.get(), "g", r, n);
      ASSERT_TRUE(gloo.ok()) << gloo.status().ToString();
      ShmGroupOptions o;
      o.slot_bytes = GetParam().slot_bytes;
      auto shm = MakeGroup(Transport::kShm, client.get(), "s", r, n, o);
      ASSERT_TRUE(shm.ok()) << shm.status().ToString();
      EXPECT_EQ((*shm)->rank(), r);
      EXPECT_EQ((*shm)->size(), n);
      CompareCollectives(r, n, gloo->get(), shm->get());
    });
  }
  for (auto& t : threads) t.join();
}

// The test's values are order-sensitive: with 4 ranks, summing element by element in
// rank order gives other bits than the promised chains for many elements (so the
// comparisons above would catch another order).
TEST(ShmCommunicatorOrderTest, TheValuesTellOrdersApart) {
  int differ = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    float plain = Value<float>(0, i, 1);
    for (int k = 1; k < 4; ++k) plain = plain + Value<float>(k, i, 1);
    differ += plain != ChainSum<float>(4, 1, -1, i, 1) ? 1 : 0;
  }
  EXPECT_GT(differ, 100);
}

// A rank whose communicator closes (its thread returns, as a process would exit) fails
// every other rank's next collective, and the error stays.
TEST(ShmCommunicatorFailureTest, RankThatLeavesFailsTheOthers) {
  for (int n : {2, 4}) {
    comm_test::OnGroup(
        n,
        [&](int r, Communicator* comm) {
          if (r == n - 1) return;  // leaves at once
          std::vector<float> x(100, 1.0f);
          Status s = comm->AllReduce(x.data(), 100, ReduceOp::kSum);
          ASSERT_FALSE(s.ok());
          EXPECT_EQ(s.code(), StatusCode::kUnavailable);
          EXPECT_NE(s.message().find("rank " + std::to_string(n - 1) + " left the group"),
                    std::string::npos)
              << s.ToString();
          EXPECT_EQ(comm->Barrier().message(), s.message());
          EXPECT_EQ(comm->status().message(), s.message());
        },
        Transport::kShm);
  }
}

// A rank that is alive but never arrives: the others fail after op_timeout, naming it.
TEST(ShmCommunicatorFailureTest, SilentRankTimesOut) {
  auto server = StartStore(2);
  std::atomic<bool> done{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto client = Connect(server->port());
      ShmGroupOptions o;
      o.op_timeout = std::chrono::milliseconds(300);
      o.wait_slice = std::chrono::milliseconds(20);
      auto comm = MakeGroup(Transport::kShm, client.get(), "s", r, 2, o);
      ASSERT_TRUE(comm.ok()) << comm.status().ToString();
      if (r == 1) {
        while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        return;
      }
      Status s = (*comm)->Barrier();
      done = true;
      EXPECT_NE(s.message().find("timed out after 0.3 s waiting for rank 1"), std::string::npos)
          << s.ToString();
    });
  }
  for (auto& t : threads) t.join();
}

TEST(ShmCommunicatorFailureTest, RanksOnDifferentHostsFallBack) {
  auto server = StartStore(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      auto client = Connect(server->port());
      ShmGroupOptions o;
      o.prefix = "s";
      o.rank = r;
      o.size = 2;
      o.host = r == 0 ? "host-a" : "host-b";
      std::string why;
      auto comm = MakeShmCommunicator(client.get(), o, &why);
      ASSERT_TRUE(comm.ok()) << comm.status().ToString();
      EXPECT_EQ(*comm, nullptr);
      EXPECT_NE(why.find("not all on one host"), std::string::npos) << why;
    });
  }
  for (auto& t : threads) t.join();
}

// Rank r of a group of processes: the collectives against the reference, then the last
// rank exits without closing its communicator (as a crash would), and every other
// rank's next collective fails naming it. Returns what went wrong ("" when nothing).
std::string RunProcessRank(int port, int r, int n) {
  auto client = StoreClient::Connect("127.0.0.1", port, std::chrono::milliseconds(5000), nullptr);
  if (!client.ok()) return client.status().ToString();
  ShmGroupOptions o;
  o.slot_bytes = 4096;
  auto comm = MakeGroup(Transport::kShm, client->get(), "p", r, n, o);
  if (!comm.ok()) return comm.status().ToString();
  const int64_t len = 5000;
  std::vector<float> x = Values<float>(r, len, 3);
  if (!(*comm)->AllReduce(x.data(), len, ReduceOp::kSum).ok()) return "all-reduce failed";
  const std::vector<int64_t> chunks = GlooAllReduceChunks(len, sizeof(float), n);
  for (int64_t i = 0; i < len; ++i) {
    if (x[i] != ChainSum<float>(n, Owner(chunks, i), -1, i, 3))
      return "wrong sum at " + std::to_string(i);
  }
  if (r == n - 1) {
    comm->release();  // never closed: the process just ends
    return "";
  }
  Status s = (*comm)->Barrier();
  std::string problem;
  if (s.message().find("rank " + std::to_string(n - 1) + " (pid") == std::string::npos ||
      s.message().find("exited") == std::string::npos) {
    problem = "the barrier after the death returned: " + s.ToString();
  }
  // Rank 0 checks last: the others keep their communicators open (a closed one would
  // be another reason to fail) until it has.
  if (r == 0) {
    if (!(*client)->Set("p/checked", "1").ok()) return "cannot set p/checked";
  } else if (!(*client)->Get("p/checked", std::chrono::seconds(60)).ok()) {
    return "rank 0 did not check";
  }
  return problem;
}

TEST(ShmCommunicatorFailureTest, ForkedRanksAndOneThatDies) {
  for (int n : {2, 4}) {
    auto server = StartStore(n);
    std::vector<pid_t> children;
    for (int r = 1; r < n; ++r) {
      const pid_t pid = ::fork();
      ASSERT_GE(pid, 0);
      if (pid == 0) {
        const std::string problem = RunProcessRank(server->port(), r, n);
        if (!problem.empty()) std::fprintf(stderr, "rank %d: %s\n", r, problem.c_str());
        ::_exit(problem.empty() ? 0 : 1);
      }
      children.push_back(pid);
    }
    EXPECT_EQ(RunProcessRank(server->port(), 0, n), "") << n << " ranks";
    for (pid_t pid : children) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << n << " ranks";
    }
  }
}

}  // namespace
}  // namespace lote::engine
