#include "tools/ferryctl/value_diff.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "rpc/value/json.h"
#include "rpc/value/json_format.h"

namespace ferry {
namespace ctl {

namespace {

// Long values are cut so the message stays one readable line.
std::string Short(const Value& v) {
  std::string json = ToJson(v);
  if (json.size() > 80) json = json.substr(0, 77) + "...";
  return json;
}

// A tensor's "data" as JSON, cut like Short: only the elements that fit
// are formatted, however large the tensor.
std::string DataOf(const Tensor& t) {
  std::string json = "[";
  for (int64_t k = 0; k < t.numel(); ++k) {
    if (json.size() > 80) break;
    if (k > 0) json.push_back(',');
    json += TensorElementJson(t, k);
  }
  json.push_back(']');
  if (json.size() > 80) json = json.substr(0, 77) + "...";
  return json;
}

std::string At(const std::string& path) {
  return path.empty() ? "value" : path;
}

std::optional<std::string> TensorDifference(const Tensor& got,
                                            const Tensor& want,
                                            const std::string& path) {
  if (got.dtype() != want.dtype()) {
    return absl::StrCat(At(path), ".dtype: got ", DTypeName(got.dtype()),
                        ", expected ", DTypeName(want.dtype()));
  }
  if (got.shape() != want.shape()) {
    return absl::StrCat(At(path), ".shape: got ", ShapeString(got.shape()),
                        ", expected ", ShapeString(want.shape()));
  }
  const size_t item = got.itemsize();
  for (int64_t k = 0; k < got.numel(); ++k) {
    if (std::memcmp(got.data() + k * item, want.data() + k * item, item) != 0) {
      // The element, then both tensors' data for context.
      return absl::StrCat(At(path), ".data[", k, "]: got ",
                          TensorElementJson(got, k), ", expected ",
                          TensorElementJson(want, k),
                          "\n      got:      ", DataOf(got),
                          "\n      expected: ", DataOf(want));
    }
  }
  return std::nullopt;
}

std::optional<std::string> Difference(const Value& got, const Value& want,
                                      const std::string& path) {
  if (got.kind() != want.kind()) {
    return absl::StrCat(At(path), ": got ", got.kind_name(), " ", Short(got),
                        ", expected ", want.kind_name(), " ", Short(want));
  }
  if (got.is_tensor())
    return TensorDifference(got.as_tensor(), want.as_tensor(), path);
  if (got.is_list()) {
    const auto& g = got.as_list();
    const auto& w = want.as_list();
    for (size_t i = 0; i < g.size() && i < w.size(); ++i) {
      auto d = Difference(g[i], w[i], absl::StrCat(path, "[", i, "]"));
      if (d) return d;
    }
    if (g.size() != w.size()) {
      return absl::StrCat(At(path), ": got ", g.size(), " items, expected ",
                          w.size());
    }
    return std::nullopt;
  }
  if (got.is_map()) {
    for (const auto& [key, w] : want.as_map()) {
      const Value* g = got.Find(key);
      if (g == nullptr)
        return absl::StrCat(At(path), ": missing key \"", key, "\"");
      auto d =
          Difference(*g, w, path.empty() ? key : absl::StrCat(path, ".", key));
      if (d) return d;
    }
    for (const auto& [key, g] : got.as_map()) {
      if (want.Find(key) == nullptr) {
        return absl::StrCat(At(path), ": unexpected key \"", key, "\"");
      }
    }
    return std::nullopt;
  }
  if (got == want) return std::nullopt;
  return absl::StrCat(At(path), ": got ", Short(got), ", expected ",
                      Short(want));
}

}  // namespace

std::optional<std::string> FirstDifference(const Value& got,
                                           const Value& want) {
  return Difference(got, want, "");
}

}  // namespace ctl
}  // namespace ferry
