// Tensor objects in JSON: {"dtype": …, "shape": […], "data": […]}.
#include <cinttypes>
#include <cmath>
#include <complex>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/charconv.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/status_util.h"
#include "rpc/value/json.h"
#include "rpc/value/json_format.h"
#include "rpc/value/json_node.h"
#include "rpc/value/tensor_builder.h"

namespace ferry {
namespace json_internal {
namespace {

using Type = JsonNode::Type;

bool IsScalarNode(const JsonNode& n) {
  if (n.type == Type::kResolved) {
    return !n.resolved.is_list() && !n.resolved.is_map();
  }
  return n.type != Type::kArray && n.type != Type::kObject;
}

// For complex dtypes an array of exactly two scalars is one element.
bool IsLeaf(const JsonNode& n, bool complex) {
  if (n.type != Type::kArray) return true;
  return complex && n.items.size() == 2 && IsScalarNode(n.items[0]) &&
         IsScalarNode(n.items[1]);
}

// The shape implied by following the first element at every level.
Shape InferShape(const JsonNode& data, bool complex) {
  Shape shape;
  const JsonNode* n = &data;
  while (!IsLeaf(*n, complex)) {
    shape.push_back(static_cast<int64_t>(n->items.size()));
    if (n->items.empty()) break;
    n = &n->items[0];
  }
  return shape;
}

// Checks that `n` nests exactly as `shape` from `level` on; collects leaves.
absl::Status Flatten(const JsonNode& n, const Shape& shape, size_t level,
                     bool complex, std::vector<const JsonNode*>* leaves) {
  if (level == shape.size()) {
    if (!IsLeaf(n, complex)) {
      return ErrorAt(n, "ragged tensor data: a list where an element belongs");
    }
    leaves->push_back(&n);
    return absl::OkStatus();
  }
  if (IsLeaf(n, complex)) {
    return ErrorAt(n, "ragged tensor data: an element where a list belongs");
  }
  if (static_cast<int64_t>(n.items.size()) != shape[level]) {
    return ErrorAt(n, absl::StrCat("ragged tensor data: a list of length ",
                                   n.items.size(), " where dimension ", level,
                                   " has length ", shape[level]));
  }
  for (const JsonNode& item : n.items) {
    FERRY_RETURN_IF_ERROR(Flatten(item, shape, level + 1, complex, leaves));
  }
  return absl::OkStatus();
}

struct Number {
  bool is_int = false;
  int64_t i = 0;
  double d = 0;
};

// A JSON number (or substituted number) as int or double; with
// `allow_special`, also the strings "NaN", "Infinity", "-Infinity".
absl::StatusOr<Number> GetNumber(const JsonNode& n, bool allow_special) {
  Number num;
  const bool resolved = n.type == Type::kResolved;
  if (n.type == Type::kInt || (resolved && n.resolved.is_int())) {
    num.is_int = true;
    num.i = resolved ? n.resolved.as_int() : n.i;
    num.d = static_cast<double>(num.i);
    return num;
  }
  if (n.type == Type::kDouble || (resolved && n.resolved.is_double())) {
    num.d = resolved ? n.resolved.as_double() : n.d;
    return num;
  }
  if (allow_special && n.type == Type::kString) {
    if (n.s == "NaN")
      num.d = std::nan("");
    else if (n.s == "Infinity")
      num.d = HUGE_VAL;
    else if (n.s == "-Infinity")
      num.d = -HUGE_VAL;
    else
      return ErrorAt(n, absl::StrCat("expected a number, got \"", n.s, "\""));
    return num;
  }
  return ErrorAt(n, "expected a number");
}

template <typename T>
absl::Status StoreInteger(const JsonNode& n, absl::string_view dtype, T* out) {
  FERRY_ASSIGN_OR_RETURN(Number num, GetNumber(n, false));
  if (!num.is_int) {
    return ErrorAt(n, absl::StrCat("expected an integer for ", dtype, ", got ",
                                   FormatDouble(num.d)));
  }
  if (num.i < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      num.i > static_cast<int64_t>(std::numeric_limits<T>::max())) {
    return ErrorAt(n, absl::StrCat(num.i, " is out of range for ", dtype));
  }
  *out = static_cast<T>(num.i);
  return absl::OkStatus();
}

// A number as R (float or double), read from the number's text where
// there is one: an integer token keeps its sign ("-0", which is how
// AppendTensorJson writes negative zero, is -0.0, not the int 0), and a
// float is read directly rather than through a double (no double
// rounding). Substituted values have no text and convert.
template <typename R>
absl::StatusOr<R> GetReal(const JsonNode& n) {
  FERRY_ASSIGN_OR_RETURN(Number num, GetNumber(n, true));
  if (!n.number.empty()) {
    R r = 0;
    const char* first = n.number.data();
    auto [p, ec] = absl::from_chars(first, first + n.number.size(), r);
    // Underflow reads as (signed) zero, overflow as infinity (json.h).
    if (ec == std::errc::result_out_of_range && r != 0) {
      r = *first == '-' ? -std::numeric_limits<R>::infinity()
                        : std::numeric_limits<R>::infinity();
    }
    if (ec == std::errc() || ec == std::errc::result_out_of_range) return r;
  }
  return static_cast<R>(num.d);
}

template <typename T>
absl::Status StoreElement(const JsonNode& n, DType dtype, T* out) {
  absl::string_view name = DTypeName(dtype);
  if constexpr (std::is_same<T, bool>::value) {
    bool resolved_bool = n.type == Type::kResolved && n.resolved.is_bool();
    if (n.type != Type::kBool && !resolved_bool) {
      return ErrorAt(n, "expected true or false for bool");
    }
    *out = resolved_bool ? n.resolved.as_bool() : n.b;
    return absl::OkStatus();
  } else if constexpr (std::is_integral<T>::value) {
    return StoreInteger<T>(n, name, out);
  } else if constexpr (std::is_same<T, std::complex<float>>::value ||
                       std::is_same<T, std::complex<double>>::value) {
    using R = typename T::value_type;
    if (n.type == Type::kArray) {
      FERRY_ASSIGN_OR_RETURN(R re, GetReal<R>(n.items[0]));
      FERRY_ASSIGN_OR_RETURN(R im, GetReal<R>(n.items[1]));
      *out = T(re, im);
    } else {
      FERRY_ASSIGN_OR_RETURN(R re, GetReal<R>(n));
      *out = T(re, 0);
    }
    return absl::OkStatus();
  } else if constexpr (std::is_same<T, double>::value) {
    FERRY_ASSIGN_OR_RETURN(*out, GetReal<double>(n));
    return absl::OkStatus();
  } else {  // float; Float16 and BFloat16 from float (as FormatHalf checks)
    FERRY_ASSIGN_OR_RETURN(float f, GetReal<float>(n));
    *out = T(f);
    return absl::OkStatus();
  }
}

absl::Status CheckTensorKeys(const JsonNode& node) {
  for (const auto& [key, value] : node.members) {
    if (key != "dtype" && key != "shape" && key != "data") {
      return ErrorAt(
          value,
          absl::StrCat(
              "tensor object has unexpected key \"", key,
              "\" (a tensor has exactly \"dtype\", \"data\" and, unless 1-D, "
              "\"shape\")"));
    }
  }
  if (node.Member("data") == nullptr) {
    return ErrorAt(node, "tensor object lacks \"data\"");
  }
  return absl::OkStatus();
}

absl::StatusOr<Shape> ParseShape(const JsonNode& n) {
  if (n.type != Type::kArray) return ErrorAt(n, "shape must be a list");
  Shape shape;
  for (size_t k = 0; k < n.items.size(); ++k) {
    FERRY_ASSIGN_OR_RETURN(Number d, GetNumber(n.items[k], false));
    if (!d.is_int || d.i < 0) {
      return ErrorAt(
          n.items[k],
          absl::StrCat("shape[", k, "] must be a non-negative integer"));
    }
    shape.push_back(d.i);
  }
  return shape;
}

// Chooses the tensor's shape from "shape" (if given) and the data's nesting.
absl::StatusOr<Shape> ResolveShape(const JsonNode& node, const Shape& inferred,
                                   DType dtype, const Limits& limits) {
  const JsonNode* shape_node = node.Member("shape");
  if (shape_node == nullptr) {
    absl::Status ok = CheckShape(inferred, dtype, limits).status();
    if (!ok.ok()) return ErrorAt(*node.Member("data"), ok.message());
    return inferred;
  }
  FERRY_ASSIGN_OR_RETURN(Shape shape, ParseShape(*shape_node));
  absl::StatusOr<int64_t> numel = CheckShape(shape, dtype, limits);
  if (!numel.ok()) return ErrorAt(*shape_node, numel.status().message());
  bool flat_matches = inferred.size() == 1 && inferred[0] == *numel;
  bool scalar_matches = inferred.empty() && *numel == 1;
  if (inferred != shape && !flat_matches && !scalar_matches) {
    return ErrorAt(*node.Member("data"),
                   absl::StrCat("data holds ", ShapeString(inferred),
                                " elements but shape is ", ShapeString(shape)));
  }
  return shape;
}

}  // namespace

absl::StatusOr<Tensor> TensorFromJson(const JsonNode& node,
                                      const Limits& limits) {
  FERRY_RETURN_IF_ERROR(CheckTensorKeys(node));
  const JsonNode& dtype_node = *node.Member("dtype");
  if (dtype_node.type != Type::kString) {
    return ErrorAt(dtype_node, "dtype must be a string");
  }
  absl::StatusOr<DType> dtype = ParseDType(dtype_node.s);
  if (!dtype.ok()) return ErrorAt(dtype_node, dtype.status().message());
  const bool complex = KindOf(*dtype) == DTypeKind::kComplex;
  const JsonNode& data = *node.Member("data");
  Shape inferred = InferShape(data, complex);
  std::vector<const JsonNode*> leaves;
  FERRY_RETURN_IF_ERROR(Flatten(data, inferred, 0, complex, &leaves));
  FERRY_ASSIGN_OR_RETURN(Shape shape,
                         ResolveShape(node, inferred, *dtype, limits));
  FERRY_ASSIGN_OR_RETURN(TensorBuilder builder,
                         TensorBuilder::Create(*dtype, std::move(shape)));
  absl::Status status = VisitDType(*dtype, [&](auto tag) -> absl::Status {
    using T = typename decltype(tag)::type;
    T* out = builder.template data_as<T>();
    for (size_t k = 0; k < leaves.size(); ++k) {
      FERRY_RETURN_IF_ERROR(StoreElement<T>(*leaves[k], *dtype, &out[k]));
    }
    return absl::OkStatus();
  });
  FERRY_RETURN_IF_ERROR(status);
  return std::move(builder).Build();
}

namespace {

// Shortest text that reads back as the same 16-bit float.
template <typename H>
std::string FormatHalf(H h) {
  float v = static_cast<float>(h);
  for (int precision = 1; precision < 9; ++precision) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.*g", precision, v);
    float back = std::strtof(buf, nullptr);
    if (H(back).bits == h.bits) return FormatFloat(back);
  }
  return FormatFloat(v);
}

template <typename R>
void AppendReal(R v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else if constexpr (std::is_same<R, float>::value) {
    out->append(FormatFloat(v));
  } else {
    out->append(FormatDouble(v));
  }
}

template <typename T>
void AppendElement(const T& v, std::string* out) {
  if constexpr (std::is_same<T, bool>::value) {
    out->append(v ? "true" : "false");
  } else if constexpr (std::is_integral<T>::value) {
    absl::StrAppend(out, static_cast<int64_t>(v));
  } else if constexpr (std::is_same<T, Float16>::value ||
                       std::is_same<T, BFloat16>::value) {
    float f = static_cast<float>(v);
    if (std::isfinite(f)) {
      out->append(FormatHalf(v));
    } else {
      AppendReal(f, out);
    }
  } else if constexpr (std::is_floating_point<T>::value) {
    AppendReal(v, out);
  } else {  // complex
    out->push_back('[');
    AppendReal(v.real(), out);
    out->push_back(',');
    AppendReal(v.imag(), out);
    out->push_back(']');
  }
}

}  // namespace

void AppendTensorJson(const Tensor& tensor, std::string* out) {
  absl::StrAppend(out, "{\"dtype\":\"", DTypeName(tensor.dtype()), "\",");
  if (tensor.rank() != 1) {
    absl::StrAppend(out, "\"shape\":[", absl::StrJoin(tensor.shape(), ","),
                    "],");
  }
  out->append("\"data\":[");
  VisitDType(tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = tensor.data_as<T>();
    for (int64_t k = 0; k < tensor.numel(); ++k) {
      if (k > 0) out->push_back(',');
      AppendElement(p[k], out);
    }
  });
  out->append("]}");
}

}  // namespace json_internal

std::string TensorElementJson(const Tensor& tensor, int64_t index) {
  std::string out;
  VisitDType(tensor.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    json_internal::AppendElement(tensor.data_as<T>()[index], &out);
  });
  return out;
}

}  // namespace ferry
