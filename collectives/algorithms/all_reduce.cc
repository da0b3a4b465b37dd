// all_reduce: every rank ends with the elementwise reduction of every
// rank's tensor.
//
// First every rank's header (dtype, shape, reduce op) reaches every rank,
// in ceil(log2 n) rounds (gather_all.h), together with the data itself
// when it is small: then each rank reduces the tensors in rank order (the
// same bits everywhere, even for floats), having sent log2(n) messages
// instead of n-1. Medium tensors on three ranks or more are split instead:
// step 0 carries segment `to` of the input to rank `to`, which reduces its
// segment in rank order (the same bits as the whole-input form) and sends
// it to everyone at step 1 — as many bytes as the ring, in two rounds
// instead of 2(n-1). Large tensors go around the ring instead (steps 1..):
// a reduce-scatter over n segments, then an all-gather of the reduced
// segments, so each rank sends about 2× its tensor whatever the world
// size. Above ring_piece_bytes the tensor is cut into pieces, each its own
// ring on steps of its own, progressing independently (a pipeline). The
// ring works in the output's own buffer, as Gloo's does: partial sums are
// computed in place and sent from there, and the gathered segments land in
// it.
//
// The form is chosen from every rank's header, so ranks whose inputs
// differ all report the same mismatch whatever their sizes.
//
// (Overwriting a region sent earlier is safe: the gathered segment that
// replaces it went around the ring after every rank had received this
// rank's partial of it.)
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/gather_all.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring.h"
#include "collectives/op/checks.h"
#include "collectives/transport/config.h"
#include "proto/collectives.pb.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {
namespace algorithms {

namespace {

// What the pieces of one ring all_reduce share. Pieces progress on their
// own (their continuations may run at once on different threads): each
// writes only its own elements of `out`, and the last one done sets the
// result.
struct Ringing {
  Tensor input;
  ReduceOp reduce;
  std::shared_ptr<TensorBuilder> out;
  bool in_place = false;  // `out` is the input's memory.
  absl::Mutex mu;
  int left ABSL_GUARDED_BY(mu);
  std::optional<Result<Tensor>> result ABSL_GUARDED_BY(mu);
};

// One piece: elements [begin, end) of the flat tensor, in n segments.
struct Piece {
  std::shared_ptr<Ringing> ring;
  std::vector<int64_t> offsets;  // Segment i: elements [offsets[i], [i+1]).
};

// How many rings a tensor of `bytes` goes around in (pipelining).
int PiecesFor(const Op& op, int64_t bytes) {
  const int64_t piece = op.config().ring_piece_bytes;
  if (piece <= 0 || bytes <= piece) return 1;
  return static_cast<int>(std::min<int64_t>(kMaxRingPieces, bytes / piece));
}

// Elements [begin, end) cut into `n` segments: segment i is [offsets[i],
// offsets[i+1]).
std::vector<int64_t> Segments(int64_t begin, int64_t end, int n) {
  std::vector<int64_t> offsets;
  for (int i = 0; i <= n; ++i) offsets.push_back(begin + (end - begin) * i / n);
  return offsets;
}

// Where the other ranks' reduced segments belong in `out` (segment b:
// elements [offsets[b], offsets[b+1]), from rank b), so they are received
// there.
Op::Landings SegmentLandings(const Op& op, const std::vector<int64_t>& offsets,
                             TensorBuilder& out) {
  Op::Landings at(op.size());
  for (int b = 0; b < op.size(); ++b) {
    if (b != op.rank())
      at[b] = TensorLanding::Within(out, offsets[b], offsets[b + 1]);
  }
  return at;
}

// The other ranks' reduced segments into `out`: those not received there
// already (SegmentLandings) are copied.
absl::Status CopySegments(const Op& op, const std::vector<int64_t>& offsets,
                          const Blocks& got, TensorBuilder& out) {
  const size_t item = ItemSize(out.dtype());
  for (int b = 0; b < op.size(); ++b) {
    if (b == op.rank()) continue;
    const int64_t count = offsets[b + 1] - offsets[b];
    if (got[b].tensors.size() != 1 ||
        got[b].tensors[0].dtype() != out.dtype() ||
        got[b].tensors[0].numel() != count) {
      return op.Malformed(b, "a reduced segment of another size");
    }
    char* at = out.data() + offsets[b] * item;
    if (count > 0 && got[b].tensors[0].data() != at) {
      std::memcpy(at, got[b].tensors[0].data(), count * item);
    }
  }
  return absl::OkStatus();
}

// The gathered segments of `piece` into the output; the result once every
// piece is in.
void Finish(Op& op, const Piece& piece, Blocks got) {
  Ringing& st = *piece.ring;
  absl::Status copied = CopySegments(op, piece.offsets, got, *st.out);
  if (!copied.ok()) return op.Fail(copied);
  std::optional<Result<Tensor>> result;
  {
    absl::MutexLock lock(&st.mu);
    if (--st.left > 0) return;
    result.swap(st.result);
  }
  std::move(*result).Set(std::move(*st.out).Build());
}

// Piece `p` of `count` around the ring: a reduce-scatter of its segments,
// then an all-gather of the reduced ones, on steps of its own.
void RingPiece(Op& op, std::shared_ptr<Ringing> ring, int p, int count) {
  const int n = op.size();
  const int64_t numel = ring->input.numel();
  const int64_t begin = numel * p / count, end = numel * (p + 1) / count;
  Piece piece{std::move(ring), Segments(begin, end, n)};
  Tensor flat = *piece.ring->input.Reshape({numel});
  RingReduce rs;
  rs.first_step = 1 + p * 2 * (n - 1);
  rs.reduce = piece.ring->reduce;
  rs.into = piece.ring->out;
  rs.into_is_input = piece.ring->in_place;
  rs.skip.assign(n, false);
  for (int i = 0; i < n; ++i) {
    rs.blocks.push_back(*flat.Rows(piece.offsets[i], piece.offsets[i + 1]));
  }
  rs.offsets = piece.offsets;
  const int gather_step = rs.first_step + n - 1;
  RingReduceScatter(
      op, std::move(rs),
      [op = op.shared_from_this(), piece = std::move(piece),
       gather_step](Tensor) mutable {
        const int n = op->size(), r = op->rank();
        Ringing& st = *piece.ring;
        const int64_t b = piece.offsets[r], e = piece.offsets[r + 1];
        if (st.reduce == ReduceOp::kAvg) {
          FinishAverage(st.input.dtype(),
                        st.out->data() + b * st.input.itemsize(), e - b, n);
        }
        Blocks blocks(n);
        blocks[r] = Message::OfTensors({st.out->View(b, e)});
        Op::Landings land = SegmentLandings(*op, piece.offsets, *st.out);
        RingAllGather(
            *op, gather_step, std::move(blocks), std::vector<bool>(n, false),
            [op, piece = std::move(piece)](Blocks got) mutable {
              Finish(*op, piece, std::move(got));
            },
            std::move(land));
      });
}

// The result's buffer: the caller's (`into`), or a new one like `input`.
absl::StatusOr<std::shared_ptr<TensorBuilder>> Output(
    const Tensor& input, std::shared_ptr<TensorBuilder> into) {
  if (into != nullptr) return into;
  absl::StatusOr<TensorBuilder> built =
      TensorBuilder::Create(input.dtype(), input.shape());
  if (!built.ok()) return built.status();
  return std::make_shared<TensorBuilder>(*std::move(built));
}

bool InPlace(const Tensor& input, const std::shared_ptr<TensorBuilder>& into) {
  return into != nullptr && input.nbytes() > 0 && into->data() == input.data();
}

void ReduceSegment(Result<Tensor> result, const Tensor& input, ReduceOp reduce,
                   std::shared_ptr<TensorBuilder> into, Blocks all);

// Split form: step 0 carries segment `to` of the input to rank `to`;
// `all[r]` is then rank r's part of this rank's segment. Reduces it into
// the output, sends it to everyone as step 1.
void Split(Result<Tensor> result, const Tensor& input, ReduceOp reduce,
           std::shared_ptr<TensorBuilder> into) {
  Op& op = result.op();
  const std::vector<int64_t> offsets = Segments(0, input.numel(), op.size());
  const Tensor flat = *input.Reshape({input.numel()});
  op.ExchangeEach(
      0,
      [&](int to) {
        return Message::OfTensors({*flat.Rows(offsets[to], offsets[to + 1])});
      },
      [result = std::move(result), input, reduce,
       into = std::move(into)](Blocks all) mutable {
        ReduceSegment(std::move(result), input, reduce, std::move(into),
                      std::move(all));
      });
}

// (In place, the segments overwritten were sent to their reducers at step
// 0, and theirs come back only once those had every rank's.)
void ReduceSegment(Result<Tensor> result, const Tensor& input, ReduceOp reduce,
                   std::shared_ptr<TensorBuilder> into, Blocks all) {
  Op& op = result.op();
  const int n = op.size(), me = op.rank();
  const std::vector<int64_t> offsets = Segments(0, input.numel(), n);
  const int64_t b = offsets[me], e = offsets[me + 1];
  Tensor mine = *input.Reshape({input.numel()})->Rows(b, e);
  std::vector<Tensor> parts(n);
  for (int r = 0; r < n; ++r) {
    if (r == me) {
      parts[r] = mine;
    } else if (all[r].tensors.size() != 1 || !Like(all[r].tensors[0], mine)) {
      return op.Fail(op.Malformed(r, "a segment of another size"));
    } else {
      parts[r] = std::move(all[r].tensors[0]);
    }
  }
  absl::StatusOr<std::shared_ptr<TensorBuilder>> built =
      Output(input, std::move(into));
  if (!built.ok()) return op.Fail(built.status());
  std::shared_ptr<TensorBuilder> out = *std::move(built);
  char* at = out->data() + b * input.itemsize();
  ReduceInRankOrderTo(parts, reduce, at);
  if (reduce == ReduceOp::kAvg) FinishAverage(input.dtype(), at, e - b, n);
  const Message reduced = Message::OfTensors({out->View(b, e)});
  Op::Landings land = SegmentLandings(op, offsets, *out);
  op.ExchangeAll(
      1, reduced,
      [result = std::move(result), offsets,
       out = std::move(out)](Blocks got) mutable {
        Op& op = result.op();
        absl::Status copied = CopySegments(op, offsets, got, *out);
        if (!copied.ok()) return op.Fail(copied);
        std::move(result).Set(std::move(*out).Build());
      },
      std::move(land));
}

void Ring(Result<Tensor> result, Tensor input, ReduceOp reduce,
          std::shared_ptr<TensorBuilder> into) {
  Op& op = result.op();
  const bool in_place = InPlace(input, into);
  absl::StatusOr<std::shared_ptr<TensorBuilder>> out =
      Output(input, std::move(into));
  if (!out.ok()) return op.Fail(out.status());
  const int count = PiecesFor(op, static_cast<int64_t>(input.nbytes()));
  auto ring = std::make_shared<Ringing>();
  ring->input = std::move(input);
  ring->reduce = reduce;
  ring->in_place = in_place;
  ring->out = *std::move(out);
  {
    absl::MutexLock lock(&ring->mu);
    ring->left = count;
    ring->result.emplace(std::move(result));
  }
  for (int p = 0; p < count; ++p) RingPiece(op, ring, p, count);
}

// Every rank's header (and small input): the same op and input
// everywhere, then the data reduced here, the split form or the ring.
void Compare(Result<Tensor> result, const Tensor& input, ReduceOp reduce,
             std::shared_ptr<TensorBuilder> into, Blocks all) {
  Op& op = result.op();
  const int n = op.size();
  std::vector<std::string> ops, metas;
  // Decided by what was sent, not local settings.
  bool all_direct = true, all_split = true, none_split = true;
  for (int r = 0; r < n; ++r) {
    proto::AllReduceHeader h;
    if (!ReadHeader(all[r], &h))
      return op.Fail(op.Malformed(r, "not an all_reduce header"));
    absl::Status meta = CheckMeta(op, r, h.input());
    if (!meta.ok()) return op.Fail(meta);
    ops.push_back(h.op());
    metas.push_back(MetaString(h.input()));
    all_direct = all_direct && h.direct();
    all_split = all_split && h.split();
    none_split = none_split && !h.split();
  }
  absl::Status same = CheckSame(op, ops, "op");
  if (same.ok()) same = CheckSame(op, metas, "input");
  if (!same.ok()) return op.Fail(same);
  if (n > 1 && !(all_direct && (all_split || none_split))) {
    return Ring(std::move(result), input, reduce, std::move(into));
  }
  if (all_split)
    return Split(std::move(result), input, reduce, std::move(into));
  std::vector<Tensor> parts(n);
  for (int r = 0; r < n; ++r) {
    if (r == op.rank()) {
      parts[r] = input;
    } else if (all[r].tensors.size() != 1 || !Like(all[r].tensors[0], input)) {
      return op.Fail(
          op.Malformed(r, absl::StrCat("expected ", input.DebugString())));
    } else {
      parts[r] = std::move(all[r].tensors[0]);
    }
  }
  if (into == nullptr) {
    absl::StatusOr<Tensor> sum = ReduceInRankOrder(parts, input, reduce);
    if (!sum.ok()) return op.Fail(sum.status());
    return std::move(result).Set(reduce == ReduceOp::kAvg ? Averaged(*sum, n)
                                                          : *sum);
  }
  // Into the caller's memory; if that is the input, only once the others
  // have it (it was sent from there).
  const bool in_place = InPlace(input, into);
  auto write = [result = std::move(result), parts = std::move(parts), reduce,
                into = std::move(into)]() mutable {
    ReduceInRankOrderTo(parts, reduce, into->data());
    if (reduce == ReduceOp::kAvg) {
      FinishAverage(into->dtype(), into->data(), into->numel(),
                    result.op().size());
    }
    std::move(result).Set(HeldBy(into));
  };
  if (!in_place) return write();
  op.WhenSent(std::move(write));
}

}  // namespace

void AllReduce(Result<Tensor> result, AllReduceArgs args) {
  Op& op = result.op();
  absl::Status applies = CheckReduceOp(args.op, args.input.dtype());
  if (!applies.ok()) return op.Fail(op.BadInput(applies.message()));
  absl::Status fits = CheckInto(op, args.into, args.input, "output");
  if (!fits.ok()) return op.Fail(fits);
  proto::AllReduceHeader header;
  *header.mutable_input() = MetaOf(args.input);
  header.set_op(std::string(ReduceOpName(args.op)));
  const int64_t bytes = static_cast<int64_t>(args.input.nbytes());
  const CollectiveConfig& config = op.config();
  header.set_direct(bytes <= config.direct_bytes);
  header.set_split(header.direct() && op.size() >= 3 &&
                   bytes >= config.split_bytes);
  Message mine = Message::Of(header);
  // The split form sends its segments after the headers (Split).
  if (header.direct() && !header.split()) mine.tensors = {args.input};
  GatherAll(
      op, std::move(mine),
      [result = std::move(result), input = std::move(args.input),
       reduce = args.op, into = std::move(args.into)](Blocks all) mutable {
        Compare(std::move(result), input, reduce, std::move(into),
                std::move(all));
      });
}

}  // namespace algorithms
}  // namespace ferry
