// Fuzz target: KeyedJaggedTensor construction (collectives/algorithms/kjt.h)
// and its display (the `show` of tools/ferryctl/pretty.h).
//
// Input: the first byte picks the form.
//   even: JSON of a KJT-shaped map → KeyedJaggedTensor::FromValue, and
//         Pretty of the map as written (malformed KJTs included);
//   odd:  raw fields: keys count, lengths as int64 words (any values),
//         a values count, weights or not, a stride → Create.
// Properties: no crash; a KJT that builds answers every accessor within
// its tensors, and its Value forms rebuild the same KJT.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "collectives/algorithms/kjt.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor.h"
#include "tools/ferryctl/pretty.h"

namespace ferry {
namespace {

// Reads fixed-size fields off the front of the input; zeros once empty.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  template <typename T>
  T Take() {
    T v{};
    const size_t n = std::min(sizeof(T), size_);
    std::memcpy(&v, data_, n);
    data_ += n;
    size_ -= n;
    return v;
  }
  size_t left() const { return size_; }

 private:
  const uint8_t* data_;
  size_t size_;
};

void Exercise(const KeyedJaggedTensor& k) {
  // Bounded walk: at most 64 samples of each key.
  for (int key = 0; key < k.num_keys(); ++key) {
    Tensor all = k.ValuesOfKey(key);
    int64_t sum = 0;
    for (int64_t s = 0; s < k.stride() && s < 64; ++s) {
      sum += k.ValuesOf(key, s).numel();
      if (k.length(key, s) < 0) std::abort();
    }
    if (k.stride() <= 64 && sum != all.numel()) std::abort();
  }
  absl::StatusOr<KeyedJaggedTensor> again =
      KeyedJaggedTensor::FromValue(k.ToValue(), "again");
  if (!again.ok() || *again != k) std::abort();
  absl::StatusOr<KeyedJaggedTensor> plain =
      KeyedJaggedTensor::FromValue(k.ToPlainValue(), "plain");
  if (!plain.ok()) std::abort();
  ctl::Pretty(k.ToValue());
}

void FromJson(absl::string_view text) {
  absl::StatusOr<Value> v = ParseJson(text);
  if (!v.ok()) return;
  ctl::Pretty(*v);
  absl::StatusOr<KeyedJaggedTensor> k = KeyedJaggedTensor::FromValue(*v, "f");
  if (k.ok()) Exercise(*k);
}

void FromFields(Reader in) {
  const int keys = in.Take<uint8_t>() % 8;
  const int64_t n_lengths = in.Take<uint8_t>() % 64;
  std::vector<int64_t> lengths;
  for (int64_t i = 0; i < n_lengths; ++i) lengths.push_back(in.Take<int64_t>());
  const int64_t n_values = in.Take<uint16_t>() % 512;
  const uint8_t flags = in.Take<uint8_t>();
  std::optional<int64_t> stride;
  if (flags & 1) stride = in.Take<int64_t>();
  std::vector<std::string> names;
  for (int i = 0; i < keys; ++i) names.push_back(std::string(1, 'a' + i));
  std::optional<Tensor> weights;
  if (flags & 2) weights = Tensor::FromVector(std::vector<float>(n_values, 1));
  absl::StatusOr<KeyedJaggedTensor> k = KeyedJaggedTensor::Create(
      names, Tensor::FromVector(lengths),
      Tensor::FromVector(std::vector<int64_t>(n_values, 3)), weights, stride);
  // The same fields as a map, shown as `show` would.
  Value::List key_list(names.begin(), names.end());
  ctl::Pretty(Value(Value::Map{
      {"keys", Value(key_list)},
      {"lengths", Value(Tensor::FromVector(lengths))},
      {"values",
       Value(Tensor::FromVector(std::vector<int64_t>(n_values, 3)))}}));
  if (k.ok()) Exercise(*k);
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0) {
    ferry::FromJson(
        absl::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  } else {
    ferry::FromFields(ferry::Reader(data + 1, size - 1));
  }
  return 0;
}
