#include "collectives/algorithms/ring.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/fold.h"
#include "collectives/algorithms/rank_math.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {

namespace {

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
// new buffer. The partial from the previous rank is folded into it as it
// arrives (Fold) — or, if it comes before its landing was offered, is
// received apart and Combine reduces it there (the same operands in the
// same order).
struct Target {
  std::shared_ptr<TensorBuilder> fresh;    // Null: in args.into.
  Tensor view;                             // The region of args.into.
  char* out = nullptr;                     // Where the sum is written.
  std::shared_ptr<TensorBuilder> scratch;  // Where the partial lands, if apart.
  TensorLanding landing;
  std::shared_ptr<Fold> fold;  // The landing's writer, if it folds.
};

absl::StatusOr<Target> TargetFor(RingReduce& args, int b, bool own) {
  const Tensor& mine = args.blocks[b];
  Target t;
  const bool in_into =
      args.into != nullptr && !(own && args.own_into != nullptr);
  if (own && args.own_into != nullptr) {
    t.view = *args.own_into->View(0, mine.numel()).Reshape(mine.shape());
    t.landing = TensorLanding::Within(*args.own_into, 0, mine.numel());
  } else if (in_into) {
    const int64_t begin = args.offsets[b], end = begin + mine.numel();
    t.view = args.into->View(begin, end);
    t.landing = TensorLanding::Within(*args.into, begin, end);
  } else {
    FERRY_ASSIGN_OR_RETURN(TensorBuilder fresh,
                           TensorBuilder::Create(mine.dtype(), mine.shape()));
    t.fresh = std::make_shared<TensorBuilder>(std::move(fresh));
    t.landing = TensorLanding::Within(*t.fresh, 0, mine.numel());
  }
  t.out = t.landing.data;
  if (Fold::Foldable(mine)) {
    t.fold = std::make_shared<Fold>(args.reduce, mine, t.out);
    t.landing.writer = t.fold;
    return t;
  }
  // Unfolded: the partial is copied where it lands, so not over `mine`.
  if (in_into && args.into_is_input) {
    FERRY_ASSIGN_OR_RETURN(TensorBuilder scratch,
                           TensorBuilder::Create(mine.dtype(), mine.shape()));
    t.scratch = std::make_shared<TensorBuilder>(std::move(scratch));
    t.landing = TensorLanding::Within(*t.scratch, 0, mine.numel());
  }
  return t;
}

// `mine` ⊕ `theirs` into `t` (`theirs` may be where it lands, `mine` may
// be `t`'s region itself: ReduceTo allows either), unless the fold did it
// as `theirs` arrived.
Tensor Combine(ReduceOp reduce, const Tensor& mine, const Tensor& theirs,
               Target t) {
  if (t.fold == nullptr || !t.fold->done()) {
    ReduceTo(reduce, mine.dtype(), t.out, mine.data(), theirs.data(),
             mine.numel());
  }
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
    absl::StatusOr<Target> target = TargetFor(st->args, in, in == r);
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

namespace {

// Elements folded at once when `out` is one of the parts.
constexpr int64_t kFoldBytes = 64 << 10;

// The rank-order fold when `out` is parts[k] for some k >= 2 (writing
// p0 ⊕ p1 there first would lose parts[k]): block by block through a
// small buffer, so each part's block is read before `out`'s is written.
void FoldInBlocks(const std::vector<Tensor>& parts, ReduceOp reduce,
                  char* out) {
  const Tensor& first = parts[0];
  const int64_t item = static_cast<int64_t>(first.itemsize());
  const int64_t block = std::max<int64_t>(1, kFoldBytes / item);
  std::vector<char> buffer(std::min(block, first.numel()) * item);
  for (int64_t at = 0; at < first.numel(); at += block) {
    const int64_t count = std::min(block, first.numel() - at);
    const int64_t offset = at * item;
    ReduceTo(reduce, first.dtype(), buffer.data(), parts[0].data() + offset,
             parts[1].data() + offset, count);
    for (size_t r = 2; r < parts.size(); ++r) {
      ReduceInto(reduce, first.dtype(), buffer.data(), parts[r].data() + offset,
                 count);
    }
    std::memcpy(out + offset, buffer.data(), count * item);
  }
}

}  // namespace

void ReduceInRankOrderTo(const std::vector<Tensor>& parts, ReduceOp reduce,
                         char* out) {
  if (parts.empty() || parts[0].nbytes() == 0) return;
  const Tensor& first = parts[0];
  if (parts.size() == 1) {
    if (first.data() != out) std::memcpy(out, first.data(), first.nbytes());
    return;
  }
  // out = p0 ⊕ p1 is elementwise, so `out` may be p0 or p1; a later part
  // would be overwritten before it is read.
  for (size_t r = 2; r < parts.size(); ++r) {
    if (parts[r].data() == out) return FoldInBlocks(parts, reduce, out);
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
