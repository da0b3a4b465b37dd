// barrier: returns once every member has entered it.
//
// Dissemination: in round k each rank signals rank+2^k and waits for
// rank-2^k, so after ceil(log2 n) rounds every rank has heard, directly or
// not, from every other — with no root to wait on. Each round continues
// from the arrival of the previous one's message.
#include <memory>
#include <utility>

#include "collectives/algorithms/algorithms.h"

namespace ferry {
namespace algorithms {

namespace {

// Round `k` (distance `d`) and the rounds after it.
void Round(Result<Done> result, int k, int d) {
  Op& op = result.op();
  const int n = op.size(), r = op.rank();
  if (d >= n) return std::move(result).Set(Done());
  op.Send((r + d) % n, k, Message());
  op.Recv((r - d + n) % n, k,
          [result = std::move(result), k, d](Message) mutable {
            Round(std::move(result), k + 1, 2 * d);
          });
}

}  // namespace

void Barrier(Result<Done> result) { Round(std::move(result), 0, 1); }

}  // namespace algorithms
}  // namespace ferry
