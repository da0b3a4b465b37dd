// broadcast: every rank ends with rank src's value (any value; the other
// ranks' inputs are ignored).
//
// Every rank first joins at src (step 0), so no rank returns unless every
// rank came. Small values then go from src to every rank directly (step
// 1). For large ones src sends only a header at step 1 and the value
// travels a binomial tree rooted at src (step 2): src sends about log2(n)
// copies instead of n-1, and forwarding ranks share the load.
//
// On tree_world ranks or more (config.h) the join goes up that tree as
// well (tree.h), and every value comes down it: each rank then sends and
// receives O(log n) messages, src no more than log2(n) each way, where
// the direct form has src receive and send n-1.
#include <optional>
#include <utility>

#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/ring.h"
#include "collectives/algorithms/tree.h"
#include "collectives/op/checks.h"
#include "proto/collectives.pb.h"
#include "rpc/value/payload_bytes.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/value/value.h"

namespace ferry {
namespace algorithms {

namespace {

// Sends `value` down the tree from this rank (at `v`, its position
// relative to src): to the children, the largest subtree first.
void SendDown(Op& op, int src, int v, int mask, const Message& value) {
  const int n = op.size();
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (v + mask < n) op.Send((v + mask + src) % n, 2, value);
  }
}

// The value received, in `into` if given (then it must be a tensor).
void Received(Result<Value> result, const TensorOut& into, int from,
              Value value) {
  Op& op = result.op();
  if (into == nullptr) return std::move(result).Set(std::move(value));
  if (!value.is_tensor()) {
    return op.Fail(op.Malformed(from, "expected a tensor for the output"));
  }
  absl::StatusOr<Tensor> placed = Place(op, into, value.as_tensor(), "output");
  if (!placed.ok()) return op.Fail(placed.status());
  std::move(result).Set(Value(*std::move(placed)));
}

// The tree step for a rank other than src: the value from its parent,
// passed on to its children.
void Tree(Result<Value> result, int src, TensorOut into) {
  Op& op = result.op();
  const int n = op.size();
  const int v = (op.rank() - src + n) % n;
  int mask = 1;
  while (!(v & mask)) mask <<= 1;  // v > 0: some bit is set.
  const int parent = (v - mask + src) % n;
  std::optional<TensorLanding> at = LandingOf(into);
  op.Recv(
      parent, 2,
      [result = std::move(result), src, v, mask, parent,
       into = std::move(into)](Message m) mutable {
        SendDown(result.op(), src, v, mask, m);
        Received(std::move(result), into, parent, std::move(m.value));
      },
      std::move(at));
}

// src's own value, in its output if given (nothing to do when it is the
// same memory).
void Kept(Result<Value> result, Value value, const TensorOut& into) {
  Op& op = result.op();
  if (into == nullptr) return std::move(result).Set(std::move(value));
  absl::StatusOr<Tensor> placed = Place(op, into, value.as_tensor(), "output");
  if (!placed.ok()) return op.Fail(placed.status());
  std::move(result).Set(Value(*std::move(placed)));
}

void Source(Result<Value> result, Value value, const TensorOut& into) {
  Op& op = result.op();
  const int n = op.size(), src = op.rank();
  proto::BroadcastHeader head;
  head.set_direct(PayloadBytes(value) <= op.config().direct_bytes);
  Message m = Message::Of(head);
  if (head.direct()) m.value = value;
  for (int k = 1; k < n; ++k) op.Send((src + k) % n, 1, m);
  if (!head.direct()) {
    int mask = 1;
    while (mask < n) mask <<= 1;
    SendDown(op, src, 0, mask, Message::OfValue(value));
  }
  Kept(std::move(result), std::move(value), into);
}

// The tree form's source: the value down the whole tree.
void TreeSource(Result<Value> result, Value value, const TensorOut& into) {
  Op& op = result.op();
  int mask = 1;
  while (mask < op.size()) mask <<= 1;
  SendDown(op, op.rank(), 0, mask, Message::OfValue(value));
  Kept(std::move(result), std::move(value), into);
}

void Receiver(Result<Value> result, int src, TensorOut into) {
  Op& op = result.op();
  std::optional<TensorLanding> at = LandingOf(into);
  op.Recv(
      src, 1,
      [result = std::move(result), src,
       into = std::move(into)](Message m) mutable {
        proto::BroadcastHeader head;
        if (!ReadHeader(m, &head)) {
          Op& op = result.op();
          return op.Fail(op.Malformed(src, "not a broadcast header"));
        }
        if (head.direct()) {
          return Received(std::move(result), into, src, std::move(m.value));
        }
        Tree(std::move(result), src, std::move(into));
      },
      std::move(at));
}

}  // namespace

void Broadcast(Result<Value> result, BroadcastArgs args) {
  Op& op = result.op();
  const int src = args.src;
  absl::Status src_ok = CheckRankParam(op, src, "src");
  if (src_ok.ok() && args.into != nullptr && op.rank() == src) {
    src_ok = args.value.is_tensor()
                 ? CheckInto(op, args.into, args.value.as_tensor(), "output")
                 : op.BadInput("a value that is not a tensor has no output");
  }
  if (!src_ok.ok()) return op.Fail(src_ok);
  if (op.size() >= op.config().tree_world) {
    return TreeJoin(op, src, 0,
                    [result = std::move(result), value = std::move(args.value),
                     src, into = std::move(args.into)]() mutable {
                      if (result.op().rank() == src) {
                        return TreeSource(std::move(result), std::move(value),
                                          into);
                      }
                      Tree(std::move(result), src, std::move(into));
                    });
  }
  JoinAtRoot(op, src, 0,
             [result = std::move(result), value = std::move(args.value), src,
              into = std::move(args.into)]() mutable {
               if (result.op().rank() == src) {
                 return Source(std::move(result), std::move(value), into);
               }
               Receiver(std::move(result), src, std::move(into));
             });
}

}  // namespace algorithms
}  // namespace ferry
