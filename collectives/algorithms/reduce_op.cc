#include "collectives/algorithms/reduce_op.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ferry {

namespace {

struct Named {
  absl::string_view name;
  ReduceOp op;
};
constexpr Named kOps[] = {{"sum", ReduceOp::kSum}, {"prod", ReduceOp::kProd},
                          {"min", ReduceOp::kMin}, {"max", ReduceOp::kMax},
                          {"avg", ReduceOp::kAvg}, {"band", ReduceOp::kBand},
                          {"bor", ReduceOp::kBor}, {"bxor", ReduceOp::kBxor}};

}  // namespace

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  for (const Named& n : kOps) {
    if (n.name == name) return n.op;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown reduce op '", name,
                   "' (sum, prod, min, max, avg, band, bor, bxor)"));
}

absl::string_view ReduceOpName(ReduceOp op) {
  for (const Named& n : kOps) {
    if (n.op == op) return n.name;
  }
  return "?";
}

}  // namespace ferry
