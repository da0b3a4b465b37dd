// gather: rank dst ends with the list of every rank's value (in rank
// order); the others end with null. Direct: every rank sends to dst
// (step 0), and dst, once it has everyone's, releases them (step 1) — so
// no rank returns unless every rank came.
#include <utility>

#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

absl::StatusOr<Value> Gather(Op& op, const Value& input, const Value& params) {
  FERRY_ASSIGN_OR_RETURN(int dst, RankParam(op, params, "dst"));
  if (op.rank() != dst) {
    op.Send(dst, 0, input);
    FERRY_RETURN_IF_ERROR(op.Recv(dst, 1).status());
    return Value();
  }
  const int n = op.size();
  Value::List all(n);
  all[dst] = input;
  for (int k = 1; k < n; ++k) {
    const int from = (dst + k) % n;
    FERRY_ASSIGN_OR_RETURN(all[from], op.Recv(from, 0));
  }
  for (int k = 1; k < n; ++k) op.Send((dst + k) % n, 1, Value());
  return Value(std::move(all));
}

}  // namespace algorithms
}  // namespace ferry
