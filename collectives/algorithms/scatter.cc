// scatter: rank src holds a list of one value per rank; rank i ends with
// the i-th (the other ranks' inputs are ignored). Every rank joins at src
// (step 0), then src sends each its value directly (step 1): no rank
// returns unless every rank came.
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/ring.h"
#include "collectives/op/checks.h"
#include "rpc/value/tensor_landing.h"

namespace ferry {
namespace algorithms {

namespace {

// This rank's value (from `from`), in `into` if given.
void Placed(Result<Value> result, const TensorOut& into, int from,
            Value value) {
  Op& op = result.op();
  if (into == nullptr) return std::move(result).Set(std::move(value));
  if (!value.is_tensor()) {
    return op.Fail(
        from == op.rank()
            ? op.BadInput("scatter_list holds a value that is not "
                          "a tensor")
            : op.Malformed(from, "expected a tensor for the output"));
  }
  absl::StatusOr<Tensor> placed = Place(op, into, value.as_tensor(), "output");
  if (!placed.ok()) return op.Fail(placed.status());
  std::move(result).Set(Value(*std::move(placed)));
}

}  // namespace

void Scatter(Result<Value> result, ScatterArgs args) {
  Op& op = result.op();
  const int n = op.size(), src = args.src;
  absl::Status src_ok = CheckRankParam(op, src, "src");
  if (!src_ok.ok()) return op.Fail(src_ok);
  if (op.rank() != src) {
    return JoinAtRoot(op, src, 0,
                      [result = std::move(result), src,
                       into = std::move(args.into)]() mutable {
                        Op& op = result.op();
                        std::optional<TensorLanding> at = LandingOf(into);
                        op.Recv(
                            src, 1,
                            [result = std::move(result), src,
                             into = std::move(into)](Message m) mutable {
                              Placed(std::move(result), into, src,
                                     std::move(m.value));
                            },
                            std::move(at));
                      });
  }
  if (static_cast<int>(args.values.size()) != n) {
    return op.Fail(op.BadInput(absl::StrCat(
        "the input of scatter's source must be a list of ", n,
        " values (one per rank), got ", args.values.size(), " items")));
  }
  JoinAtRoot(op, src, 0,
             [result = std::move(result), values = std::move(args.values), src,
              into = std::move(args.into)]() mutable {
               Op& op = result.op();
               const int n = op.size();
               for (int k = 1; k < n; ++k) {
                 op.Send((src + k) % n, 1,
                         Message::OfValue(values[(src + k) % n]));
               }
               Placed(std::move(result), into, src, std::move(values[src]));
             });
}

}  // namespace algorithms
}  // namespace ferry
