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
#include <utility>

#include "collectives/algorithms.h"
#include "collectives/checks.h"
#include "collectives/ring.h"
#include "collectives/tree.h"
#include "proto/collectives.pb.h"

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

// The tree step for a rank other than src: the value from its parent,
// passed on to its children.
void Tree(Result<Value> result, int src) {
  Op& op = result.op();
  const int n = op.size();
  const int v = (op.rank() - src + n) % n;
  int mask = 1;
  while (!(v & mask)) mask <<= 1;  // v > 0: some bit is set.
  op.Recv((v - mask + src) % n, 2,
          [result = std::move(result), src, v, mask](Message m) mutable {
            SendDown(result.op(), src, v, mask, m);
            std::move(result).Set(std::move(m.value));
          });
}

void Source(Result<Value> result, Value value) {
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
  std::move(result).Set(std::move(value));
}

// The tree form's source: the value down the whole tree.
void TreeSource(Result<Value> result, Value value) {
  Op& op = result.op();
  int mask = 1;
  while (mask < op.size()) mask <<= 1;
  SendDown(op, op.rank(), 0, mask, Message::OfValue(value));
  std::move(result).Set(std::move(value));
}

void Receiver(Result<Value> result, int src) {
  Op& op = result.op();
  op.Recv(src, 1, [result = std::move(result), src](Message m) mutable {
    proto::BroadcastHeader head;
    if (!ReadHeader(m, &head)) {
      Op& op = result.op();
      return op.Fail(op.Malformed(src, "not a broadcast header"));
    }
    if (head.direct()) return std::move(result).Set(std::move(m.value));
    Tree(std::move(result), src);
  });
}

}  // namespace

void Broadcast(Result<Value> result, BroadcastArgs args) {
  Op& op = result.op();
  const int src = args.src;
  absl::Status src_ok = CheckRankParam(op, src, "src");
  if (!src_ok.ok()) return op.Fail(src_ok);
  if (op.size() >= op.config().tree_world) {
    return TreeJoin(op, src, 0,
                    [result = std::move(result), value = std::move(args.value),
                     src]() mutable {
                      if (result.op().rank() == src) {
                        return TreeSource(std::move(result), std::move(value));
                      }
                      Tree(std::move(result), src);
                    });
  }
  JoinAtRoot(op, src, 0,
             [result = std::move(result), value = std::move(args.value),
              src]() mutable {
               if (result.op().rank() == src) {
                 return Source(std::move(result), std::move(value));
               }
               Receiver(std::move(result), src);
             });
}

}  // namespace algorithms
}  // namespace ferry
