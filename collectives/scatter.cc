// scatter: rank src holds a list of one value per rank; rank i ends with
// the i-th (the other ranks' inputs are ignored). Every rank joins at src
// (step 0), then src sends each its value directly (step 1): no rank
// returns unless every rank came.
#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "collectives/ring.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

absl::StatusOr<Value> Scatter(Op& op, const Value& input, const Value& params) {
  FERRY_ASSIGN_OR_RETURN(int src, RankParam(op, params, "src"));
  const int n = op.size();
  if (op.rank() != src) {
    FERRY_RETURN_IF_ERROR(JoinAtRoot(op, src, 0));
    return op.Recv(src, 1);
  }
  if (!input.is_list() || static_cast<int>(input.as_list().size()) != n) {
    return op.BadInput(absl::StrCat(
        "the input of scatter's source must be a list of ", n,
        " values (one per rank), got ",
        input.is_list() ? absl::StrCat(input.as_list().size(), " items")
                        : std::string(input.kind_name())));
  }
  FERRY_RETURN_IF_ERROR(JoinAtRoot(op, src, 0));
  for (int k = 1; k < n; ++k)
    op.Send((src + k) % n, 1, input.as_list()[(src + k) % n]);
  return input.as_list()[src];
}

}  // namespace algorithms
}  // namespace ferry
