#include "rref/lease_chunks.h"

#include <algorithm>

namespace ferry {

namespace {

void SetHandle(const LeaseFork& f, proto::RRefHandle* h) {
  h->set_rref_creator(f.first.node);
  h->set_rref_local(f.first.local);
  h->set_fork_creator(f.second.node);
  h->set_fork_local(f.second.local);
}

}  // namespace

std::vector<proto::LeaseRequest> ChunkLease(
    uint64_t holder, uint64_t round, uint64_t epoch,
    const std::vector<LeaseFork>& held,
    const std::vector<LeaseFork>& in_transit, int max_handles) {
  const size_t per = static_cast<size_t>(std::max(max_handles, 1));
  const size_t total = held.size() + in_transit.size();
  const size_t n = std::max<size_t>(1, (total + per - 1) / per);
  std::vector<proto::LeaseRequest> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].set_holder(holder);
    out[i].set_round(round);
    out[i].set_epoch(epoch);
    out[i].set_chunk(static_cast<uint32_t>(i));
    out[i].set_chunks(static_cast<uint32_t>(n));
  }
  // Handle k (held first, then in transit) goes to chunk k / per.
  for (size_t k = 0; k < held.size(); ++k) {
    SetHandle(held[k], out[k / per].add_forks());
  }
  for (size_t k = 0; k < in_transit.size(); ++k) {
    const size_t at = held.size() + k;
    SetHandle(in_transit[k], out[at / per].add_in_transit());
  }
  return out;
}

}  // namespace ferry
