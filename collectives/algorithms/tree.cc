#include "collectives/algorithms/tree.h"

#include <utility>

#include "collectives/algorithms/rank_math.h"

namespace ferry {

int TreeParent(int rank, int root, int n) {
  const int v = Mod(rank - root, n);
  if (v == 0) return -1;
  return Mod((v & (v - 1)) + root, n);
}

std::vector<int> TreeChildren(int rank, int root, int n) {
  const int v = Mod(rank - root, n);
  int below = 1;  // The lowest set bit of v, or the first power >= n.
  if (v == 0) {
    while (below < n) below <<= 1;
  } else {
    below = v & -v;
  }
  std::vector<int> children;
  for (int mask = below >> 1; mask > 0; mask >>= 1) {
    if (v + mask < n) children.push_back(Mod(v + mask + root, n));
  }
  return children;
}

void TreeJoin(Op& op, int root, int step, absl::AnyInvocable<void() &&> then) {
  const int n = op.size(), me = op.rank();
  op.RecvFrom(TreeChildren(me, root, n), step,
              [op = op.shared_from_this(), root, step,
               then = std::move(then)](std::vector<Message>) mutable {
                const int parent = TreeParent(op->rank(), root, op->size());
                if (parent >= 0) op->Send(parent, step, Message());
                std::move(then)();
              });
}

}  // namespace ferry
