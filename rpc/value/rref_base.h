// The RRef a Value holds, seen by codecs and the rref/ layer: its wire
// descriptor and the base the rref/ layer derives from. Not part of the
// public API (ferry.h): users hold RRef (rref/rref.h).
#ifndef FERRY_RPC_VALUE_RREF_BASE_H_
#define FERRY_RPC_VALUE_RREF_BASE_H_

#include <string>
#include <utility>

#include "rpc/value/value.h"

namespace ferry {

// What identifies one user copy of a remote reference on the wire.
struct RRefDescriptor {
  GlobalId rref_id;
  GlobalId fork_id;
  std::string owner;    // Owner's worker name.
  int owner_rank = -1;  // Owner's rank.

  friend bool operator==(const RRefDescriptor& a, const RRefDescriptor& b) {
    return a.rref_id == b.rref_id && a.fork_id == b.fork_id &&
           a.owner == b.owner && a.owner_rank == b.owner_rank;
  }
};

// An RRef as a Value sees it: an identity. The rref/ layer derives from it
// to add reference counting; a plain RRefBase is a detached description
// (parsed from JSON, or decoded without an RRef context).
class RRefBase {
 public:
  explicit RRefBase(RRefDescriptor descriptor)
      : descriptor_(std::move(descriptor)) {}
  virtual ~RRefBase() = default;
  RRefBase(const RRefBase&) = delete;
  RRefBase& operator=(const RRefBase&) = delete;

  const RRefDescriptor& descriptor() const { return descriptor_; }

 private:
  const RRefDescriptor descriptor_;
};

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_RREF_BASE_H_
