// Gloo-backed Communicator (CPU collectives over TCP; loopback between the ranks of
// one node). A GlooGroup is built by a full-mesh rendezvous through the job's
// StoreClient under a key prefix, so one process can hold several groups (the world,
// its tensor-parallel group, its data-parallel group), each with its own connections.
// Failures of Gloo (a peer's connection closed, a timeout) come back as Status; see
// communicator.h for the sticky-error contract.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "common/status.h"
#include "engine/communicator.h"
#include "engine/rendezvous_store.h"

namespace lote::engine {

struct GlooGroupOptions : GroupOptions {
  std::string bind_address;  // this process's address that the peers can reach
};

Result<std::unique_ptr<Communicator>> MakeGlooCommunicator(StoreClient* store,
                                                           const GlooGroupOptions& options);

}  // namespace lote::engine
