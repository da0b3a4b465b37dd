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
  Op::Landings land;
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
    std::optional<TensorLanding> at;
    if (static_cast<size_t>(in) < g->land.size()) at = std::move(g->land[in]);
    op.Recv(
        Mod(r - 1, n), step,
        [g = std::move(g), s, in](Message m) mutable {
          g->blocks[in] = std::move(m);
          GatherFrom(std::move(g), s + 1);
        },
        std::move(at));
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

// Where this rank's sum of block b goes: its region of args.into, or a
// new buffer. The partial from the previous rank is received there, so
// Combine reduces in place (the same operands in the same order).
struct Target {
  std::shared_ptr<TensorBuilder> fresh;  // Null: in args.into.
  Tensor view;                           // The region of args.into.
  TensorLanding landing;
};

absl::StatusOr<Target> TargetFor(RingReduce& args, int b) {
  const Tensor& mine = args.blocks[b];
  Target t;
  if (args.into != nullptr) {
    const int64_t begin = args.offsets[b], end = begin + mine.numel();
    t.view = args.into->View(begin, end);
    t.landing = args.into->Landing(begin, end);
    return t;
  }
  FERRY_ASSIGN_OR_RETURN(TensorBuilder fresh,
                         TensorBuilder::Create(mine.dtype(), mine.shape()));
  t.fresh = std::make_shared<TensorBuilder>(std::move(fresh));
  t.landing = t.fresh->Landing(0, mine.numel());
  return t;
}

// `mine` ⊕ `theirs` into `t`.
Tensor Combine(ReduceOp reduce, const Tensor& mine, const Tensor& theirs,
               Target t) {
  ReduceTo(reduce, mine.dtype(), t.landing.data, mine.data(), theirs.data(),
           mine.numel());
  return t.fresh != nullptr ? std::move(*t.fresh).Build() : t.view;
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
    absl::StatusOr<Target> target = TargetFor(st->args, in);
    if (!target.ok()) return op.Fail(target.status());
    TensorLanding at = target->landing;
    op.Recv(
        prev, step,
        [st = std::move(st), s, in, prev,
         target = *std::move(target)](Message m) mutable {
          const Tensor& mine = st->args.blocks[in];
          Op& op = *st->op;
          if (m.tensors.size() != 1 || !Like(m.tensors[0], mine)) {
            return op.Fail(op.Malformed(
                prev, absl::StrCat("expected ", mine.DebugString())));
          }
          st->partial =
              Combine(st->args.reduce, mine, m.tensors[0], std::move(target));
          ReduceFrom(std::move(st), s + 1);
        },
        std::move(at));
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
                   absl::AnyInvocable<void(Blocks) &&> then,
                   Op::Landings land) {
  GatherFrom(std::make_unique<Gathering>(
                 Gathering{op.shared_from_this(), first_step, std::move(blocks),
                           std::move(skip), std::move(then), std::move(land)}),
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
