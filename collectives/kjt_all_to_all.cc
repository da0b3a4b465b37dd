// The jagged all-to-all of TorchRec's KJTAllToAll / SparseFeaturesAllToAll:
// rank r receives features_per_rank[r] consecutive keys from every rank,
// with every rank's batch, and concatenates the batches per key.
//
// One step, pairwise shifted like all_to_all. The message from s to r holds
// the KJT's metadata (keys, features_per_rank, stagger, batch size, dtype,
// whether weighted), then r's slice of s's lengths, then the matching
// values and weights. Messages say their own size, so the lengths need no
// round of their own: the receiver checks the values against them instead.
// Every rank gets every rank's metadata, so all check it identically.
//
// Received blocks are (source, feature); the output is (feature, source)
// with the sources in TorchRec's staggered order
// [x + (W/stagger)·y for x < W/stagger for y < stagger].
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/algorithms.h"
#include "collectives/args.h"
#include "collectives/kjt.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace algorithms {

namespace {

// One KJT being redistributed (SparseFeaturesAllToAll moves two at once).
struct Jagged {
  std::string name;  // "kjt", "id_list", "id_score_list"
  KeyedJaggedTensor kjt;
  std::vector<int64_t> features_per_rank;
  std::vector<int64_t> first_feature;  // Per rank: where its keys start.
  bool plain = false;                  // The input was written as plain lists.
};

absl::StatusOr<int> StaggerParam(const Op& op, const Value& params) {
  FERRY_ASSIGN_OR_RETURN(int64_t stagger, IntParam(op, params, "stagger", 1));
  if (stagger < 1 || op.size() % stagger != 0) {
    return op.BadInput(absl::StrCat(
        "stagger ", stagger, " does not divide the group size ", op.size()));
  }
  return static_cast<int>(stagger);
}

absl::StatusOr<Jagged> ParsePart(const Op& op, const Value* kjt,
                                 const Value& params, const std::string& name,
                                 const std::string& fpr_key) {
  Jagged p;
  p.name = name;
  if (kjt != nullptr && !kjt->is_null()) {
    absl::StatusOr<KeyedJaggedTensor> k =
        KeyedJaggedTensor::FromValue(*kjt, name);
    if (!k.ok()) return op.BadInput(k.status().message());
    p.kjt = *std::move(k);
    const Value* values = kjt->Find("values");
    p.plain = values != nullptr && values->is_list();
  }
  const Value* fpr = params.Find(fpr_key);
  FERRY_ASSIGN_OR_RETURN(
      std::optional<std::vector<int64_t>> given,
      SplitsArg(op, fpr != nullptr ? *fpr : Value(), fpr_key, op.size()));
  p.features_per_rank = given.value_or(std::vector<int64_t>(op.size(), 0));
  int64_t sum = 0;
  for (int64_t f : p.features_per_rank) {
    p.first_feature.push_back(sum);
    if (f > p.kjt.num_keys() - sum) {  // Also keeps the sum from overflowing.
      return op.BadInput(absl::StrCat(fpr_key, " asks for more features than ",
                                      name, "'s ", p.kjt.num_keys(), " keys"));
    }
    sum += f;
  }
  p.first_feature.push_back(sum);
  if (sum != p.kjt.num_keys()) {
    return op.BadInput(absl::StrCat(fpr_key, " adds up to ", sum,
                                    " features but ", name, " has ",
                                    p.kjt.num_keys(), " keys"));
  }
  return p;
}

Value Meta(const Jagged& p, int stagger) {
  const KeyedJaggedTensor& k = p.kjt;
  return Value(
      Value::Map{{"keys", Value(Value::List(k.keys().begin(), k.keys().end()))},
                 {"features_per_rank", IntList(p.features_per_rank)},
                 {"stagger", stagger},
                 {"dtype", std::string(DTypeName(k.values().dtype()))},
                 {"weighted", k.weights().has_value()},
                 {"stride", k.stride()}});
}

// The slice of `p` for rank `to`: its keys' lengths, values and weights.
Value Slice(const Jagged& p, int to) {
  const KeyedJaggedTensor& k = p.kjt;
  const int64_t first = p.first_feature[to], last = p.first_feature[to + 1];
  Value::Map m = {
      {"lengths", *k.lengths().Rows(first * k.stride(), last * k.stride())},
      {"values", *k.values().Rows(k.key_offset(first), k.key_offset(last))}};
  if (k.weights())
    m["weights"] = *k.weights()->Rows(k.key_offset(first), k.key_offset(last));
  return Value(std::move(m));
}

// Every rank's metadata of a part must equal rank 0's, field by field.
absl::Status CheckMetas(const Op& op, const std::string& name,
                        const std::vector<Value>& metas) {
  for (const char* field :
       {"keys", "features_per_rank", "stagger", "dtype", "weighted"}) {
    std::vector<Value> column;
    for (int r = 0; r < op.size(); ++r) {
      FERRY_ASSIGN_OR_RETURN(const Value* v, Part(op, metas[r], field, r));
      column.push_back(*v);
    }
    std::string label = std::string(field) == "dtype" ? "values dtype" : field;
    FERRY_RETURN_IF_ERROR(
        CheckSameMeta(op, column, absl::StrCat(name, " ", label)));
  }
  return absl::OkStatus();
}

// Copies 1-D `pieces` back to back into one new tensor of `dtype`.
absl::StatusOr<Tensor> Join(DType dtype, const std::vector<Tensor>& pieces) {
  int64_t n = 0;
  for (const Tensor& t : pieces) n += t.numel();
  FERRY_ASSIGN_OR_RETURN(TensorBuilder out, TensorBuilder::Create(dtype, {n}));
  char* at = out.data();
  for (const Tensor& t : pieces) {
    if (t.nbytes() > 0) std::memcpy(at, t.data(), t.nbytes());
    at += t.nbytes();
  }
  return std::move(out).Build();
}

// This rank's output of `p` from every source's slice and metadata.
absl::StatusOr<KeyedJaggedTensor> Assemble(const Op& op, const Jagged& p,
                                           int stagger,
                                           const std::vector<Value>& slices,
                                           const std::vector<Value>& metas) {
  const int n = op.size(), me = op.rank();
  const int64_t features = p.features_per_rank[me];
  const bool weighted = p.kjt.weights().has_value();
  const DType dtype = p.kjt.values().dtype();
  // Each source's slice as a KJT of this rank's keys (checked).
  std::vector<KeyedJaggedTensor> from(n);
  int64_t stride = 0;
  for (int s = 0; s < n; ++s) {
    FERRY_ASSIGN_OR_RETURN(const Value* b, Part(op, metas[s], "stride", s));
    FERRY_ASSIGN_OR_RETURN(const Value* l, Part(op, slices[s], "lengths", s));
    FERRY_ASSIGN_OR_RETURN(const Value* v, Part(op, slices[s], "values", s));
    const Value* w = slices[s].Find("weights");
    // The metadata was checked equal everywhere; the slice must match it
    // (Join copies by this rank's dtype).
    if (!b->is_int() || b->as_int() < 0 || !l->is_tensor() || !v->is_tensor() ||
        v->as_tensor().dtype() != dtype || (w != nullptr) != weighted ||
        (w != nullptr && !w->is_tensor())) {
      return Malformed(op, s, absl::StrCat(p.name, " slice"));
    }
    std::vector<std::string> keys(features, "");
    absl::StatusOr<KeyedJaggedTensor> k = KeyedJaggedTensor::Create(
        std::move(keys), l->as_tensor(), v->as_tensor(),
        w ? std::optional<Tensor>(w->as_tensor()) : std::nullopt, b->as_int(),
        p.name);
    if (!k.ok() || (features > 0 && k->stride() != b->as_int())) {
      return Malformed(op, s, k.ok() ? "stride" : k.status().message());
    }
    // With no keys here a peer's stride is checked by nothing else: the
    // sum must not overflow.
    if (b->as_int() > std::numeric_limits<int64_t>::max() - stride)
      return Malformed(op, s, absl::StrCat(p.name, " stride"));
    from[s] = *std::move(k);
    stride += b->as_int();
  }
  std::vector<int> order;  // Sources in TorchRec's staggered order.
  for (int x = 0; x < n / stagger; ++x) {
    for (int y = 0; y < stagger; ++y) order.push_back(x + (n / stagger) * y);
  }
  std::vector<Tensor> lengths, values, weights;
  for (int64_t f = 0; f < features; ++f) {
    for (int s : order) {
      const KeyedJaggedTensor& k = from[s];
      lengths.push_back(
          *k.lengths().Rows(f * k.stride(), (f + 1) * k.stride()));
      values.push_back(k.ValuesOfKey(static_cast<int>(f)));
      if (weighted) {
        weights.push_back(
            *k.weights()->Rows(k.key_offset(f), k.key_offset(f + 1)));
      }
    }
  }
  FERRY_ASSIGN_OR_RETURN(Tensor out_lengths, Join(DType::kInt64, lengths));
  FERRY_ASSIGN_OR_RETURN(Tensor out_values, Join(dtype, values));
  std::optional<Tensor> out_weights;
  if (weighted) {
    FERRY_ASSIGN_OR_RETURN(out_weights, Join(DType::kFloat32, weights));
  }
  const int64_t first = p.first_feature[me];
  std::vector<std::string> keys(p.kjt.keys().begin() + first,
                                p.kjt.keys().begin() + first + features);
  return KeyedJaggedTensor::Create(std::move(keys), std::move(out_lengths),
                                   std::move(out_values),
                                   std::move(out_weights), stride, p.name);
}

// Redistributes every part in one step; the outputs by part.
absl::StatusOr<Value::Map> Redistribute(Op& op,
                                        const std::vector<Jagged>& parts,
                                        int stagger) {
  const int n = op.size();
  Value::Map metas;
  for (const Jagged& p : parts) metas[p.name] = Meta(p, stagger);
  auto message_for = [&](int to) {
    Value::Map m = {{"meta", Value(metas)}};
    for (const Jagged& p : parts) m[p.name] = Slice(p, to);
    return Value(std::move(m));
  };
  FERRY_ASSIGN_OR_RETURN(std::vector<Value> got,
                         op.ExchangeEach(0, message_for));
  Value::Map out;
  for (const Jagged& p : parts) {
    std::vector<Value> part_metas(n), slices(n);
    for (int s = 0; s < n; ++s) {
      FERRY_ASSIGN_OR_RETURN(const Value* m, Part(op, got[s], "meta", s));
      FERRY_ASSIGN_OR_RETURN(const Value* pm, Part(op, *m, p.name, s));
      FERRY_ASSIGN_OR_RETURN(const Value* slice, Part(op, got[s], p.name, s));
      part_metas[s] = *pm;
      slices[s] = *slice;
    }
    FERRY_RETURN_IF_ERROR(CheckMetas(op, p.name, part_metas));
    FERRY_ASSIGN_OR_RETURN(KeyedJaggedTensor kjt,
                           Assemble(op, p, stagger, slices, part_metas));
    out[p.name] = p.plain ? kjt.ToPlainValue() : kjt.ToValue();
  }
  return out;
}

}  // namespace

