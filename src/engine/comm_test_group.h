// Test helper (tests only): a rendezvous store in this process and groups of ranks on
// threads, each rank with a communicator over Gloo (TCP) or shared memory.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/communicator.h"
#include "engine/gloo_communicator.h"
#include "engine/rendezvous_store.h"
#include "engine/shm_communicator.h"

namespace lote::engine::comm_test {

enum class Transport { kGloo, kShm };

inline const char* Name(Transport t) { return t == Transport::kGloo ? "Gloo" : "Shm"; }

inline std::unique_ptr<StoreServer> StartStore(int nodes = 2) {
  StoreServer::Options o;
  o.port = 0;
  o.num_nodes = nodes;
  o.job_id = "job-1";
  auto s = StoreServer::Start(o);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(*s);
}

inline std::unique_ptr<StoreClient> Connect(int port) {
  auto c = StoreClient::Connect("127.0.0.1", port, std::chrono::milliseconds(5000), nullptr);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(*c);
}

// A communicator of group `prefix` over `transport`; shared memory must not fall back.
inline Result<std::unique_ptr<Communicator>> MakeGroup(Transport transport, StoreClient* client,
                                                       const std::string& prefix, int rank,
                                                       int size, ShmGroupOptions shm = {}) {
  if (transport == Transport::kGloo) {
    GlooGroupOptions o;
    o.prefix = prefix;
    o.rank = rank;
    o.size = size;
    o.bind_address = "127.0.0.1";
    o.rendezvous_timeout = std::chrono::seconds(30);
    return MakeGlooCommunicator(client, o);
  }
  shm.prefix = prefix;
  shm.rank = rank;
  shm.size = size;
  shm.rendezvous_timeout = std::chrono::seconds(30);
  std::string why_not;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, MakeShmCommunicator(client, shm, &why_not));
  if (comm == nullptr) return Status::Unavailable("no shared memory: " + why_not);
  return comm;
}

// Runs fn(rank, comm) on `n` threads, each with its own communicator of one group.
template <typename Fn>
void OnGroup(int n, Fn fn, Transport transport = Transport::kGloo) {
  auto server = StartStore(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto client = Connect(server->port());
      auto comm = MakeGroup(transport, client.get(), "g", r, n);
      ASSERT_TRUE(comm.ok()) << comm.status().ToString();
      fn(r, comm->get());
    });
  }
  for (auto& t : threads) t.join();
}

}  // namespace lote::engine::comm_test
