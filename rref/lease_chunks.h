// A holder's lease renewal to one owner, split into messages of bounded
// size: a holder may have a million forks on one owner, and one message
// with all of them would pass gRPC's message limit (and fail, so every
// fork would expire). Each chunk carries the round and its place in it, so
// the owner reconciles only once the whole listing arrived.
#ifndef FERRY_RREF_LEASE_CHUNKS_H_
#define FERRY_RREF_LEASE_CHUNKS_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "proto/rref.pb.h"
#include "rpc/value/value.h"

namespace ferry {

// Handles per chunk: at most ~47 bytes each on the wire, so a chunk stays
// under 400 KB, far below gRPC's 4 MB default.
inline constexpr int kLeaseChunkHandles = 8192;

// (rref, fork)
using LeaseFork = std::pair<GlobalId, GlobalId>;

// The listing `held` + `in_transit` of `holder` for one owner, as requests
// of at most `max_handles` handles (forks and in-transit together), all of
// round `round` and `epoch`, numbered 0..n-1 of n. At least one request,
// even for an empty listing (it still renews and completes a round).
// `max_handles` below 1 counts as 1.
std::vector<proto::LeaseRequest> ChunkLease(
    uint64_t holder, uint64_t round, uint64_t epoch,
    const std::vector<LeaseFork>& held,
    const std::vector<LeaseFork>& in_transit,
    int max_handles = kLeaseChunkHandles);

}  // namespace ferry

#endif  // FERRY_RREF_LEASE_CHUNKS_H_