absl::StatusOr<Value> KjtAllToAll(Op& op, const Value& input,
                                  const Value& params) {
  FERRY_ASSIGN_OR_RETURN(int stagger, StaggerParam(op, params));
  FERRY_ASSIGN_OR_RETURN(
      Jagged p, ParsePart(op, &input, params, "kjt", "features_per_rank"));
  FERRY_ASSIGN_OR_RETURN(Value::Map out,
                         Redistribute(op, {std::move(p)}, stagger));
  return out["kjt"];
}

absl::StatusOr<Value> SparseFeaturesAllToAll(Op& op, const Value& input,
                                             const Value& params) {
  if (!input.is_map()) {
    return op.BadInput(absl::StrCat(
        "input must be {\"id_list\": KJT, \"id_score_list\": KJT}, "
        "got ",
        input.kind_name()));
  }
  for (const auto& [key, v] : input.as_map()) {
    if (key != "id_list" && key != "id_score_list") {
      return op.BadInput(
          absl::StrCat("input has \"", key,
                       "\"; expected \"id_list\" and \"id_score_list\""));
    }
  }
  FERRY_ASSIGN_OR_RETURN(int stagger, StaggerParam(op, params));
  std::vector<Jagged> parts;
  for (const char* name : {"id_list", "id_score_list"}) {
    FERRY_ASSIGN_OR_RETURN(Jagged p,
                           ParsePart(op, input.Find(name), params, name,
                                     absl::StrCat(name, "_features_per_rank")));
    parts.push_back(std::move(p));
  }
  FERRY_ASSIGN_OR_RETURN(Value::Map out, Redistribute(op, parts, stagger));
  return Value(std::move(out));
}

}  // namespace algorithms
}  // namespace ferry
