#include "collectives/algorithms/kjt.h"

#include <charconv>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_math.h"

namespace ferry {

namespace {

absl::Status Bad(absl::string_view what, absl::string_view field,
                 absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, ".", field, " ", why));
}

// A 1-D tensor from a tensor or a plain list: of integers (int64), or with
// `weights`, of numbers (float32).
absl::StatusOr<Tensor> Column(const Value& v, absl::string_view what,
                              absl::string_view field, bool weights) {
  if (v.is_tensor()) return v.as_tensor();
  if (!v.is_list()) {
    return Bad(what, field,
               absl::StrCat("must be a list or a tensor, got ", v.kind_name()));
  }
  const Value::List& list = v.as_list();
  std::vector<int64_t> ints;
  std::vector<float> floats;
  for (size_t i = 0; i < list.size(); ++i) {
    const Value& x = list[i];
    if (weights ? !x.is_number() : !x.is_int()) {
      return Bad(what, absl::StrCat(field, "[", i, "]"),
                 absl::StrCat("must be ", weights ? "a number" : "an integer",
                              ", got ", x.kind_name()));
    }
    if (weights) {
      floats.push_back(static_cast<float>(x.as_number()));
    } else {
      ints.push_back(x.as_int());
    }
  }
  return weights ? Tensor::FromVector<float>(floats)
                 : Tensor::FromVector<int64_t>(ints);
}

Value PlainList(const Tensor& t) {
  Value::List out;
  if (t.dtype() == DType::kInt64) {
    for (int64_t x : t.ToVector<int64_t>()) out.push_back(Value(x));
  } else {
    // Each float as the double of its shortest decimal form, so 1.3f
    // prints 1.3 rather than 1.2999999523162842.
    for (float x : Cast(t, DType::kFloat32).ToVector<float>()) {
      char buf[32];
      auto end = std::to_chars(buf, buf + sizeof(buf), x).ptr;
      out.push_back(Value(std::strtod(std::string(buf, end).c_str(), nullptr)));
    }
  }
  return Value(std::move(out));
}

}  // namespace

KeyedJaggedTensor::KeyedJaggedTensor()
    : lengths_(Tensor::FromVector<int64_t>({})),
      values_(Tensor::FromVector<int64_t>({})),
      key_offsets_{0} {}

absl::StatusOr<KeyedJaggedTensor> KeyedJaggedTensor::Create(
    std::vector<std::string> keys, Tensor lengths, Tensor values,
    std::optional<Tensor> weights, std::optional<int64_t> stride,
    absl::string_view what) {
  if (lengths.rank() != 1 || KindOf(lengths.dtype()) != DTypeKind::kInteger) {
    return Bad(what, "lengths",
               absl::StrCat("must be a 1-D integer tensor, got ",
                            lengths.DebugString()));
  }
  if (values.rank() != 1) {
    return Bad(what, "values",
               absl::StrCat("must be 1-D, got ", values.DebugString()));
  }
  KeyedJaggedTensor k;
  k.lengths_ = Cast(lengths, DType::kInt64);
  const int64_t n = k.lengths_.numel();
  if (keys.empty()) {
    if (n != 0)
      return Bad(what, "lengths", "must be empty when there are no keys");
    if (stride && *stride < 0) return Bad(what, "stride", "must be >= 0");
    // A batch size no honest KJT has would size whatever walks its samples.
    const int64_t max_stride = DefaultLimits().max_tensor_dim;
    if (stride && *stride > max_stride) {
      return Bad(what, "stride",
                 absl::StrCat("is ", *stride, ", ",
                              LimitNote(absl::StrCat(max_stride),
                                        "max_tensor_dim", max_stride)));
    }
    k.stride_ = stride.value_or(0);
  } else {
    if (n % static_cast<int64_t>(keys.size()) != 0) {
      return Bad(what, "lengths",
                 absl::StrCat("has ", n, " entries, not a multiple of the ",
                              keys.size(), " keys"));
    }
    k.stride_ = n / static_cast<int64_t>(keys.size());
    if (stride && *stride != k.stride_) {
      return Bad(what, "stride",
                 absl::StrCat("is ", *stride, " but lengths give ", k.stride_));
    }
  }
  const int64_t* len = k.lengths_.data_as<int64_t>();
  int64_t total = 0;
  k.key_offsets_ = {0};
  for (int64_t i = 0; i < n; ++i) {
    if (len[i] < 0) {
      return Bad(what, absl::StrCat("lengths[", i, "]"),
                 absl::StrCat("is negative (", len[i], ")"));
    }
    if (__builtin_add_overflow(total, len[i], &total)) {
      return Bad(what, "lengths", "add up to more than 2^63");
    }
    if ((i + 1) % k.stride_ == 0) k.key_offsets_.push_back(total);
  }
  if (total != values.numel()) {
    return Bad(what, "values",
               absl::StrCat("has ", values.numel(),
                            " entries but the lengths add up to ", total));
  }
  if (weights) {
    if (weights->dtype() != DType::kFloat32 || weights->rank() != 1 ||
        weights->numel() != values.numel()) {
      return Bad(
          what, "weights",
          absl::StrCat("must be float32 with one weight per value (",
                       values.numel(), "), got ", weights->DebugString()));
    }
  }
  while (static_cast<int>(k.key_offsets_.size()) <=
         static_cast<int>(keys.size())) {
    k.key_offsets_.push_back(total);  // Keys with stride 0.
  }
  k.keys_ = std::move(keys);
  k.values_ = std::move(values);
  k.weights_ = std::move(weights);
  return k;
}

