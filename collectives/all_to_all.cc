// all_to_all: rank r sends its i-th block to rank i and receives rank i's
// r-th block, for every i.
//
// One step, pairwise shifted: rank r sends to r+1, r+2, … and receives from
// r-1, r-2, …, so no rank is everyone's first destination. Sizes need not
// be known in advance — each message says how big it is — so uneven splits
// cost no extra round. Each rank receives a block from every rank, hence
// learns every rank's dtype and row shape, and checks them identically.
// all_to_all_single's blocks also carry their sender's input_splits and
// output_splits, so every rank checks every rank's output_splits against
// what is sent to it, and a wrong one fails the op everywhere (not only on
// the rank that expected otherwise).
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_math.h"

namespace ferry {
namespace algorithms {

namespace {

// A list of n ints in a message from `from` (null allowed if `optional`).
absl::StatusOr<std::optional<std::vector<int64_t>>> IntsPart(
    const Op& op, const Value& message, absl::string_view key, int from,
    bool optional) {
  FERRY_ASSIGN_OR_RETURN(const Value* v, Part(op, message, key, from));
  if (optional && v->is_null()) return std::optional<std::vector<int64_t>>();
  if (!v->is_list() || static_cast<int>(v->as_list().size()) != op.size()) {
    return Malformed(op, from, absl::StrCat("bad \"", key, "\""));
  }
  std::vector<int64_t> out;
  for (const Value& x : v->as_list()) {
    if (!x.is_int())
      return Malformed(op, from, absl::StrCat("bad \"", key, "\""));
    out.push_back(x.as_int());
  }
  return std::optional<std::vector<int64_t>>(std::move(out));
}

struct SingleArgs {
  Tensor input;
  std::vector<int64_t> input_splits;
  std::optional<std::vector<int64_t>> output_splits;
};

absl::StatusOr<SingleArgs> ParseSingle(const Op& op, const Value& in) {
  const Value* t = in.is_map() ? in.Find("input") : &in;
  if (t == nullptr) return op.BadInput("missing \"input\"");
  SingleArgs a;
  FERRY_ASSIGN_OR_RETURN(a.input, TensorArg(op, *t, "input"));
  if (a.input.rank() == 0)
    return op.BadInput("input is 0-d: it is split along dimension 0");
  const int n = op.size();
  const int64_t rows = a.input.dim(0);
  const Value* splits = in.is_map() ? in.Find("input_splits") : nullptr;
  FERRY_ASSIGN_OR_RETURN(
      std::optional<std::vector<int64_t>> given,
      SplitsArg(op, splits ? *splits : Value(), "input_splits", n));
  if (given) {
    int64_t sum = 0;
    for (int64_t s : *given) {
      if (s > rows - sum) {  // Also keeps the sum from overflowing.
        return op.BadInput(absl::StrCat(
            "input_splits add up to more than the input's ", rows, " rows"));
      }
      sum += s;
    }
    if (sum != rows) {
      return op.BadInput(absl::StrCat("input_splits add up to ", sum,
                                      " but input has ", rows, " rows"));
    }
    a.input_splits = *std::move(given);
  } else {
    if (rows % n != 0) {
      return op.BadInput(absl::StrCat("input has ", rows,
                                      " rows, not divisible by the group size ",
                                      n, "; pass input_splits"));
    }
    a.input_splits.assign(n, rows / n);
  }
  const Value* out = in.is_map() ? in.Find("output_splits") : nullptr;
  FERRY_ASSIGN_OR_RETURN(
      a.output_splits, SplitsArg(op, out ? *out : Value(), "output_splits", n));
  return a;
}

Value RowMeta(const Tensor& t) {
  Value::List rows;
  for (int i = 1; i < t.rank(); ++i) rows.push_back(Value(t.dim(i)));
  return Value(Value::Map{{"dtype", std::string(DTypeName(t.dtype()))},
                          {"shape", rows}});
}

}  // namespace

absl::StatusOr<Value> AllToAll(Op& op, const Value& input,
                               const Value& /*params*/) {
  FERRY_ASSIGN_OR_RETURN(std::vector<Tensor> blocks,
                         TensorListArg(op, input, op.size(), "input"));
  FERRY_ASSIGN_OR_RETURN(
      std::vector<Value> got,
      op.ExchangeEach(0, [&](int to) { return Value(blocks[to]); }));
  std::vector<Value> dtypes;
  Value::List out;
  for (int r = 0; r < op.size(); ++r) {
    if (!got[r].is_tensor()) return Malformed(op, r, "expected a tensor");
    dtypes.push_back(std::string(DTypeName(got[r].as_tensor().dtype())));
    out.push_back(std::move(got[r]));
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, dtypes, "dtype"));
  return Value(std::move(out));
}

absl::StatusOr<Value> AllToAllSingle(Op& op, const Value& input,
                                     const Value& /*params*/) {
  FERRY_ASSIGN_OR_RETURN(SingleArgs a, ParseSingle(op, input));
  const int n = op.size();
  const Value input_splits = IntList(a.input_splits);
  const Value output_splits =
      a.output_splits ? IntList(*a.output_splits) : Value();
  std::vector<Value> messages;
  int64_t offset = 0;
  for (int64_t rows : a.input_splits) {
    FERRY_ASSIGN_OR_RETURN(Tensor piece, a.input.Rows(offset, offset + rows));
    messages.push_back(Value(Value::Map{{"rows", std::move(piece)},
                                        {"input_splits", input_splits},
                                        {"output_splits", output_splits}}));
    offset += rows;
  }
  FERRY_ASSIGN_OR_RETURN(
      std::vector<Value> messages_got,
      op.ExchangeEach(0, [&](int to) { return messages[to]; }));
  std::vector<Tensor> got(n);
  std::vector<std::vector<int64_t>> sent(n);  // by sender: its input_splits
  std::vector<std::optional<std::vector<int64_t>>> expected(n);
  std::vector<Value> metas;
  for (int r = 0; r < n; ++r) {
    FERRY_ASSIGN_OR_RETURN(const Value* rows,
                           Part(op, messages_got[r], "rows", r));
    if (!rows->is_tensor() || rows->as_tensor().rank() == 0) {
      return Malformed(op, r, "expected a tensor of rank >= 1");
    }
    got[r] = rows->as_tensor();
    FERRY_ASSIGN_OR_RETURN(
        std::optional<std::vector<int64_t>> in,
        IntsPart(op, messages_got[r], "input_splits", r, false));
    sent[r] = *std::move(in);
    if (sent[r][op.rank()] != got[r].dim(0))
      return Malformed(op, r, "rows differ from its input_splits");
    FERRY_ASSIGN_OR_RETURN(
        expected[r], IntsPart(op, messages_got[r], "output_splits", r, true));
    metas.push_back(RowMeta(got[r]));
  }
  FERRY_RETURN_IF_ERROR(CheckSameMeta(op, metas, "rows of"));
  // Every rank's output_splits against what every rank sends it: the same
  // data on every rank, so the same error on every rank.
  for (int to = 0; to < n; ++to) {
    if (!expected[to]) continue;
    for (int from = 0; from < n; ++from) {
      if (sent[from][to] != (*expected[to])[from]) {
        return op.Error(
            absl::StatusCode::kInvalidArgument,
            absl::StrCat(op.Who(from), " sent ", sent[from][to], " rows to ",
                         op.Who(to), " but its output_splits[", from, "] is ",
                         (*expected[to])[from]));
      }
    }
  }
  FERRY_ASSIGN_OR_RETURN(Tensor out, Concat(got, 0));
  return Value(std::move(out));
}

}  // namespace algorithms
}  // namespace ferry
