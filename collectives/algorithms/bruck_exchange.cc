#include "collectives/algorithms/bruck_exchange.h"

#include <memory>
#include <utility>
#include <vector>

#include "collectives/algorithms/rank_math.h"
#include "collectives/op/message.h"

namespace ferry {

namespace {

// One rank's blocks between rounds: at index i, a block i ranks short of
// where it goes (before the rounds) or from where it came (after them).
struct Moving {
  std::shared_ptr<Op> op;
  std::vector<Tensor> at;
  OnBlocks then;
};

void Round(std::unique_ptr<Moving> m, int k) {
  Op& op = *m->op;
  const int n = op.size(), r = op.rank();
  const int distance = 1 << k;
  if (distance >= n) {
    std::vector<Tensor> from(n);
    for (int i = 0; i < n; ++i) from[Mod(r - i, n)] = std::move(m->at[i]);
    return std::move(m->then)(std::move(from));
  }
  // The indices this round moves: those with bit k set, in order.
  std::vector<Tensor> out;
  for (int i = distance; i < n; ++i) {
    if (i & distance) out.push_back(m->at[i]);
  }
  const int count = static_cast<int>(out.size());
  const int step = 1 + k;
  op.Send(Mod(r + distance, n), step, Message::OfTensors(std::move(out)));
  const int from = Mod(r - distance, n);
  op.Recv(from, step, [m = std::move(m), k, from, count](Message got) mutable {
    Op& op = *m->op;
    if (!got.header.empty() || !got.value.is_null() ||
        static_cast<int>(got.tensors.size()) != count) {
      return op.Fail(op.Malformed(from, "not the blocks of its round"));
    }
    const int distance = 1 << k;
    size_t next = 0;
    for (int i = distance; i < op.size(); ++i) {
      if (i & distance) m->at[i] = std::move(got.tensors[next++]);
    }
    Round(std::move(m), k + 1);
  });
}

}  // namespace

void BruckExchange(Op& op, std::vector<Tensor> blocks, OnBlocks then) {
  const int n = op.size(), r = op.rank();
  auto m = std::make_unique<Moving>();
  m->op = op.shared_from_this();
  m->at.resize(n);
  for (int i = 0; i < n; ++i) m->at[i] = std::move(blocks[Mod(r + i, n)]);
  m->then = std::move(then);
  Round(std::move(m), 0);
}

}  // namespace ferry
