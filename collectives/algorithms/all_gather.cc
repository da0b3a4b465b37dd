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

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/gather_all.h"
#include "collectives/algorithms/gather_tensors.h"
#include "collectives/algorithms/ring.h"
#include "collectives/op/checks.h"
#include "rpc/value/dtype.h"

namespace ferry {

namespace {

struct Step0 {
  CheckHeaders check;
  Gathered then;
  Op::Landings land;
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
  Op::Landings land = std::move(next->land);
  RingAllGather(
      op, 1, std::move(got), std::move(skip),
      [next = std::move(next),
       headers = std::move(headers)](Blocks blocks) mutable {
        std::vector<std::vector<Tensor>> tensors;
        for (Message& b : blocks) tensors.push_back(std::move(b.tensors));
        std::move(next->then)(std::move(headers), std::move(tensors));
      },
      std::move(land));
}

}  // namespace

void GatherTensors(Op& op, proto::AllGatherHeader header,
                   std::vector<Tensor> mine, CheckHeaders check, Gathered then,
                   Op::Landings land) {
  header.set_direct(Small(op, mine));
  Message first = Message::Of(header);
  if (header.direct()) first.tensors = mine;
  // A peer's direct tensors arrive packed in GatherAll's rounds (several
  // ranks' in one message), so they land in a buffer of ferry's and the
  // result copies them into `into`; ring ones land where they belong.
  auto next = std::make_unique<Step0>(
      Step0{std::move(check), std::move(then), std::move(land)});
  GatherAll(op, std::move(first),
            [op = op.shared_from_this(), next = std::move(next),
             mine = std::move(mine)](Blocks got) mutable {
              got[op->rank()].tensors = std::move(mine);
              AfterStep0(*op, std::move(next), std::move(got));
            });
}

namespace algorithms {

void AllGather(Result<std::vector<Tensor>> result, AllGatherArgs args) {
  Op& op = result.op();
  const DType dtype = args.input.dtype();
  if (!args.into.empty() && static_cast<int>(args.into.size()) != op.size()) {
    return op.Fail(
        op.BadInput(absl::StrCat("output must be a list of ", op.size(),
                                 " tensors, got ", args.into.size())));
  }
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
  Op::Landings land;
  if (!args.into.empty()) {
    land.resize(op.size());
    for (int r = 0; r < op.size(); ++r) {
      if (r != op.rank()) land[r] = LandingOf(args.into[r]);
    }
  }
  GatherTensors(
      op, header, {std::move(args.input)}, same_dtype,
      [result = std::move(result), dtype, into = std::move(args.into)](
          std::vector<proto::AllGatherHeader>,
          std::vector<std::vector<Tensor>> all) mutable {
        Op& op = result.op();
        std::vector<Tensor> out;
        for (int r = 0; r < op.size(); ++r) {
          if (all[r].size() != 1 || all[r][0].dtype() != dtype)
            return op.Fail(op.Malformed(r, "expected a tensor"));
          if (into.empty()) {
            out.push_back(std::move(all[r][0]));
            continue;
          }
          absl::StatusOr<Tensor> placed =
              Place(op, into[r], all[r][0], absl::StrCat("output[", r, "]"));
          if (!placed.ok()) return op.Fail(placed.status());
          out.push_back(*std::move(placed));
        }
        std::move(result).Set(std::move(out));
      },
      std::move(land));
}

void AllGather(Result<std::vector<Tensor>> result, Tensor input) {
  AllGather(std::move(result), AllGatherArgs{std::move(input), {}});
}

}  // namespace algorithms
}  // namespace ferry
