// reduce: rank dst ends with the elementwise reduction of every rank's
// tensor; the other ranks' results are their inputs, unchanged.
//
// Direct: every other rank sends dst its header (dtype, shape, reduce op)
// with its tensor (step 0). dst checks every rank's header against its own
// (the first that differs is named, and the op fails on every rank
// alike), reduces in rank order — the same bits as all_reduce — and
// releases the others (step 1), so no rank returns unless every rank
// came. dst's output may be its own input: that input is sent nowhere.
// (dst receives n-1 tensors; a ring reduce-scatter followed by a gather
// would spread that over the ranks for large tensors on many ranks.)
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/reduce.h"
#include "collectives/algorithms/ring.h"
#include "collectives/op/checks.h"
#include "proto/collectives.pb.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {
namespace algorithms {

namespace {

proto::AllReduceHeader HeaderOf(const ReduceArgs& args) {
  proto::AllReduceHeader header;
  *header.mutable_input() = MetaOf(args.input);
  header.set_op(std::string(ReduceOpName(args.op)));
  header.set_direct(true);
  return header;
}

// Every rank's header and tensor (dst's own in `got[dst]`), checked: the
// tensors in rank order.
absl::StatusOr<std::vector<Tensor>> Parts(const Op& op, const ReduceArgs& args,
                                          std::vector<Message>& got) {
  const int n = op.size();
  std::vector<std::string> ops, metas;
  std::vector<Tensor> parts(n);
  for (int r = 0; r < n; ++r) {
    proto::AllReduceHeader h;
    if (!ReadHeader(got[r], &h)) return op.Malformed(r, "not a reduce header");
    absl::Status meta = CheckMeta(op, r, h.input());
    if (!meta.ok()) return meta;
    ops.push_back(h.op());
    metas.push_back(MetaString(h.input()));
  }
  absl::Status same = CheckSame(op, ops, "op");
  if (same.ok()) same = CheckSame(op, metas, "input");
  if (!same.ok()) return same;
  for (int r = 0; r < n; ++r) {
    if (r == op.rank()) {
      parts[r] = args.input;
    } else if (got[r].tensors.size() != 1 ||
               !Like(got[r].tensors[0], args.input)) {
      return op.Malformed(r,
                          absl::StrCat("expected ", args.input.DebugString()));
    } else {
      parts[r] = std::move(got[r].tensors[0]);
    }
  }
  return parts;
}

// At dst, with every rank's message: the reduction into the output, then
// the others released.
void AtRoot(Result<Tensor> result, const ReduceArgs& args,
            std::vector<Message> got) {
  Op& op = result.op();
  const int n = op.size();
  got[op.rank()] = Message::Of(HeaderOf(args));
  absl::StatusOr<std::vector<Tensor>> parts = Parts(op, args, got);
  if (!parts.ok()) return op.Fail(parts.status());
  TensorOut out = args.into;
  if (out == nullptr) {
    absl::StatusOr<TensorBuilder> built =
        TensorBuilder::Create(args.input.dtype(), args.input.shape());
    if (!built.ok()) return op.Fail(built.status());
    out = std::make_shared<TensorBuilder>(*std::move(built));
  }
  ReduceInRankOrderTo(*parts, args.op, out->data());
  if (args.op == ReduceOp::kAvg) {
    FinishAverage(out->dtype(), out->data(), out->numel(), n);
  }
  for (int k = 1; k < n; ++k) op.Send((op.rank() + k) % n, 1, Message());
  std::move(result).Set(HeldBy(out));
}

}  // namespace

void Reduce(Result<Tensor> result, ReduceArgs args) {
  Op& op = result.op();
  const int n = op.size(), dst = args.dst;
  absl::Status ok = CheckRankParam(op, dst, "dst");
  if (!ok.ok()) return op.Fail(ok);
  ok = CheckReduceOp(args.op, args.input.dtype());
  if (!ok.ok()) return op.Fail(op.BadInput(ok.message()));
  if (op.rank() == dst) ok = CheckInto(op, args.into, args.input, "output");
  if (!ok.ok()) return op.Fail(ok);
  if (op.rank() != dst) {
    op.Send(dst, 0, Message::Of(HeaderOf(args), {args.input}));
    return op.Recv(
        dst, 1,
        [result = std::move(result), input = std::move(args.input)](
            Message) mutable { std::move(result).Set(std::move(input)); });
  }
  std::vector<int> from;
  for (int k = 1; k < n; ++k) from.push_back((dst + k) % n);
  op.RecvFrom(std::move(from), 0,
              [result = std::move(result),
               args = std::move(args)](std::vector<Message> got) mutable {
                AtRoot(std::move(result), args, std::move(got));
              });
}

}  // namespace algorithms
}  // namespace ferry
