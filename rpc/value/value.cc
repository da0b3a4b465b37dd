#include "rpc/value/value.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/value/rref_base.h"

namespace ferry {

std::string GlobalIdString(const GlobalId& id) {
  if (id.node >= kFirstClientNode) {
    return absl::StrCat("c", id.node - kFirstClientNode, ".", id.local);
  }
  return absl::StrCat("w", id.node, ".", id.local);
}

absl::StatusOr<GlobalId> ParseGlobalId(absl::string_view text) {
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "malformed id '", text, "' (expected w<rank>.<n> or c<client>.<n>)"));
  };
  if (text.size() < 4 || (text[0] != 'w' && text[0] != 'c')) return bad();
  size_t dot = text.find('.');
  if (dot == absl::string_view::npos) return bad();
  GlobalId id;
  if (!absl::SimpleAtoi(text.substr(1, dot - 1), &id.node) ||
      !absl::SimpleAtoi(text.substr(dot + 1), &id.local)) {
    return bad();
  }
  if (text[0] == 'c') id.node += kFirstClientNode;
  return id;
}

const Value* Value::Find(absl::string_view key) const {
  if (!is_map()) return nullptr;
  auto it = as_map().find(std::string(key));
  return it == as_map().end() ? nullptr : &it->second;
}

bool operator==(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_rref()) {
    return a.as_rref()->descriptor() == b.as_rref()->descriptor();
  }
  return a.v_ == b.v_;
}

absl::string_view Value::kind_name() const {
  switch (kind()) {
    case Kind::kNull:
      return "null";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kDouble:
      return "double";
    case Kind::kString:
      return "string";
    case Kind::kBytes:
      return "bytes";
    case Kind::kTensor:
      return "tensor";
    case Kind::kList:
      return "list";
    case Kind::kMap:
      return "map";
    case Kind::kRRef:
      return "rref";
  }
  return "invalid";
}

int ValueDepth(const Value& value) {
  int deepest = 0;
  if (value.is_list()) {
    for (const Value& v : value.as_list()) {
      deepest = std::max(deepest, ValueDepth(v));
    }
    return deepest + 1;
  }
  if (value.is_map()) {
    for (const auto& [key, v] : value.as_map()) {
      deepest = std::max(deepest, ValueDepth(v));
    }
    return deepest + 1;
  }
  return 0;
}

}  // namespace ferry
