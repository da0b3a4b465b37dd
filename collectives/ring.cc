#include "collectives/ring.h"

#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

int Mod(int a, int n) { return ((a % n) + n) % n; }

struct Gathering {
  std::shared_ptr<Op> op;
  int first_step;
  Blocks blocks;
  std::vector<bool> skip;
  absl::AnyInvocable<void(Blocks) &&> then;
};

// From step `s` on. At step s each rank forwards the block it got at step
// s-1 (its own at step 0), so after n-1 steps every block went around.
void GatherFrom(std::unique_ptr<Gathering> g, int s) {
  Op& op = *g->op;
  const int n = op.size(), r = op.rank();
  for (; s + 1 < n; ++s) {
    const int out = Mod(r - s, n), in = Mod(r - s - 1, n);
    const int step = g->first_step + s;
    if (!g->skip[out]) op.Send(Mod(r + 1, n), step, g->blocks[out]);
    if (g->skip[in]) continue;
    op.Recv(Mod(r - 1, n), step, [g = std::move(g), s, in](Message m) mutable {
      g->blocks[in] = std::move(m);
      GatherFrom(std::move(g), s + 1);
    });
    return;
  }
  std::move(g->then)(std::move(g->blocks));
}

struct Reducing {
  std::shared_ptr<Op> op;
  RingReduce args;
  Tensor partial;
  absl::AnyInvocable<void(Tensor) &&> then;
};

// `mine` ⊕ `theirs`, in args.into or a new tensor.
absl::StatusOr<Tensor> Combine(const RingReduce& args, int b,
                               const Tensor& mine, const Tensor& theirs) {
  Tensor out;
  char* at;
  std::optional<TensorBuilder> fresh;
  if (args.into != nullptr) {
    out = args.into->View(args.offsets[b], args.offsets[b] + mine.numel());
    at = args.into->data() + args.offsets[b] * mine.itemsize();
  } else {
    FERRY_ASSIGN_OR_RETURN(fresh,
                           TensorBuilder::Create(mine.dtype(), mine.shape()));
    at = fresh->data();
  }
  ReduceTo(args.reduce, mine.dtype(), at, mine.data(), theirs.data(),
           mine.numel());
  if (fresh) out = std::move(*fresh).Build();
  return out;
}

// From step `s` on. At step s a rank sends its partial of block r-s-1 (its
// own contribution at step 0) and adds its contribution to the partial of
// block r-s-2 it receives; the partial of block r arrives last, with every
// other rank's contribution in it.
void ReduceFrom(std::unique_ptr<Reducing> st, int s) {
  Op& op = *st->op;
  const RingReduce& a = st->args;
  const int n = op.size(), r = op.rank(), prev = Mod(r - 1, n);
  for (; s + 1 < n; ++s) {
    const int out = Mod(r - s - 1, n), in = Mod(r - s - 2, n);
    if (!a.skip[out]) {
      op.Send(Mod(r + 1, n), a.first_step + s,
              Message::OfTensors({s == 0 ? a.blocks[out] : st->partial}));
    }
    if (a.skip[in]) continue;
    const int step = a.first_step + s;
    op.Recv(prev, step, [st = std::move(st), s, in, prev](Message m) mutable {
      const Tensor& mine = st->args.blocks[in];
      Op& op = *st->op;
      if (m.tensors.size() != 1 || !Like(m.tensors[0], mine)) {
        return op.Fail(
            op.Malformed(prev, absl::StrCat("expected ", mine.DebugString())));
      }
      absl::StatusOr<Tensor> sum = Combine(st->args, in, mine, m.tensors[0]);
      if (!sum.ok()) return op.Fail(sum.status());
      st->partial = *std::move(sum);
      ReduceFrom(std::move(st), s + 1);
    });
    return;
  }
  Tensor mine;
  if (!a.skip[r]) mine = n == 1 ? a.blocks[0] : st->partial;
  std::move(st->then)(std::move(mine));
}

}  // namespace

void JoinAtRoot(Op& op, int root, int step,
                absl::AnyInvocable<void() &&> then) {
  const int n = op.size();
  if (op.rank() != root) {
    op.Send(root, step, Message());
    return std::move(then)();
  }
  std::vector<int> from;
  for (int k = 1; k < n; ++k) from.push_back((root + k) % n);
  op.RecvFrom(std::move(from), step,
              [then = std::move(then)](std::vector<Message>) mutable {
                std::move(then)();
              });
}

void RingAllGather(Op& op, int first_step, Blocks blocks,
                   std::vector<bool> skip,
                   absl::AnyInvocable<void(Blocks) &&> then) {
  GatherFrom(std::make_unique<Gathering>(
                 Gathering{op.shared_from_this(), first_step, std::move(blocks),
                           std::move(skip), std::move(then)}),
             0);
}

void RingReduceScatter(Op& op, RingReduce args,
                       absl::AnyInvocable<void(Tensor) &&> then) {
  ReduceFrom(
      std::make_unique<Reducing>(Reducing{
          op.shared_from_this(), std::move(args), Tensor(), std::move(then)}),
      0);
}

bool Like(const Tensor& t, const Tensor& like) {
  return t.dtype() == like.dtype() && t.numel() == like.numel();
}

void ReduceInRankOrderTo(const std::vector<Tensor>& parts, ReduceOp reduce,
                         char* out) {
  if (parts.empty() || parts[0].nbytes() == 0) return;
  const Tensor& first = parts[0];
  if (parts.size() == 1) {
    std::memcpy(out, first.data(), first.nbytes());
    return;
  }
  ReduceTo(reduce, first.dtype(), out, first.data(), parts[1].data(),
           first.numel());
  for (size_t r = 2; r < parts.size(); ++r) {
    ReduceInto(reduce, first.dtype(), out, parts[r].data(), first.numel());
  }
}

absl::StatusOr<Tensor> ReduceInRankOrder(const std::vector<Tensor>& parts,
                                         const Tensor& like, ReduceOp reduce) {
  FERRY_ASSIGN_OR_RETURN(TensorBuilder acc,
                         TensorBuilder::Create(like.dtype(), like.shape()));
  ReduceInRankOrderTo(parts, reduce, acc.data());
  return std::move(acc).Build();
}

}  // namespace ferry
