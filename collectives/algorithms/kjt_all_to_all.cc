// The jagged all-to-all of TorchRec's KJTAllToAll / SparseFeaturesAllToAll:
// rank r receives features_per_rank[r] consecutive keys from every rank,
// with every rank's batch, and concatenates the batches per key.
//
// One step, pairwise shifted like all_to_all. The message from s to r holds
// the KJTs' metadata (KjtHeader: keys, features_per_rank, stagger, batch
// size, dtype, whether weighted), and as tensors r's slice of each KJT:
// lengths, values and weights. Messages say their own size, so the lengths
// need no round of their own: the receiver checks the values against them
// instead. Every rank gets every rank's metadata, so all check it
// identically.
//
// Received blocks are (source, feature); the output is (feature, source)
// with the sources in TorchRec's staggered order
// [x + (W/stagger)·y for x < W/stagger for y < stagger].
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/op/checks.h"
#include "proto/collectives.pb.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {
namespace algorithms {

namespace {

// Where each rank's keys start in `p` (ranks + 1 entries); this rank's
// INVALID_ARGUMENT if its features_per_rank do not add up to its keys.
absl::StatusOr<std::vector<int64_t>> FirstFeatures(const Op& op,
                                                   JaggedPart& p) {
  absl::Status ok = CheckSplits(op, p.features_per_rank, p.features_field);
  if (!ok.ok()) return ok;
  if (p.features_per_rank.empty()) p.features_per_rank.assign(op.size(), 0);
  std::vector<int64_t> first;
  int64_t sum = 0;
  for (int64_t f : p.features_per_rank) {
    first.push_back(sum);
    if (f > p.kjt.num_keys() - sum) {  // Also keeps the sum from overflowing.
      return op.BadInput(absl::StrCat(p.features_field,
                                      " asks for more features than ", p.name,
                                      "'s ", p.kjt.num_keys(), " keys"));
    }
    sum += f;
  }
  first.push_back(sum);
  if (sum != p.kjt.num_keys()) {
    return op.BadInput(absl::StrCat(p.features_field, " adds up to ", sum,
                                    " features but ", p.name, " has ",
                                    p.kjt.num_keys(), " keys"));
  }
  return first;
}

proto::KjtPartHeader HeaderOf(const JaggedPart& p) {
  proto::KjtPartHeader h;
  for (const std::string& k : p.kjt.keys()) h.add_keys(k);
  for (int64_t f : p.features_per_rank) h.add_features_per_rank(f);
  h.set_dtype(static_cast<proto::DType>(p.kjt.values().dtype()));
  h.set_weighted(p.kjt.weights().has_value());
  h.set_stride(p.kjt.stride());
  return h;
}

// The slice of `p` for the keys [first, last): lengths, values, weights.
void AddSlice(const KeyedJaggedTensor& k, int64_t first, int64_t last,
              std::vector<Tensor>* out) {
  out->push_back(*k.lengths().Rows(first * k.stride(), last * k.stride()));
  out->push_back(*k.values().Rows(k.key_offset(first), k.key_offset(last)));
  if (k.weights()) {
    out->push_back(*k.weights()->Rows(k.key_offset(first), k.key_offset(last)));
  }
}

std::string Json(const google::protobuf::RepeatedPtrField<std::string>& xs) {
  return ToJson(Value(Value::List(xs.begin(), xs.end())));
}
std::string Json(const google::protobuf::RepeatedField<int64_t>& xs) {
  return ToJson(Value(Value::List(xs.begin(), xs.end())));
}

// Every rank's header of part `i` must equal rank 0's, field by field.
absl::Status CheckPart(const Op& op, const std::string& name, int i,
                       const std::vector<proto::KjtHeader>& h) {
  std::vector<std::string> keys, fpr, stagger, dtype, weighted;
  for (int r = 0; r < op.size(); ++r) {
    const proto::KjtPartHeader& p = h[r].parts(i);
    if (!IsValidDType(p.dtype())) return op.Malformed(r, "dtype");
    keys.push_back(Json(p.keys()));
    fpr.push_back(Json(p.features_per_rank()));
    stagger.push_back(absl::StrCat(h[r].stagger()));
    dtype.emplace_back(DTypeName(static_cast<DType>(p.dtype())));
    weighted.push_back(p.weighted() ? "true" : "false");
  }
  for (const auto& [field, column] :
       std::vector<std::pair<const char*, const std::vector<std::string>*>>{
           {"keys", &keys},
           {"features_per_rank", &fpr},
           {"stagger", &stagger},
           {"values dtype", &dtype},
           {"weighted", &weighted}}) {
    absl::Status same = CheckSame(op, *column, absl::StrCat(name, " ", field));
    if (!same.ok()) return same;
  }
  return absl::OkStatus();
}

// Copies 1-D `pieces` back to back into one new tensor of `dtype`.
absl::StatusOr<Tensor> Join(DType dtype, const std::vector<Tensor>& pieces) {
  int64_t n = 0;
  for (const Tensor& t : pieces) n += t.numel();
  absl::StatusOr<TensorBuilder> out = TensorBuilder::Create(dtype, {n});
  if (!out.ok()) return out.status();
  char* at = out->data();
  for (const Tensor& t : pieces) {
    if (t.nbytes() > 0) std::memcpy(at, t.data(), t.nbytes());
    at += t.nbytes();
  }
  return std::move(*out).Build();
}

// Source s's slice of part `p` (its tensors from `*at` on) as a KJT of
// this rank's keys, checked against the metadata every rank agreed on.
absl::StatusOr<KeyedJaggedTensor> SliceFrom(const Op& op, const JaggedPart& p,
                                            int s, int64_t stride,
                                            const std::vector<Tensor>& tensors,
                                            size_t* at) {
  const bool weighted = p.kjt.weights().has_value();
  const int64_t features = p.features_per_rank[op.rank()];
  const size_t need = weighted ? 3 : 2;
  if (tensors.size() - *at < need || stride < 0 ||
      tensors[*at + 1].dtype() != p.kjt.values().dtype()) {
    return op.Malformed(s, absl::StrCat(p.name, " slice"));
  }
  std::optional<Tensor> weights;
  if (weighted) weights = tensors[*at + 2];
  absl::StatusOr<KeyedJaggedTensor> k = KeyedJaggedTensor::Create(
      std::vector<std::string>(features, ""), tensors[*at], tensors[*at + 1],
      std::move(weights), stride, p.name);
  *at += need;
  if (!k.ok() || (features > 0 && k->stride() != stride))
    return op.Malformed(s, k.ok() ? "stride" : k.status().message());
  return k;
}

// This rank's output of part `i` from every source's message.
absl::StatusOr<KeyedJaggedTensor> Assemble(
    const Op& op, const JaggedPart& p, int i, int64_t stagger,
    const std::vector<proto::KjtHeader>& h, const std::vector<Message>& got,
    std::vector<size_t>* at) {
  const int n = op.size(), me = op.rank();
  std::vector<KeyedJaggedTensor> from(n);
  int64_t stride = 0;
  for (int s = 0; s < n; ++s) {
    const int64_t b = h[s].parts(i).stride();
    absl::StatusOr<KeyedJaggedTensor> k =
        SliceFrom(op, p, s, b, got[s].tensors, &(*at)[s]);
    if (!k.ok()) return k.status();
    // With no keys here a peer's stride is checked by nothing else: the
    // sum must not overflow.
    if (b > std::numeric_limits<int64_t>::max() - stride)
      return op.Malformed(s, absl::StrCat(p.name, " stride"));
    from[s] = *std::move(k);
    stride += b;
  }
  std::vector<Tensor> lengths, values, weights;
  for (int64_t f = 0; f < p.features_per_rank[me]; ++f) {
    for (int x = 0; x < n / stagger; ++x) {
      for (int y = 0; y < stagger; ++y) {
        const KeyedJaggedTensor& k = from[x + (n / stagger) * y];
        lengths.push_back(
            *k.lengths().Rows(f * k.stride(), (f + 1) * k.stride()));
        values.push_back(k.ValuesOfKey(static_cast<int>(f)));
        if (k.weights()) {
          weights.push_back(
              *k.weights()->Rows(k.key_offset(f), k.key_offset(f + 1)));
        }
      }
    }
  }
  absl::StatusOr<Tensor> out_lengths = Join(DType::kInt64, lengths);
  absl::StatusOr<Tensor> out_values = Join(p.kjt.values().dtype(), values);
  if (!out_lengths.ok()) return out_lengths.status();
  if (!out_values.ok()) return out_values.status();
  std::optional<Tensor> out_weights;
  if (p.kjt.weights()) {
    absl::StatusOr<Tensor> w = Join(DType::kFloat32, weights);
    if (!w.ok()) return w.status();
    out_weights = *std::move(w);
  }
  int64_t key0 = 0;
  for (int r = 0; r < me; ++r) key0 += p.features_per_rank[r];
  std::vector<std::string> keys(
      p.kjt.keys().begin() + key0,
      p.kjt.keys().begin() + key0 + p.features_per_rank[me]);
  return KeyedJaggedTensor::Create(std::move(keys), *std::move(out_lengths),
                                   *std::move(out_values),
                                   std::move(out_weights), stride, p.name);
}

void Received(Result<std::vector<KeyedJaggedTensor>> result, JaggedArgs args,
              std::vector<Message> got) {
  Op& op = result.op();
  const int n = op.size();
  std::vector<proto::KjtHeader> h(n);
  for (int r = 0; r < n; ++r) {
    if (!ReadHeader(got[r], &h[r]) ||
        h[r].parts_size() != static_cast<int>(args.parts.size())) {
      return op.Fail(op.Malformed(r, "not a jagged all-to-all header"));
    }
  }
  std::vector<size_t> at(n, 0);  // Per source: its next tensor.
  std::vector<KeyedJaggedTensor> out;
  for (size_t i = 0; i < args.parts.size(); ++i) {
    const JaggedPart& p = args.parts[i];
    absl::Status same = CheckPart(op, p.name, static_cast<int>(i), h);
    if (!same.ok()) return op.Fail(same);
    absl::StatusOr<KeyedJaggedTensor> k =
        Assemble(op, p, static_cast<int>(i), args.stagger, h, got, &at);
    if (!k.ok()) return op.Fail(k.status());
    out.push_back(*std::move(k));
  }
  std::move(result).Set(std::move(out));
}

}  // namespace

void JaggedAllToAll(Result<std::vector<KeyedJaggedTensor>> result,
                    JaggedArgs args) {
  Op& op = result.op();
  const int n = op.size();
  if (args.stagger < 1 || n % args.stagger != 0) {
    return op.Fail(op.BadInput(absl::StrCat(
        "stagger ", args.stagger, " does not divide the group size ", n)));
  }
  std::vector<std::vector<int64_t>> first(args.parts.size());
  proto::KjtHeader header;
  header.set_stagger(args.stagger);
  for (size_t i = 0; i < args.parts.size(); ++i) {
    absl::StatusOr<std::vector<int64_t>> f = FirstFeatures(op, args.parts[i]);
    if (!f.ok()) return op.Fail(f.status());
    first[i] = *std::move(f);
    *header.add_parts() = HeaderOf(args.parts[i]);
  }
  // Built before the call, which moves `args` on.
  std::vector<Message> messages(n, Message{header.SerializeAsString()});
  for (int to = 0; to < n; ++to) {
    for (size_t i = 0; i < args.parts.size(); ++i) {
      AddSlice(args.parts[i].kjt, first[i][to], first[i][to + 1],
               &messages[to].tensors);
    }
  }
  op.ExchangeEach(
      0, [&](int to) { return std::move(messages[to]); },
      [result = std::move(result),
       args = std::move(args)](std::vector<Message> got) mutable {
        Received(std::move(result), std::move(args), std::move(got));
      });
}

}  // namespace algorithms
}  // namespace ferry
