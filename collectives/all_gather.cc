// all_gather: every rank ends with every rank's tensors.
//
// First each rank's header reaches everyone, with the tensors themselves
// when they are small, in ceil(log2 n) rounds (gather_all.h); large ones
// then go around the ring (steps 1..), skipping those already delivered. Every
// rank learns every rank's header before any large transfer, so a mismatch
// fails the op early and identically on every rank; a direct exchange costs one
// round, a ring sends each byte once per link whatever the world size.
//
// This file: the exchange (gather_tensors.h) and torch's list form — every
// rank's tensor, shapes may differ, dtypes may not. tf's form, along an
// axis, is all_gather_axis.cc.
#include <memory>
#include <utility>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/checks.h"
#include "collectives/gather_all.h"
#include "collectives/gather_tensors.h"
#include "collectives/ring.h"
#include "rpc/value/dtype.h"

namespace ferry {

namespace {

struct Step0 {
  CheckHeaders check;
  Gathered then;
};

bool Small(const Op& op, const std::vector<Tensor>& tensors) {
  constexpr int64_t kNode = 16;  // Roughly, a value's framing on the wire.
  int64_t bytes = kNode;
  for (const Tensor& t : tensors)
    bytes += kNode + static_cast<int64_t>(t.nbytes());
  return bytes <= op.config().direct_bytes;
}

void AfterStep0(Op& op, std::unique_ptr<Step0> next, Blocks got) {
  const int n = op.size();
  std::vector<proto::AllGatherHeader> headers(n);
  std::vector<bool> skip(n);
  for (int r = 0; r < n; ++r) {
    if (!ReadHeader(got[r], &headers[r]))
      return op.Fail(op.Malformed(r, "not an all_gather header"));
    skip[r] = headers[r].direct();
  }
  absl::Status checked = next->check(headers);
  if (!checked.ok()) return op.Fail(checked);
  // This rank's own block goes around as it is, without the header.
  got[op.rank()].header.clear();
  RingAllGather(op, 1, std::move(got), std::move(skip),
                [next = std::move(next),
                 headers = std::move(headers)](Blocks blocks) mutable {
                  std::vector<std::vector<Tensor>> tensors;
                  for (Message& b : blocks)
                    tensors.push_back(std::move(b.tensors));
                  std::move(next->then)(std::move(headers), std::move(tensors));
                });
}

}  // namespace

void GatherTensors(Op& op, proto::AllGatherHeader header,
                   std::vector<Tensor> mine, CheckHeaders check,
                   Gathered then) {
  header.set_direct(Small(op, mine));
  Message first = Message::Of(header);
  if (header.direct()) first.tensors = mine;
  auto next = std::make_unique<Step0>(Step0{std::move(check), std::move(then)});
  GatherAll(op, std::move(first),
            [op = op.shared_from_this(), next = std::move(next),
             mine = std::move(mine)](Blocks got) mutable {
              got[op->rank()].tensors = std::move(mine);
              AfterStep0(*op, std::move(next), std::move(got));
            });
}

namespace algorithms {

void AllGather(Result<std::vector<Tensor>> result, Tensor input) {
  Op& op = result.op();
  const DType dtype = input.dtype();
  proto::AllGatherHeader header;
  header.set_dtype(static_cast<proto::DType>(dtype));
  auto same_dtype = [&op](const std::vector<proto::AllGatherHeader>& h) {
    std::vector<std::string> dtypes;
    for (int r = 0; r < op.size(); ++r) {
      if (h[r].along_axis())
        return Mismatch(op, r, "all_gather", "along an axis", "the list form");
      if (!IsValidDType(h[r].dtype())) return op.Malformed(r, "dtype");
      dtypes.emplace_back(DTypeName(static_cast<DType>(h[r].dtype())));
    }
    return CheckSame(op, dtypes, "dtype");
  };
  GatherTensors(op, header, {std::move(input)}, same_dtype,
                [result = std::move(result), dtype](
                    std::vector<proto::AllGatherHeader>,
                    std::vector<std::vector<Tensor>> all) mutable {
                  Op& op = result.op();
                  std::vector<Tensor> out;
                  for (int r = 0; r < op.size(); ++r) {
                    if (all[r].size() != 1 || all[r][0].dtype() != dtype)
                      return op.Fail(op.Malformed(r, "expected a tensor"));
                    out.push_back(std::move(all[r][0]));
                  }
                  std::move(result).Set(std::move(out));
                });
}

}  // namespace algorithms
}  // namespace ferry
