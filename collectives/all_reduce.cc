// all_reduce: every rank ends with the elementwise reduction of every
// rank's tensor.
//
// Step 0 sends each rank's header (dtype, shape, reduce op) to everyone,
// together with the data itself when it is small: then each rank reduces
// the tensors in rank order (the same bits everywhere, even for floats).
// Large tensors go around the ring instead (steps 1..): a reduce-scatter
// over n segments, then an all-gather of the reduced segments, so each
// rank sends about 2× its tensor whatever the world size. The ring works
// in the output's own buffer, as Gloo's does: partial sums are computed in
// place and sent from there, and the gathered segments land in it.
//
// (Overwriting a region sent earlier is safe: the gathered segment that
// replaces it went around the ring after every rank had received this
// rank's partial of it.)
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/checks.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"
#include "proto/collectives.pb.h"

namespace ferry {
namespace algorithms {

namespace {

// The ring's state between its two halves.
struct Ringing {
  Tensor input;
  ReduceOp reduce;
  std::shared_ptr<TensorBuilder> out;
  std::vector<int64_t> offsets;  // Segment i: elements [offsets[i], [i+1]).
};

// The gathered segments into the output, then the result.
void Finish(Result<Tensor> result, std::unique_ptr<Ringing> st, Blocks got) {
  Op& op = result.op();
  const size_t item = st->input.itemsize();
  for (int b = 0; b < op.size(); ++b) {
    if (b == op.rank()) continue;
    const int64_t count = st->offsets[b + 1] - st->offsets[b];
    if (got[b].tensors.size() != 1 ||
        got[b].tensors[0].dtype() != st->input.dtype() ||
        got[b].tensors[0].numel() != count) {
      return op.Fail(op.Malformed(b, "a reduced segment of another size"));
    }
    if (count > 0) {
      std::memcpy(st->out->data() + st->offsets[b] * item,
                  got[b].tensors[0].data(), count * item);
    }
  }
  std::move(result).Set(std::move(*st->out).Build());
}

void Ring(Result<Tensor> result, Tensor input, ReduceOp reduce) {
  Op& op = result.op();
  const int n = op.size();
  absl::StatusOr<TensorBuilder> out =
      TensorBuilder::Create(input.dtype(), input.shape());
  if (!out.ok()) return op.Fail(out.status());
  auto st = std::make_unique<Ringing>(Ringing{
      input, reduce, std::make_shared<TensorBuilder>(*std::move(out)), {}});
  const int64_t numel = input.numel();
  Tensor flat = *input.Reshape({numel});
  RingReduce rs;
  rs.reduce = reduce;
  rs.into = st->out;
  rs.skip.assign(n, false);
  for (int i = 0; i <= n; ++i) st->offsets.push_back(numel * i / n);
  for (int i = 0; i < n; ++i)
    rs.blocks.push_back(*flat.Rows(st->offsets[i], st->offsets[i + 1]));
  rs.offsets = st->offsets;
  RingReduceScatter(
      op, std::move(rs),
      [result = std::move(result), st = std::move(st)](Tensor) mutable {
        Op& op = result.op();
        const int n = op.size(), r = op.rank();
        const int64_t begin = st->offsets[r], end = st->offsets[r + 1];
        if (st->reduce == ReduceOp::kAvg) {
          FinishAverage(st->input.dtype(),
                        st->out->data() + begin * st->input.itemsize(),
                        end - begin, n);
        }
        Blocks blocks(n);
        blocks[r] = Message::OfTensors({st->out->View(begin, end)});
        RingAllGather(op, n, std::move(blocks), std::vector<bool>(n, false),
                      [result = std::move(result),
                       st = std::move(st)](Blocks got) mutable {
                        Finish(std::move(result), std::move(st),
                               std::move(got));
                      });
      });
}

// Step 0 from every rank: the same op and input everywhere, then the data
// reduced here or the ring.
void Compare(Result<Tensor> result, const Tensor& input, ReduceOp reduce,
             Blocks all) {
  Op& op = result.op();
  const int n = op.size();
  std::vector<std::string> ops, metas;
  bool all_direct = true;  // Decided by what was sent, not local settings.
  for (int r = 0; r < n; ++r) {
    proto::AllReduceHeader h;
    if (!ReadHeader(all[r], &h))
      return op.Fail(op.Malformed(r, "not an all_reduce header"));
    absl::Status meta = CheckMeta(op, r, h.input());
    if (!meta.ok()) return op.Fail(meta);
    ops.push_back(h.op());
    metas.push_back(MetaString(h.input()));
    all_direct = all_direct && h.direct();
  }
  absl::Status same = CheckSame(op, ops, "op");
  if (same.ok()) same = CheckSame(op, metas, "input");
  if (!same.ok()) return op.Fail(same);
  if (!all_direct && n > 1) return Ring(std::move(result), input, reduce);
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
  absl::StatusOr<Tensor> sum = ReduceInRankOrder(parts, input, reduce);
  if (!sum.ok()) return op.Fail(sum.status());
  std::move(result).Set(reduce == ReduceOp::kAvg ? Averaged(*sum, n) : *sum);
}

}  // namespace

void AllReduce(Result<Tensor> result, AllReduceArgs args) {
  Op& op = result.op();
  absl::Status applies = CheckReduceOp(args.op, args.input.dtype());
  if (!applies.ok()) return op.Fail(op.BadInput(applies.message()));
  proto::AllReduceHeader header;
  *header.mutable_input() = MetaOf(args.input);
  header.set_op(std::string(ReduceOpName(args.op)));
  header.set_direct(static_cast<int64_t>(args.input.nbytes()) <=
                    op.config().direct_bytes);
  Message mine = Message::Of(header);
  if (header.direct()) mine.tensors = {args.input};
  op.ExchangeAll(0, mine,
                 [result = std::move(result), input = std::move(args.input),
                  reduce = args.op](Blocks all) mutable {
                   Compare(std::move(result), input, reduce, std::move(all));
                 });
}

}  // namespace algorithms
}  // namespace ferry
