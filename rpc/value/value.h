// Value: what functions take and return, and what collectives carry.
//
//   null | bool | int64 | double | string | bytes | Tensor | list | map | RRef
//
// Values are regular types: copying a Value copies lists and maps but shares
// tensor bytes. Strings are UTF-8 text; arbitrary bytes go in Bytes.
#ifndef FERRY_RPC_VALUE_VALUE_H_
#define FERRY_RPC_VALUE_VALUE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/variant.h"
#include "rpc/value/tensor.h"

namespace ferry {

// A globally unique id: the creating node and a per-creator counter.
// Workers are nodes 0..world_size-1 (their rank); clients get ids from the
// master at or above kFirstClientNode.
struct GlobalId {
  uint64_t node = 0;
  uint64_t local = 0;

  friend bool operator==(const GlobalId& a, const GlobalId& b) {
    return a.node == b.node && a.local == b.local;
  }
  friend bool operator!=(const GlobalId& a, const GlobalId& b) {
    return !(a == b);
  }
  friend bool operator<(const GlobalId& a, const GlobalId& b) {
    return a.node != b.node ? a.node < b.node : a.local < b.local;
  }
  template <typename H>
  friend H AbslHashValue(H h, const GlobalId& id) {
    return H::combine(std::move(h), id.node, id.local);
  }
};

inline constexpr uint64_t kFirstClientNode = uint64_t{1} << 32;

// "w3.17" for ids created by worker 3, "c1.5" for client 1.
std::string GlobalIdString(const GlobalId& id);
// Inverse of GlobalIdString; INVALID_ARGUMENT if malformed.
absl::StatusOr<GlobalId> ParseGlobalId(absl::string_view text);

// An RRef as a Value holds it: its identity, defined with the wire's
// descriptor in rpc/value/rref_base.h (what codecs and the rref/ layer
// use). A user goes from a Value to an RRef with RRef::FromValue.
class RRefBase;

// Uninterpreted bytes (a distinct kind from UTF-8 strings).
struct Bytes {
  std::string data;
  friend bool operator==(const Bytes& a, const Bytes& b) {
    return a.data == b.data;
  }
};

class Value {
 public:
  // Arguments are a std::vector<Value> too: pass one list argument as
  // `{Value(list)}`. A bare `{list}` is, for clang, the argument vector
  // itself (its items become the arguments); GCC takes it as one argument.
  using List = std::vector<Value>;
  using Map = std::map<std::string, Value>;
  using RRefPtr = std::shared_ptr<const RRefBase>;

  enum class Kind {
    kNull,
    kBool,
    kInt,
    kDouble,
    kString,
    kBytes,
    kTensor,
    kList,
    kMap,
    kRRef
  };

  Value() = default;
  Value(std::nullptr_t) {}                            // NOLINT
  Value(bool b) : v_(b) {}                            // NOLINT
  Value(double d) : v_(d) {}                          // NOLINT
  Value(const char* s) : v_(std::string(s)) {}        // NOLINT
  Value(std::string s) : v_(std::move(s)) {}          // NOLINT
  Value(absl::string_view s) : v_(std::string(s)) {}  // NOLINT
  Value(Bytes b) : v_(std::move(b)) {}                // NOLINT
  Value(Tensor t) : v_(std::move(t)) {}               // NOLINT
  Value(List l) : v_(std::move(l)) {}                 // NOLINT
  Value(Map m) : v_(std::move(m)) {}                  // NOLINT
  Value(RRefPtr r) : v_(std::move(r)) {}              // NOLINT
  template <typename T, std::enable_if_t<std::is_integral<T>::value &&
                                             !std::is_same<T, bool>::value,
                                         int> = 0>
  Value(T i) : v_(static_cast<int64_t>(i)) {}  // NOLINT

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_double() const { return kind() == Kind::kDouble; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_bytes() const { return kind() == Kind::kBytes; }
  bool is_tensor() const { return kind() == Kind::kTensor; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_map() const { return kind() == Kind::kMap; }
  bool is_rref() const { return kind() == Kind::kRRef; }

  // Unchecked accessors: the kind must match (absl::get throws otherwise,
  // which aborts since ferry builds without exceptions crossing its API).
  bool as_bool() const { return absl::get<bool>(v_); }
  int64_t as_int() const { return absl::get<int64_t>(v_); }
  double as_double() const { return absl::get<double>(v_); }
  // An int or a double, as double.
  double as_number() const {
    return is_int() ? static_cast<double>(as_int()) : as_double();
  }
  const std::string& as_string() const { return absl::get<std::string>(v_); }
  const Bytes& as_bytes() const { return absl::get<Bytes>(v_); }
  const Tensor& as_tensor() const { return absl::get<Tensor>(v_); }
  const List& as_list() const { return absl::get<List>(v_); }
  List& as_list() { return absl::get<List>(v_); }
  const Map& as_map() const { return absl::get<Map>(v_); }
  Map& as_map() { return absl::get<Map>(v_); }
  const RRefPtr& as_rref() const { return absl::get<RRefPtr>(v_); }

  // Map lookup; nullptr if this is not a map or has no such key.
  const Value* Find(absl::string_view key) const;

  // Structural equality. Doubles compare with ==; RRefs by descriptor;
  // int 1 and double 1.0 differ (different kinds).
  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

  // "null", "bool", "int", "double", "string", "bytes", "tensor", "list",
  // "map", "rref".
  absl::string_view kind_name() const;

 private:
  absl::variant<absl::monostate, bool, int64_t, double, std::string, Bytes,
                Tensor, List, Map, RRefPtr>
      v_;
};

// Deepest nesting of lists and maps allowed in a Value.
inline constexpr int kMaxValueDepth = 64;

// Nesting depth of lists/maps: a scalar is 0, [1] is 1, [[1]] is 2.
int ValueDepth(const Value& value);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_VALUE_H_
