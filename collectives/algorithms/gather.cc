// gather: rank dst ends with the list of every rank's value (in rank
// order); the others end with none. Direct: every rank sends to dst
// (step 0), and dst, once it has everyone's, releases them (step 1) — so
// no rank returns unless every rank came.
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/op/checks.h"

namespace ferry {
namespace algorithms {

namespace {

// Every rank's tensor in its output, if there are outputs.
absl::Status PlaceAll(const Op& op, const std::vector<TensorOut>& into,
                      std::vector<Value>& all) {
  for (size_t r = 0; r < into.size(); ++r) {
    if (!all[r].is_tensor()) {
      return static_cast<int>(r) == op.rank()
                 ? op.BadInput("a value that is not a tensor has no output")
                 : op.Malformed(r, "expected a tensor for gather_list");
    }
    absl::StatusOr<Tensor> placed = Place(op, into[r], all[r].as_tensor(),
                                          absl::StrCat("gather_list[", r, "]"));
    if (!placed.ok()) return placed.status();
    all[r] = Value(*std::move(placed));
  }
  return absl::OkStatus();
}

}  // namespace

void Gather(Result<std::vector<Value>> result, GatherArgs args) {
  Op& op = result.op();
  const int n = op.size(), dst = args.dst;
  absl::Status dst_ok = CheckRankParam(op, dst, "dst");
  if (!dst_ok.ok()) return op.Fail(dst_ok);
  if (op.rank() != dst) {
    op.Send(dst, 0, Message::OfValue(std::move(args.value)));
    return op.Recv(dst, 1, [result = std::move(result)](Message) mutable {
      std::move(result).Set({});
    });
  }
  if (!args.into.empty() && static_cast<int>(args.into.size()) != n) {
    return op.Fail(
        op.BadInput(absl::StrCat("gather_list must be a list of ", n,
                                 " tensors, got ", args.into.size())));
  }
  std::vector<int> from;
  Op::Landings land(args.into.empty() ? 0 : n);
  for (int k = 1; k < n; ++k) {
    from.push_back((dst + k) % n);
    if (!land.empty())
      land[(dst + k) % n] = LandingOf(args.into[(dst + k) % n]);
  }
  op.RecvFrom(
      std::move(from), 0,
      [result = std::move(result), mine = std::move(args.value), dst,
       into = std::move(args.into)](std::vector<Message> got) mutable {
        Op& op = result.op();
        const int n = op.size();
        std::vector<Value> all(n);
        for (int r = 0; r < n; ++r) all[r] = std::move(got[r].value);
        all[dst] = std::move(mine);
        absl::Status placed = PlaceAll(op, into, all);
        if (!placed.ok()) return op.Fail(placed);
        for (int k = 1; k < n; ++k) op.Send((dst + k) % n, 1, Message());
        std::move(result).Set(std::move(all));
      },
      std::move(land));
}

}  // namespace algorithms
}  // namespace ferry
