#include "collectives/algorithms/gather_all.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/rank_math.h"
#include "collectives/transport/op_key.h"
#include "proto/collectives.pb.h"

namespace ferry {

namespace {

// What one rank holds between rounds: the messages of ranks rank, rank+1,
// … (mod n), in that order.
struct Holding {
  std::shared_ptr<Op> op;
  std::vector<Message> held;
  Op::OnMessages then;
};

// held[0, count) as one message.
Message Pack(int first, const std::vector<Message>& held, int count) {
  proto::GatheredHeader h;
  h.set_first(first);
  Message packed;
  for (int i = 0; i < count; ++i) {
    h.add_headers(held[i].header);
    h.add_tensor_counts(static_cast<int>(held[i].tensors.size()));
    packed.tensors.insert(packed.tensors.end(), held[i].tensors.begin(),
                          held[i].tensors.end());
  }
  packed.header = h.SerializeAsString();
  return packed;
}

// The `count` messages of ranks first, first+1, … packed in `m`, appended
// to `out`; false if `m` is not exactly that.
bool Unpack(Message m, int first, int count, std::vector<Message>* out) {
  proto::GatheredHeader h;
  if (!ReadHeader(m, &h) || !m.value.is_null() || h.first() != first ||
      h.headers_size() != count || h.tensor_counts_size() != count) {
    return false;
  }
  size_t next = 0;
  for (int i = 0; i < count; ++i) {
    const int k = h.tensor_counts(i);
    if (k < 0 || static_cast<size_t>(k) > m.tensors.size() - next) {
      return false;
    }
    Message one;
    one.header = h.headers(i);
    one.tensors.assign(std::make_move_iterator(m.tensors.begin() + next),
                       std::make_move_iterator(m.tensors.begin() + next + k));
    next += k;
    out->push_back(std::move(one));
  }
  return next == m.tensors.size();
}

void Round(std::unique_ptr<Holding> g, int j) {
  Op& op = *g->op;
  const int n = op.size(), r = op.rank();
  const int distance = 1 << j;
  if (distance >= n) {
    // Every rank's message, by group rank.
    std::vector<Message> all(n);
    for (int i = 0; i < n; ++i) all[Mod(r + i, n)] = std::move(g->held[i]);
    return std::move(g->then)(std::move(all));
  }
  const int count = std::min(distance, n - distance);
  const int step = FirstGatherStep(n) + j;
  op.Send(Mod(r - distance, n), step, Pack(r, g->held, count));
  const int from = Mod(r + distance, n);
  op.Recv(from, step, [g = std::move(g), j, from, count](Message m) mutable {
    Op& op = *g->op;
    if (!Unpack(std::move(m), from, count, &g->held)) {
      return op.Fail(
          op.Malformed(from, "not the messages of the ranks after it"));
    }
    Round(std::move(g), j + 1);
  });
}

}  // namespace

int GatherRounds(int n) {
  int rounds = 0;
  while ((1 << rounds) < n) ++rounds;
  return rounds;
}

void GatherAll(Op& op, Message mine, Op::OnMessages then) {
  auto g = std::make_unique<Holding>();
  g->op = op.shared_from_this();
  g->held.reserve(op.size());
  g->held.push_back(std::move(mine));
  g->then = std::move(then);
  Round(std::move(g), 0);
}

}  // namespace ferry
