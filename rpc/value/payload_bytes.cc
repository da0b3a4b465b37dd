#include "rpc/value/payload_bytes.h"

namespace ferry {

int64_t PayloadBytes(const Value& v) {
  constexpr int64_t kNode = 16;  // Roughly, a value's framing on the wire.
  switch (v.kind()) {
    case Value::Kind::kTensor:
      return kNode + static_cast<int64_t>(v.as_tensor().nbytes());
    case Value::Kind::kString:
      return kNode + static_cast<int64_t>(v.as_string().size());
    case Value::Kind::kBytes:
      return kNode + static_cast<int64_t>(v.as_bytes().data.size());
    case Value::Kind::kList: {
      int64_t n = kNode;
      for (const Value& x : v.as_list()) n += PayloadBytes(x);
      return n;
    }
    case Value::Kind::kMap: {
      int64_t n = kNode;
      for (const auto& [k, x] : v.as_map())
        n += kNode + static_cast<int64_t>(k.size()) + PayloadBytes(x);
      return n;
    }
    default:
      return kNode;
  }
}

}  // namespace ferry
