// Fuzz target: JSON text → Value (json.h), tensor JSON and `$NAME`
// substitution included. Properties: no crash; whatever parses prints,
// and what it prints reads back to the same JSON.
//
// `$NAME` resolves from a fixed table: a list nested 60 deep (so a
// substitution nests past kMaxValueDepth), a wide list, a tensor with a
// zero dimension, a KJT-shaped map, a string; other names are unset.
// The first byte's low bit picks default or tight limits.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

#include "absl/strings/string_view.h"
#include "rpc/base/limits.h"
#include "rpc/value/json.h"
#include "rpc/value/json_parse.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {
namespace {

Value Nested(int depth) {
  Value v = Value(int64_t{1});
  for (int i = 0; i < depth; ++i) v = Value(Value::List{v});
  return v;
}

const std::map<std::string, Value>& Variables() {
  static const auto* vars = new std::map<std::string, Value>{
      {"D", Nested(60)},
      {"W", Value(Value::List(1000, Value(int64_t{7})))},
      {"T", Value(*Tensor::FromBytes(DType::kInt64, {3, 0}, ""))},
      {"K",
       Value(Value::Map{{"keys", Value(Value::List{Value("a"), Value("b")})},
                        {"lengths", Value(Value::List{Value(int64_t{1}),
                                                      Value(int64_t{0})})},
                        {"values", Value(Value::List{Value(int64_t{5})})}})},
      {"S", Value("text")},
  };
  return *vars;
}

Limits TightLimits() {
  Limits l;
  l.max_items = 64;
  l.max_string_bytes = 64;
  l.max_tensor_rank = 4;
  l.max_tensor_dim = 1024;
  return l;
}

void Check(absl::string_view text, const Limits& limits) {
  JsonParseOptions options;
  options.limits = &limits;
  options.resolve_variable =
      [](absl::string_view name) -> absl::StatusOr<Value> {
    auto it = Variables().find(std::string(name));
    if (it == Variables().end()) return absl::NotFoundError("unset");
    return it->second;
  };
  absl::StatusOr<Value> v = ParseJson(text, options);
  if (!v.ok()) return;
  const std::string json = ToJson(*v);
  absl::StatusOr<Value> again = ParseJson(json, options);
  // A map whose first key is "$bytes" or "dtype" does not read back as a
  // map (json.h); everything else does, to the same text.
  if (again.ok() && ToJson(*again) != json) std::abort();
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const ferry::Limits* const tight =
      new ferry::Limits(ferry::TightLimits());
  const bool use_tight = data[0] & 1;
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  ferry::Check(text, use_tight ? *tight : ferry::DefaultLimits());
  return 0;
}
