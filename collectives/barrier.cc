// barrier: returns once every member has entered it.
//
// Dissemination: in round k each rank signals rank+2^k and waits for
// rank-2^k, so after ceil(log2 n) rounds every rank has heard, directly or
// not, from every other — with no root to wait on.
#include "collectives/algorithms.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

absl::StatusOr<Value> Barrier(Op& op, const Value& /*input*/,
                              const Value& /*params*/) {
  const int n = op.size(), r = op.rank();
  for (int k = 0, d = 1; d < n; ++k, d *= 2) {
    op.Send((r + d) % n, k, Value());
    FERRY_RETURN_IF_ERROR(op.Recv((r - d + n) % n, k).status());
  }
  return Value();
}

}  // namespace algorithms
}  // namespace ferry
