// Shared-memory Communicator for the ranks of one host: the collectives copy through
// one memfd segment that every rank of the group maps, instead of through TCP.
//
// Set-up (MakeShmCommunicator) goes through the job's rendezvous store under the
// group's key prefix: every rank publishes its host identity (boot id and PID
// namespace); when they all match, rank 0 creates the segment (memfd_create) and
// publishes its pid and descriptor, the others open it through /proc/<pid>/fd and
// map it, and every rank says whether that worked. If the ranks are on different
// hosts, or any rank cannot map the segment, every rank gets nullptr (and the reason)
// and the caller uses another transport (Gloo): the ranks decide together. The
// segment has no name in any filesystem: it is freed when the last rank unmaps it, so
// nothing is left behind by a crash.
//
// Data path: the segment holds two buffers (alternating by phase) of one slot per
// rank. A collective is a sequence of phases; in each phase every rank writes its part
// into its slot, arrives (a per-rank phase counter, then a shared "bell" word is
// bumped), waits for every rank's arrival (a bounded spin, then futex waits on the
// bell in slices), and reads the others' slots. Large calls run in rounds of one slot.
//
// Results: reductions are done by the owner of each element in a fixed order, the
// order of lote's Gloo transport (ReduceScatter: the ring of GlooCommunicator, chunk c
// summed from rank c+1 upwards; AllReduce: Gloo's ring all-reduce, chunk c summed from
// rank c-1 downwards, chunks as Gloo cuts them), so every rank holds the same bits,
// run after run, and the same bits Gloo gives on the same inputs.
//
// Failures: a peer that closed its communicator (destructor) or whose process exited
// turns a waiting collective into an Unavailable error within one wait slice; a peer
// that is alive but never arrives, after op_timeout. Errors are sticky (see
// communicator.h). Not thread-safe: one caller at a time per communicator.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/communicator.h"
#include "engine/rendezvous_store.h"

namespace lote::engine {

struct ShmGroupOptions : GroupOptions {
  // Bytes of one rank's slot in each of the two buffers (the segment is about
  // 2 * size * slot_bytes); calls larger than a slot run in rounds. Capped so the
  // segment stays within 64 MiB.
  int64_t slot_bytes = int64_t{4} << 20;
  // Checks of the peers' arrival before sleeping on the futex (2 cores: the peer may
  // need this core to arrive at all).
  int spin_checks = 2000;
  // How often a sleeping rank wakes to look for a dead peer or the deadline.
  std::chrono::milliseconds wait_slice = std::chrono::milliseconds(50);
  std::string host;  // "": ShmHostIdentity() (tests name hosts)
};

// The group over shared memory; nullptr, with *why_not saying why, when the group
// cannot use it (then no rank of the group does). An error Status when the
// rendezvous itself failed (a rank did not arrive in time).
Result<std::unique_ptr<Communicator>> MakeShmCommunicator(StoreClient* store,
                                                          const ShmGroupOptions& options,
                                                          std::string* why_not);

// This host as far as a shared segment goes: processes with the same identity can map
// each other's memfds (the same kernel boot, the same PID namespace).
std::string ShmHostIdentity();

// Element counts of the chunks Gloo's ring all-reduce (gloo::allreduce, RING) gives
// each rank of a group of `ranks` for n elements of element_size bytes: chunk c is
// reduced on rank c, summed from rank c-1 downwards.
std::vector<int64_t> GlooAllReduceChunks(int64_t n, int64_t element_size, int ranks);

}  // namespace lote::engine
