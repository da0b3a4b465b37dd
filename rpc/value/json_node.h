// Internal to //rpc:json: the parsed JSON tree, before it becomes a Value.
// Kept separate so tensor objects can be interpreted with positions at hand.
#ifndef FERRY_RPC_VALUE_JSON_NODE_H_
#define FERRY_RPC_VALUE_JSON_NODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rpc/base/limits.h"
#include "rpc/value/json.h"
#include "rpc/value/json_parse.h"
#include "rpc/value/value.h"

namespace ferry {
namespace json_internal {

struct JsonMember;

struct JsonNode {
  enum class Type {
    kNull,
    kBool,
    kInt,
    kDouble,
    kString,
    kArray,
    kObject,
    kResolved
  };
  Type type = Type::kNull;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;
  std::vector<JsonNode> items;
  std::vector<JsonMember> members;  // In source order.
  Value resolved;                   // A `$NAME` substituted by the caller.
  // kInt, kDouble: the number as written (points into the parsed text, so
  // valid only while ParseJson runs), for element types that must be read
  // from the text itself (float32: no double rounding).
  absl::string_view number;
  int line = 1;
  int column = 1;

  const JsonNode* Member(absl::string_view key) const;
};

// One "key": value of an object. (A struct, not std::pair: pair may not
// hold the incomplete JsonNode.)
struct JsonMember {
  std::string key;
  JsonNode value;
};

inline const JsonNode* JsonNode::Member(absl::string_view key) const {
  for (const JsonMember& m : members) {
    if (m.key == key) return &m.value;
  }
  return nullptr;
}

// `code` with "json: line L, column C: <message>", the position also as a
// payload (read back by ParseErrorPosition).
absl::Status PositionedError(absl::StatusCode code, const JsonNode& node,
                             absl::string_view message);

// INVALID_ARGUMENT at `node` (PositionedError).
absl::Status ErrorAt(const JsonNode& node, absl::string_view message);

// Fills `out` from a PositionedError status (just the message otherwise).
void ParseErrorPosition(const absl::Status& status, JsonErrorPosition* out);

// Interprets an object with a "dtype" key as a tensor whose shape keeps
// within `limits` (tensor.h's shape rules).
absl::StatusOr<Tensor> TensorFromJson(const JsonNode& node,
                                      const Limits& limits);

// Appends the JSON of `tensor` to `out`.
void AppendTensorJson(const Tensor& tensor, std::string* out);

}  // namespace json_internal
}  // namespace ferry

#endif  // FERRY_RPC_VALUE_JSON_NODE_H_
