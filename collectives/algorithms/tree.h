// The binomial tree rooted at one rank: the schedule of rooted ops on many
// ranks (broadcast), where a root talking to every rank itself would be
// the bottleneck. Rank r's place in the tree is v = r - root (mod n); its
// parent is v without its lowest set bit, its children v + 2^k for every
// 2^k below that bit (the root: below n). So the tree is ceil(log2 n)
// deep, and each rank talks to at most ceil(log2 n) others.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_TREE_H_
#define FERRY_COLLECTIVES_ALGORITHMS_TREE_H_

#include <vector>

#include "absl/functional/any_invocable.h"
#include "collectives/op/op.h"

namespace ferry {

// Group rank `rank`'s parent in the tree rooted at `root` (-1 for the
// root), and its children, the largest subtree first.
int TreeParent(int rank, int root, int n);
std::vector<int> TreeChildren(int rank, int root, int n);

// JoinAtRoot (ring.h) up the tree: each rank tells its parent it is here
// (step `step`) once its whole subtree is, so the root goes on once every
// rank joined, each having sent one message and received one per child.
// Others go on once they told their parent.
void TreeJoin(Op& op, int root, int step, absl::AnyInvocable<void() &&> then);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_TREE_H_
