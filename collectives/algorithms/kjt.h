// KeyedJaggedTensor (TorchRec's sparse features): for each of `keys` and
// each of `stride` samples, a variable-length list of values.
//
//   keys    = ["A", "B"]                 stride (batch size) = 3
//   lengths = [1, 0, 2,   0, 1, 1]       key-major: keys × stride entries
//   values  = [a0, a1, a2,   b0, b1]     sum(lengths) entries, any dtype
//   weights = [.., .., ..,   .., ..]     optional, float32, like values
//
// A KJT is immutable and cheap to copy (tensors share their bytes).
#ifndef FERRY_COLLECTIVES_ALGORITHMS_KJT_H_
#define FERRY_COLLECTIVES_ALGORITHMS_KJT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

class KeyedJaggedTensor {
 public:
  // An empty KJT: no keys, stride 0.
  KeyedJaggedTensor();

  // Checks and builds. `lengths`: a 1-D integer tensor of keys × stride
  // non-negative entries (stored as int64); `values`: 1-D, sum(lengths)
  // entries; `weights`: float32 like `values`. `stride` is needed only when
  // there are no keys (otherwise it is lengths / keys), and is at most
  // --max_tensor_dim's default. Lengths are summed with overflow checks and
  // must add up to the number of values (whatever a peer sent).
  // INVALID_ARGUMENT naming the field (prefixed with `what`, e.g. "id_list").
  static absl::StatusOr<KeyedJaggedTensor> Create(
      std::vector<std::string> keys, Tensor lengths, Tensor values,
      std::optional<Tensor> weights = std::nullopt,
      std::optional<int64_t> stride = std::nullopt,
      absl::string_view what = "kjt");

  // From the JSON-shaped Value {"keys":[…], "lengths":…, "values":…,
  // "weights"?:…, "stride"?: n}: lengths, values and weights as tensors or
  // plain lists (lengths and values of integers — int64; weights of
  // numbers — float32).
  static absl::StatusOr<KeyedJaggedTensor> FromValue(const Value& v,
                                                     absl::string_view what);
  // The Value form, with tensors ("stride" only when there are no keys).
  Value ToValue() const;
  // The same with lengths, int64 values and weights as plain lists, the
  // form people write by hand.
  Value ToPlainValue() const;

  const std::vector<std::string>& keys() const { return keys_; }
  int num_keys() const { return static_cast<int>(keys_.size()); }
  int64_t stride() const { return stride_; }
  // int64, keys × stride.
  const Tensor& lengths() const { return lengths_; }
  const Tensor& values() const { return values_; }
  const std::optional<Tensor>& weights() const { return weights_; }

  // The length of `key`'s list for `sample`.
  int64_t length(int key, int64_t sample) const;
  // Where key `key`'s values begin (key == num_keys(): the end).
  int64_t key_offset(int key) const { return key_offsets_[key]; }
  // Values of `key` for every sample; of `key` for one sample.
  Tensor ValuesOfKey(int key) const;
  Tensor ValuesOf(int key, int64_t sample) const;

  friend bool operator==(const KeyedJaggedTensor& a,
                         const KeyedJaggedTensor& b);
  friend bool operator!=(const KeyedJaggedTensor& a,
                         const KeyedJaggedTensor& b) {
    return !(a == b);
  }

 private:
  std::vector<std::string> keys_;
  int64_t stride_ = 0;
  Tensor lengths_;
  Tensor values_;
  std::optional<Tensor> weights_;
  std::vector<int64_t> key_offsets_;  // num_keys + 1 entries.
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_ALGORITHMS_KJT_H_
