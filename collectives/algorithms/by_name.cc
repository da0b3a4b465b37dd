#include "collectives/algorithms/by_name.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/args.h"
#include "collectives/algorithms/kjt.h"

namespace ferry {
namespace by_name {

namespace {

// Where an edge's parsing failed: the op fails (on every member).
template <typename T>
bool Failed(Op& op, const absl::StatusOr<T>& parsed) {
  if (parsed.ok()) return false;
  op.Fail(parsed.status());
  return true;
}

Value TensorList(std::vector<Tensor> ts) {
  return Value(Value::List(ts.begin(), ts.end()));
}

void Barrier(Result<Value> result, Value, Value) {
  algorithms::Barrier(
      std::move(result).Map<Done>([](Done) { return Value(); }));
}

void Broadcast(Result<Value> result, Value input, Value params) {
  absl::StatusOr<int> src = RankParam(result.op(), params, "src");
  if (Failed(result.op(), src)) return;
  algorithms::Broadcast(std::move(result), {std::move(input), *src});
}

void Scatter(Result<Value> result, Value input, Value params) {
  Op& op = result.op();
  absl::StatusOr<int> src = RankParam(op, params, "src");
  if (Failed(op, src)) return;
  if (op.rank() == *src && !input.is_list()) {
    return op.Fail(op.BadInput(absl::StrCat(
        "the input of scatter's source must be a list of ", op.size(),
        " values (one per rank), got ", input.kind_name())));
  }
  std::vector<Value> values;
  if (input.is_list()) values = std::move(input.as_list());
  algorithms::Scatter(std::move(result), {std::move(values), *src});
}

void Gather(Result<Value> result, Value input, Value params) {
  absl::StatusOr<int> dst = RankParam(result.op(), params, "dst");
  if (Failed(result.op(), dst)) return;
  const bool here = result.op().rank() == *dst;
  algorithms::Gather(
      std::move(result).Map<std::vector<Value>>([here](std::vector<Value> all) {
        return here ? Value(Value::List(std::move(all))) : Value();
      }),
      {std::move(input), *dst});
}

void AllToAll(Result<Value> result, Value input, Value) {
  absl::StatusOr<std::vector<Tensor>> inputs =
      TensorListArg(result.op(), input, "input");
  if (Failed(result.op(), inputs)) return;
  algorithms::AllToAll(std::move(result).Map<std::vector<Tensor>>(&TensorList),
                       *std::move(inputs));
}

void AllToAllSingle(Result<Value> result, Value input, Value) {
  Op& op = result.op();
  const Value* t = input.is_map() ? input.Find("input") : &input;
  if (t == nullptr) return op.Fail(op.BadInput("missing \"input\""));
  algorithms::AllToAllSingleArgs args;
  absl::StatusOr<Tensor> tensor = TensorArg(op, *t, "input");
  if (Failed(op, tensor)) return;
  args.input = *std::move(tensor);
  for (auto [key, splits] : {std::pair{"input_splits", &args.input_splits},
                             std::pair{"output_splits", &args.output_splits}}) {
    const Value* v = input.is_map() ? input.Find(key) : nullptr;
    absl::StatusOr<std::vector<int64_t>> s =
        SplitsArg(op, v != nullptr ? *v : Value(), key);
    if (Failed(op, s)) return;
    *splits = *std::move(s);
  }
  algorithms::AllToAllSingle(
      std::move(result).Map<Tensor>([](Tensor t) { return Value(t); }),
      std::move(args));
}

void AllGather(Result<Value> result, Value input, Value params) {
  Op& op = result.op();
  const Value* axis = params.Find("axis");
  if (axis != nullptr && !axis->is_null()) {
    absl::StatusOr<int64_t> a = IntParam(op, params, "axis", std::nullopt);
    if (Failed(op, a)) return;
    return algorithms::AllGatherAlongAxis(std::move(result),
                                          {std::move(input), *a});
  }
  absl::StatusOr<Tensor> t = TensorArg(op, input, "input");
  if (Failed(op, t)) return;
  algorithms::AllGather(std::move(result).Map<std::vector<Tensor>>(&TensorList),
                        *std::move(t));
}

void AllReduce(Result<Value> result, Value input, Value params) {
  Op& op = result.op();
  absl::StatusOr<Tensor> t = TensorArg(op, input, "input");
  if (Failed(op, t)) return;
  absl::StatusOr<ReduceOp> reduce = ReduceParam(op, params);
  if (Failed(op, reduce)) return;
  algorithms::AllReduce(
      std::move(result).Map<Tensor>([](Tensor t) { return Value(t); }),
      {*std::move(t), *reduce});
}

// A list of n tensors, or one tensor cut evenly into n blocks on dim 0.
absl::StatusOr<std::vector<Tensor>> Blocks(const Op& op, const Value& input) {
  const int n = op.size();
  if (!input.is_tensor()) return TensorListArg(op, input, "input");
  const Tensor& t = input.as_tensor();
  if (t.rank() == 0 || t.dim(0) % n != 0) {
    return op.BadInput(absl::StrCat(
        "input ", t.DebugString(), " cannot be cut into ", n,
        " equal blocks along dimension 0; pass a list of ", n, " tensors"));
  }
  std::vector<Tensor> blocks;
  const int64_t rows = t.dim(0) / n;
  for (int i = 0; i < n; ++i)
    blocks.push_back(*t.Rows(i * rows, (i + 1) * rows));
  return blocks;
}

void ReduceScatter(Result<Value> result, Value input, Value params) {
  Op& op = result.op();
  absl::StatusOr<std::vector<Tensor>> blocks = Blocks(op, input);
  if (Failed(op, blocks)) return;
  absl::StatusOr<ReduceOp> reduce = ReduceParam(op, params);
  if (Failed(op, reduce)) return;
  algorithms::ReduceScatter(
      std::move(result).Map<Tensor>([](Tensor t) { return Value(t); }),
      {*std::move(blocks), *reduce});
}

// One KJT of the input (absent: none) with its features_per_rank; whether
// it was written as plain lists (then so is its output).
absl::StatusOr<algorithms::JaggedPart> Part(const Op& op, const Value* kjt,
                                            const Value& params,
                                            const std::string& name,
                                            const std::string& fpr_key,
                                            bool* plain) {
  algorithms::JaggedPart p;
  p.name = name;
  p.features_field = fpr_key;
  if (kjt != nullptr && !kjt->is_null()) {
    absl::StatusOr<KeyedJaggedTensor> k =
        KeyedJaggedTensor::FromValue(*kjt, name);
    if (!k.ok()) return op.BadInput(k.status().message());
    p.kjt = *std::move(k);
    const Value* values = kjt->Find("values");
    *plain = values != nullptr && values->is_list();
  }
  const Value* fpr = params.Find(fpr_key);
  absl::StatusOr<std::vector<int64_t>> splits =
      SplitsArg(op, fpr != nullptr ? *fpr : Value(), fpr_key);
  if (!splits.ok()) return splits.status();
  p.features_per_rank = *std::move(splits);
  return p;
}

// The jagged all-to-all of `names` parts of `input` (`whole`: the input is
// the one KJT itself); the output keyed likewise.
void Jagged(Result<Value> result, const Value& input, const Value& params,
            std::vector<std::string> names, bool whole) {
  Op& op = result.op();
  absl::StatusOr<int64_t> stagger = IntParam(op, params, "stagger", 1);
  if (Failed(op, stagger)) return;
  algorithms::JaggedArgs args;
  args.stagger = *stagger;
  std::vector<bool> plain(names.size(), false);
  for (size_t i = 0; i < names.size(); ++i) {
    bool p = false;
    absl::StatusOr<algorithms::JaggedPart> part =
        Part(op, whole ? &input : input.Find(names[i]), params, names[i],
             whole ? "features_per_rank"
                   : absl::StrCat(names[i], "_features_per_rank"),
             &p);
    if (Failed(op, part)) return;
    plain[i] = p;
    args.parts.push_back(*std::move(part));
  }
  algorithms::JaggedAllToAll(
      std::move(result).Map<std::vector<KeyedJaggedTensor>>(
          [names, plain, whole](std::vector<KeyedJaggedTensor> out) {
            Value::Map m;
            for (size_t i = 0; i < out.size(); ++i)
              m[names[i]] = plain[i] ? out[i].ToPlainValue() : out[i].ToValue();
            return whole ? m.begin()->second : Value(std::move(m));
          }),
      std::move(args));
}

void KjtAllToAll(Result<Value> result, Value input, Value params) {
  Jagged(std::move(result), input, params, {"kjt"}, /*whole=*/true);
}

void SparseFeaturesAllToAll(Result<Value> result, Value input, Value params) {
  Op& op = result.op();
  if (!input.is_map()) {
    return op.Fail(op.BadInput(absl::StrCat(
        "input must be {\"id_list\": KJT, \"id_score_list\": KJT}, got ",
        input.kind_name())));
  }
  for (const auto& [key, v] : input.as_map()) {
    if (key != "id_list" && key != "id_score_list") {
      return op.Fail(op.BadInput(
          absl::StrCat("input has \"", key,
                       "\"; expected \"id_list\" and \"id_score_list\"")));
    }
  }
  Jagged(std::move(result), input, params, {"id_list", "id_score_list"},
         /*whole=*/false);
}

const std::vector<std::pair<absl::string_view, Runner>>& Table() {
  static const auto* table =
      new std::vector<std::pair<absl::string_view, Runner>>{
          {"all_gather", &AllGather},
          {"all_reduce", &AllReduce},
          {"all_to_all", &AllToAll},
          {"all_to_all_single", &AllToAllSingle},
          {"barrier", &Barrier},
          {"broadcast", &Broadcast},
          {"gather", &Gather},
          {"reduce_scatter", &ReduceScatter},
          {"scatter", &Scatter},
          {"kjt_all_to_all", &KjtAllToAll},
          {"sparse_features_all_to_all", &SparseFeaturesAllToAll},
      };
  return *table;
}

}  // namespace

Runner Find(absl::string_view name) {
  for (const auto& [n, runner] : Table()) {
    if (n == name) return runner;
  }
  return nullptr;
}

std::vector<std::string> Names() {
  std::vector<std::string> names;
  for (const auto& [n, runner] : Table()) names.emplace_back(n);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace by_name
}  // namespace ferry
