// The structure of a nested value of tensors (tf's all_gather along an
// axis): lists, maps and tensors of rank ≥ 1, described by a
// proto::Structure (metadata only) whose tensors, in order, are the
// value's leaves. Built from this rank's input, checked when a peer sent
// it, and compared with rank 0's.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_STRUCTURE_H_
#define FERRY_COLLECTIVES_ALGORITHMS_STRUCTURE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "collectives/op/op.h"
#include "proto/collectives.pb.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

// `path`[key]: value["a"][1].
std::string Child(const std::string& path, const Value& key);

// The structure of `v` and its leaves in order; this rank's
// INVALID_ARGUMENT naming the place (`path`…) for anything but lists, maps
// and tensors of rank ≥ 1 with `axis` in range.
absl::Status Skeleton(const Op& op, const Value& v, int64_t axis,
                      const std::string& path, proto::Structure* out,
                      std::vector<Tensor>* leaves);

// A peer's structure, checked before it is read: every node set, each
// tensor's metadata printable (CheckMeta), a map's keys and values paired;
// its leaves' metadata in order. INTERNAL naming `from` otherwise.
absl::Status Leaves(const Op& op, int from, const proto::Structure& s,
                    std::vector<const proto::TensorMeta*>* out);

// Rank r's structure `s` against rank 0's `s0` (both checked by Leaves):
// equal, tensors' shapes aside from `axis`; else the Mismatch naming the
// first place they differ ("rank 1 (…) has value[0] a list of 3 but rank
// 0 (…) has int32 [2]").
absl::Status SameStructure(const Op& op, int r, const proto::Structure& s,
                           const proto::Structure& s0, int64_t axis,
                           const std::string& path);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_STRUCTURE_H_
