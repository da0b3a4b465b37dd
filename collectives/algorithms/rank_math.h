// Rank arithmetic shared by the schedules (ring.cc, tree.cc, gather_all.cc,
// bruck_exchange.cc): ranks sit on a circle of n.
#ifndef FERRY_COLLECTIVES_ALGORITHMS_RANK_MATH_H_
#define FERRY_COLLECTIVES_ALGORITHMS_RANK_MATH_H_

namespace ferry {

// `a` mod `n` in [0, n) for any int `a` (C++'s % keeps a's sign): the rank
// `a` places from rank 0, going round a circle of `n` > 0.
constexpr int Mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_RANK_MATH_H_