absl::StatusOr<KeyedJaggedTensor> KeyedJaggedTensor::FromValue(
    const Value& v, absl::string_view what) {
  if (!v.is_map()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " must be a map {\"keys\", \"lengths\", \"values\", "
                     "\"weights\"?}, got ",
                     v.kind_name()));
  }
  for (const auto& [field, x] : v.as_map()) {
    if (field != "keys" && field != "lengths" && field != "values" &&
        field != "weights" && field != "stride") {
      return Bad(what, field,
                 "is not a KJT field (keys, lengths, values, weights, stride)");
    }
  }
  std::vector<std::string> keys;
  const Value* k = v.Find("keys");
  if (k == nullptr || !k->is_list())
    return Bad(what, "keys", "must be a list of strings");
  for (const Value& key : k->as_list()) {
    if (!key.is_string()) return Bad(what, "keys", "must be a list of strings");
    keys.push_back(key.as_string());
  }
  const Value empty{Value::List{}};
  const Value* lengths = v.Find("lengths");
  const Value* values = v.Find("values");
  const Value* weights = v.Find("weights");
  const Value* stride = v.Find("stride");
  FERRY_ASSIGN_OR_RETURN(
      Tensor l, Column(lengths ? *lengths : empty, what, "lengths", false));
  FERRY_ASSIGN_OR_RETURN(
      Tensor vals, Column(values ? *values : empty, what, "values", false));
  std::optional<Tensor> w;
  if (weights != nullptr && !weights->is_null()) {
    FERRY_ASSIGN_OR_RETURN(w, Column(*weights, what, "weights", true));
  }
  std::optional<int64_t> s;
  if (stride != nullptr) {
    if (!stride->is_int()) return Bad(what, "stride", "must be an integer");
    s = stride->as_int();
  }
  return Create(std::move(keys), std::move(l), std::move(vals), std::move(w), s,
                what);
}

Value KeyedJaggedTensor::ToValue() const {
  Value::List keys(keys_.begin(), keys_.end());
  Value::Map m = {{"keys", Value(std::move(keys))},
                  {"lengths", lengths_},
                  {"values", values_}};
  if (weights_) m["weights"] = *weights_;
  if (keys_.empty()) m["stride"] = stride_;
  return Value(std::move(m));
}

Value KeyedJaggedTensor::ToPlainValue() const {
  Value v = ToValue();
  Value::Map& m = v.as_map();
  m["lengths"] = PlainList(lengths_);
  if (values_.dtype() == DType::kInt64) m["values"] = PlainList(values_);
  if (weights_) m["weights"] = PlainList(*weights_);
  return v;
}

int64_t KeyedJaggedTensor::length(int key, int64_t sample) const {
  return lengths_.data_as<int64_t>()[key * stride_ + sample];
}

Tensor KeyedJaggedTensor::ValuesOfKey(int key) const {
  return *values_.Rows(key_offsets_[key], key_offsets_[key + 1]);
}

Tensor KeyedJaggedTensor::ValuesOf(int key, int64_t sample) const {
  int64_t begin = key_offsets_[key];
  for (int64_t s = 0; s < sample; ++s) begin += length(key, s);
  return *values_.Rows(begin, begin + length(key, sample));
}

bool operator==(const KeyedJaggedTensor& a, const KeyedJaggedTensor& b) {
  return a.keys_ == b.keys_ && a.stride_ == b.stride_ &&
         a.lengths_ == b.lengths_ && a.values_ == b.values_ &&
         a.weights_ == b.weights_;
}

}  // namespace ferry
