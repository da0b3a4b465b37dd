// reduce_scatter: rank r ends with the reduction over ranks of every rank's
// r-th block.
//
// Step 0 sends each rank the metadata of all n blocks and the reduce op
// (ReduceScatterHeader, so every rank checks every rank's input
// identically), with the block destined to it when that block is small;
// small blocks are reduced in rank order where they land. Large blocks
// travel the ring as partial sums (steps 1..).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring.h"
#include "collectives/op/checks.h"
#include "proto/collectives.pb.h"

namespace ferry {
namespace algorithms {

namespace {

// Every rank's header: one description per block, the same op and blocks
// everywhere. `skip[b]`: block b went direct (every rank sent it so).
absl::Status CheckHeaders(const Op& op, const Blocks& got,
                          std::vector<bool>* skip) {
  const int n = op.size();
  std::vector<std::string> ops(n);
  std::vector<std::vector<std::string>> metas(n);  // By block.
  skip->assign(n, true);
  for (int r = 0; r < n; ++r) {
    proto::ReduceScatterHeader h;
    if (!ReadHeader(got[r], &h) || h.blocks_size() != n ||
        h.direct_size() != n) {
      return op.Malformed(r, "expected one block description per rank");
    }
    for (int b = 0; b < n; ++b) {
      absl::Status meta = CheckMeta(op, r, h.blocks(b));
      if (!meta.ok()) return meta;
      metas[b].push_back(MetaString(h.blocks(b)));
      (*skip)[b] = (*skip)[b] && h.direct(b);
    }
    ops[r] = h.op();
  }
  absl::Status same = CheckSame(op, ops, "op");
  for (int b = 0; b < n && same.ok(); ++b)
    same = CheckSame(op, metas[b], absl::StrCat("input[", b, "]"));
  return same;
}

// This rank's block summed (from the ring, or `parts` if it went direct),
// averaged for avg, in the caller's output if there is one.
void Finish(Result<Tensor> result, const ReduceScatterArgs& args,
            const std::vector<Tensor>& parts, bool direct, Tensor ringed) {
  Op& op = result.op();
  const Tensor& like = args.blocks[op.rank()];
  Tensor out = std::move(ringed);
  if (direct && args.into != nullptr) {
    ReduceInRankOrderTo(parts, args.op, args.into->data());
    out = HeldBy(args.into);
  } else if (direct) {
    absl::StatusOr<Tensor> sum = ReduceInRankOrder(parts, like, args.op);
    if (!sum.ok()) return op.Fail(sum.status());
    out = *std::move(sum);
  } else if (args.into != nullptr) {
    // From the ring: there already, but for a group of one.
    absl::StatusOr<Tensor> placed = Place(op, args.into, out, "output");
    if (!placed.ok()) return op.Fail(placed.status());
    out = *std::move(placed);
  }
  if (args.op != ReduceOp::kAvg) return std::move(result).Set(std::move(out));
  if (args.into == nullptr) {
    return std::move(result).Set(Averaged(out, op.size()));
  }
  FinishAverage(out.dtype(), args.into->data(), out.numel(), op.size());
  std::move(result).Set(std::move(out));
}

void Compare(Result<Tensor> result, ReduceScatterArgs args, Blocks got) {
  Op& op = result.op();
  const int n = op.size(), me = op.rank();
  std::vector<bool> skip;
  absl::Status ok = CheckHeaders(op, got, &skip);
  if (!ok.ok()) return op.Fail(ok);
  // The direct parts of this rank's block, checked before the ring.
  std::vector<Tensor> parts(n);
  if (skip[me]) {
    for (int r = 0; r < n; ++r) {
      if (r == me) {
        parts[r] = args.blocks[me];
      } else if (got[r].tensors.size() != 1 ||
                 !Like(got[r].tensors[0], args.blocks[me])) {
        return op.Fail(op.Malformed(
            r, absl::StrCat("expected ", args.blocks[me].DebugString())));
      } else {
        parts[r] = std::move(got[r].tensors[0]);
      }
    }
  }
  RingReduce rs;
  rs.blocks = args.blocks;
  rs.skip = skip;
  rs.reduce = args.op;
  rs.own_into = args.into;
  RingReduceScatter(
      op, std::move(rs),
      [result = std::move(result), args = std::move(args),
       parts = std::move(parts),
       direct = static_cast<bool>(skip[me])](Tensor ringed) mutable {
        Finish(std::move(result), args, parts, direct, std::move(ringed));
      });
}

}  // namespace

void ReduceScatter(Result<Tensor> result, ReduceScatterArgs args) {
  Op& op = result.op();
  const int n = op.size();
  absl::Status ok = CheckTensorList(op, args.blocks, "input");
  if (!ok.ok()) return op.Fail(ok);
  absl::Status applies = CheckReduceOp(args.op, args.blocks[0].dtype());
  if (!applies.ok()) return op.Fail(op.BadInput(applies.message()));
  absl::Status fits =
      CheckInto(op, args.into, args.blocks[op.rank()], "output");
  if (!fits.ok()) return op.Fail(fits);
  proto::ReduceScatterHeader header;
  std::vector<bool> direct(n);
  for (int b = 0; b < n; ++b) {
    direct[b] = static_cast<int64_t>(args.blocks[b].nbytes()) <=
                op.config().direct_bytes;
    *header.add_blocks() = MetaOf(args.blocks[b]);
    header.add_direct(direct[b]);
  }
  header.set_op(std::string(ReduceOpName(args.op)));
  // Built before the call, which moves `args` on.
  std::vector<Message> messages(n, Message{header.SerializeAsString()});
  for (int to = 0; to < n; ++to) {
    if (direct[to]) messages[to].tensors = {args.blocks[to]};
  }
  op.ExchangeEach(
      0, [&](int to) { return std::move(messages[to]); },
      [result = std::move(result), args = std::move(args)](Blocks got) mutable {
        Compare(std::move(result), std::move(args), std::move(got));
      });
}

}  // namespace algorithms
}  // namespace ferry
