// all_reduce: every rank ends with the elementwise reduction of every
// rank's tensor.
//
// Step 0 exchanges each rank's metadata (dtype, shape, reduce op) with
// everyone, together with the data itself when it is small: then each rank
// reduces the tensors in rank order (the same bits everywhere, even for
// floats). Large tensors go around the ring instead (steps 1..): a
// reduce-scatter over n segments, then an all-gather of the reduced
// segments, so each rank sends about 2× its tensor whatever the world size.
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "collectives/reduce.h"
#include "collectives/ring.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

namespace {

// n near-equal segments of `t`'s elements (1-D views, no copy).
std::vector<Tensor> Segments(const Tensor& t, int n) {
  Tensor flat = *t.Reshape({t.numel()});
  std::vector<Tensor> segments;
  for (int i = 0; i < n; ++i) {
    segments.push_back(*flat.Rows(t.numel() * i / n, t.numel() * (i + 1) / n));
  }
  return segments;
}

absl::StatusOr<Tensor> RingAllReduce(Op& op, const Tensor& input,
                                     ReduceOp reduce) {
  const int n = op.size();
  std::vector<Tensor> segments = Segments(input, n);
  std::vector<bool> none(n, false);
  FERRY_ASSIGN_OR_RETURN(Tensor mine,
                         RingReduceScatter(op, 1, segments, none, reduce));
  if (reduce == ReduceOp::kAvg) mine = Averaged(mine, n);
  std::vector<Value> reduced(n);
  reduced[op.rank()] = mine;
  FERRY_RETURN_IF_ERROR(RingAllGather(op, n, reduced, none));
  FERRY_ASSIGN_OR_RETURN(TensorBuilder out,
                         TensorBuilder::Create(input.dtype(), input.shape()));
  size_t offset = 0;
  for (int i = 0; i < n; ++i) {
    FERRY_ASSIGN_OR_RETURN(Tensor s,
                           TensorLike(op, reduced[i], i, segments[i]));
    if (s.nbytes() > 0) std::memcpy(out.data() + offset, s.data(), s.nbytes());
    offset += s.nbytes();
  }
  return std::move(out).Build();
}

}  // namespace

absl::StatusOr<Value> AllReduce(Op& op, const Value& input,
                                const Value& params) {
  FERRY_ASSIGN_OR_RETURN(Tensor t, TensorArg(op, input, "input"));
  FERRY_ASSIGN_OR_RETURN(ReduceOp reduce, ReduceParam(op, params, t.dtype()));
  const bool direct =
      static_cast<int64_t>(t.nbytes()) <= op.config().direct_bytes;
  Value mine(Value::Map{{"meta", TensorMeta(t)},
                        {"op", std::string(ReduceOpName(reduce))},
                        {"data", direct ? Value(t) : Value()}});
  FERRY_ASSIGN_OR_RETURN(std::vector<Value> all, op.ExchangeAll(0, mine));
  std::vector<Value> metas, ops, data;
  bool all_direct = true;  // Decided by what was sent, not by local settings.
  for (int r = 0; r < op.size(); ++r) {
    FERRY_ASSIGN_OR_RETURN(const Value* meta, Part(op, all[r], "meta", r));
    FERRY_ASSIGN_OR_RETURN(const Value* name, Part(op, all[r], "op", r));
    FERRY_ASSIGN_OR_RETURN(const Value* d, Part(op, all[r], "data", r));
    metas.push_back(*meta);
    ops.push_back(*name);
    data.push_back(*d);
    all_direct = all_direct && !d->is_null();
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, ops, "op"));
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, metas, "input"));
  if (!all_direct) {
    FERRY_ASSIGN_OR_RETURN(Tensor out, RingAllReduce(op, t, reduce));
    return Value(std::move(out));
  }
  FERRY_ASSIGN_OR_RETURN(Tensor sum, ReduceInRankOrder(op, data, t, reduce));
  return Value(reduce == ReduceOp::kAvg ? Averaged(sum, op.size()) : sum);
}

}  // namespace algorithms
}  // namespace ferry
