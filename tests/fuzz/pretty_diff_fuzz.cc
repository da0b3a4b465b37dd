// Fuzz target: how ferryctl shows values (tools/ferryctl/pretty.h) and
// says where two differ (value_diff.h).
//
// Input: the first byte picks the form.
//   even: two JSON values one after the other → Pretty of each, their
//         first difference both ways, and each against itself;
//   odd:  a tensor from raw fields: dtype, rank, dims as int64 words (any
//         values: the shape rules refuse what they must), then its bytes →
//         Pretty, and the difference from itself with one byte changed.
// Properties: no crash; printing stays bounded (the output is at most a
// MiB whatever the shape); a value equals itself, and values with the
// same JSON are equal, unless they hold a NaN.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "rpc/base/limits.h"
#include "rpc/value/json.h"
#include "rpc/value/json_parse.h"
#include "rpc/value/tensor.h"
#include "tools/ferryctl/pretty.h"
#include "tools/ferryctl/value_diff.h"

namespace ferry {
namespace {

constexpr size_t kMaxPrinted = 1 << 20;

void Show(const Value& v) {
  if (ctl::Pretty(v).size() > kMaxPrinted + 64 * ToJson(v).size()) {
    std::abort();
  }
}

void FromJson(absl::string_view text) {
  JsonParseOptions options;
  size_t consumed = 0;
  options.consumed = &consumed;
  absl::StatusOr<Value> a = ParseJson(text, options);
  if (!a.ok()) return;
  absl::StatusOr<Value> b = ParseJson(text.substr(consumed), options);
  Show(*a);
  if (ToJson(*a).find("$double") == std::string::npos &&
      ctl::FirstDifference(*a, *a).has_value()) {
    std::abort();
  }
  if (!b.ok()) return;
  Show(*b);
  // The same JSON means the same value (not conversely: -0.0 == 0.0).
  const bool same = ToJson(*a) == ToJson(*b);
  const bool nan = ToJson(*a).find("NaN") != std::string::npos;
  if (!nan && same && ctl::FirstDifference(*a, *b).has_value()) std::abort();
  ctl::FirstDifference(*b, *a);
}

void FromFields(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const DType dtype = kAllDTypes[data[0] % 12];
  const int rank = data[1] % 8;
  data += 2;
  size -= 2;
  Shape shape;
  for (int i = 0; i < rank; ++i) {
    int64_t d = 0;
    const size_t n = std::min(sizeof(d), size);
    std::memcpy(&d, data, n);
    data += n;
    size -= n;
    shape.push_back(d);
  }
  absl::StatusOr<int64_t> numel = CheckShape(shape, dtype, DefaultLimits());
  if (!numel.ok()) return;
  const int64_t nbytes = *numel * static_cast<int64_t>(ItemSize(dtype));
  if (nbytes > static_cast<int64_t>(size)) return;
  std::string bytes(reinterpret_cast<const char*>(data), nbytes);
  if (dtype == DType::kBool) {
    for (char& c : bytes) c &= 1;
  }
  absl::StatusOr<Tensor> t = Tensor::FromBytes(dtype, shape, bytes);
  if (!t.ok()) std::abort();  // CheckShape and the byte count held.
  Show(Value(*t));
  if (bytes.empty()) return;
  bytes[bytes.size() / 2] ^= 1;
  absl::StatusOr<Tensor> u = Tensor::FromBytes(dtype, shape, bytes);
  if (u.ok() && !ctl::FirstDifference(Value(*t), Value(*u)).has_value()) {
    std::abort();
  }
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    ferry::FromJson(
        absl::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  } else {
    ferry::FromFields(data + 1, size - 1);
  }
  return 0;
}
