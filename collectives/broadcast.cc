// broadcast: every rank ends with rank src's value (any value; the other
// ranks' inputs are ignored).
//
// Every rank first joins at src (step 0), so no rank returns unless every
// rank came. Small values then go from src to every rank directly (step
// 1). For large ones src sends only a header at step 1 and the value
// travels a binomial tree rooted at src (step 2): src sends about log2(n)
// copies instead of n-1, and forwarding ranks share the load.
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "collectives/ring.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

namespace {

// The tree step: `v` is this rank's position relative to src.
absl::StatusOr<Value> Tree(Op& op, int src, Value value) {
  const int n = op.size();
  const int v = (op.rank() - src + n) % n;
  auto rank_of = [&](int pos) { return (pos + src) % n; };
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if (v & mask) {
      FERRY_ASSIGN_OR_RETURN(value, op.Recv(rank_of(v - mask), 2));
      break;
    }
  }
  // Send to the children, the largest subtree first.
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) op.Send(rank_of(v + mask), 2, value);
  }
  return value;
}

}  // namespace

absl::StatusOr<Value> Broadcast(Op& op, const Value& input,
                                const Value& params) {
  FERRY_ASSIGN_OR_RETURN(int src, RankParam(op, params, "src"));
  const int n = op.size();
  FERRY_RETURN_IF_ERROR(JoinAtRoot(op, src, 0));
  if (op.rank() == src) {
    const bool direct = PayloadBytes(input) <= op.config().direct_bytes;
    Value::Map head = {{"direct", direct}, {"value", direct ? input : Value()}};
    for (int k = 1; k < n; ++k) op.Send((src + k) % n, 1, Value(head));
    if (!direct) FERRY_RETURN_IF_ERROR(Tree(op, src, input).status());
    return input;
  }
  FERRY_ASSIGN_OR_RETURN(Value head, op.Recv(src, 1));
  FERRY_ASSIGN_OR_RETURN(const Value* direct, Part(op, head, "direct", src));
  FERRY_ASSIGN_OR_RETURN(const Value* value, Part(op, head, "value", src));
  Value out = *value;
  if (!direct->is_bool() || !direct->as_bool()) {
    FERRY_ASSIGN_OR_RETURN(out, Tree(op, src, Value()));
  }
  return out;
}

}  // namespace algorithms
}  // namespace ferry
