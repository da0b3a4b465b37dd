// The exchange under both forms of all_gather: every rank's tensors, by
// group rank. Step 0 sends each rank's header (AllGatherHeader) to
// everyone, with its tensors when they are small; `check` sees every
// rank's header before large ones go around the ring (steps 1..),
// skipping those already delivered. So a mismatch fails the op early and
// identically on every rank.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_GATHER_TENSORS_H_
#define FERRY_COLLECTIVES_ALGORITHMS_GATHER_TENSORS_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "collectives/op/op.h"
#include "proto/collectives.pb.h"
#include "rpc/value/tensor.h"

namespace ferry {

using CheckHeaders = absl::AnyInvocable<absl::Status(
    const std::vector<proto::AllGatherHeader>& headers)>;
// Every rank's tensors, as it sent them (the caller checks them against
// its header).
using Gathered =
    absl::AnyInvocable<void(std::vector<proto::AllGatherHeader> headers,
                            std::vector<std::vector<Tensor>> tensors) &&>;

// `header`'s `direct` is set here. `land[r]`, if given, is where rank r's
// first tensor is received (Op::Landings) when it goes around the ring;
// direct ones arrive packed with other ranks' and are not landed.
void GatherTensors(Op& op, proto::AllGatherHeader header,
                   std::vector<Tensor> mine, CheckHeaders check, Gathered then,
                   Op::Landings land = {});

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_GATHER_TENSORS_H_
