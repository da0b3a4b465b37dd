// gather: rank dst ends with the list of every rank's value (in rank
// order); the others end with none. Direct: every rank sends to dst
// (step 0), and dst, once it has everyone's, releases them (step 1) — so
// no rank returns unless every rank came.
#include <utility>

#include "collectives/algorithms.h"
#include "collectives/checks.h"

namespace ferry {
namespace algorithms {

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
  std::vector<int> from;
  for (int k = 1; k < n; ++k) from.push_back((dst + k) % n);
  op.RecvFrom(std::move(from), 0,
              [result = std::move(result), mine = std::move(args.value),
               dst](std::vector<Message> got) mutable {
                Op& op = result.op();
                const int n = op.size();
                std::vector<Value> all(n);
                for (int r = 0; r < n; ++r) all[r] = std::move(got[r].value);
                all[dst] = std::move(mine);
                for (int k = 1; k < n; ++k)
                  op.Send((dst + k) % n, 1, Message());
                std::move(result).Set(std::move(all));
              });
}

}  // namespace algorithms
}  // namespace ferry
