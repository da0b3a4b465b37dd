#include "tools/ferryctl/pretty.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/value/json.h"
#include "rpc/value/tensor_math.h"

namespace ferry {
namespace ctl {

namespace {

// A string as Python writes it: 'text'.
std::string PyString(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(
          &out, "\\x",
          absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out.push_back(c);
    }
  }
  return out + "'";
}

// One element as Python would print it: 3, 2.5, True, 1+1j.
std::string Element(const Tensor& t, int64_t i) {
  std::string json = TensorElementJson(t, i);
  switch (KindOf(t.dtype())) {
    case DTypeKind::kBool:
      return json == "true" ? "True" : "False";
    case DTypeKind::kFloating:  // torch writes 6. for 6.0
      return json.find_first_of(".eEnN\"") == std::string::npos ? json + "."
                                                                : json;
    case DTypeKind::kComplex: {
      std::vector<std::string> parts =
          absl::StrSplit(json.substr(1, json.size() - 2), ',');
      std::string im = parts.size() > 1 ? parts[1] : "0";
      return absl::StrCat(parts[0], im[0] == '-' ? "" : "+", im, "j");
    }
    default:
      return json;
  }
}

// The elements of dims [d:] starting at `offset`, nested like Python lists.
std::string Nested(const Tensor& t, size_t d, int64_t offset) {
  if (d == t.shape().size()) return Element(t, offset);
  int64_t inner = 1;
  for (size_t k = d + 1; k < t.shape().size(); ++k) inner *= t.shape()[k];
  std::vector<std::string> items;
  for (int64_t i = 0; i < t.shape()[d]; ++i)
    items.push_back(Nested(t, d + 1, offset + i * inner));
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

std::string TensorText(const Tensor& t) {
  // torch leaves out the default dtypes.
  const bool plain = t.dtype() == DType::kInt64 || t.dtype() == DType::kFloat32;
  return absl::StrCat("tensor(", Nested(t, 0, 0), plain ? "" : ", dtype=",
                      plain ? "" : DTypeName(t.dtype()), ")");
}

// A list of numbers or a tensor (a KJT's lengths, values, weights).
bool IsColumn(const Value* v) {
  return v != nullptr && (v->is_list() || v->is_tensor());
}

bool IsKjt(const Value& v) {
  const Value* keys = v.Find("keys");
  return keys != nullptr && keys->is_list() && IsColumn(v.Find("lengths")) &&
         IsColumn(v.Find("values"));
}

// A list of numbers, or a tensor, as a 1-D tensor (for KJT fields).
Tensor Column(const Value& v) {
  if (v.is_tensor()) return v.as_tensor();
  std::vector<double> xs;
  bool ints = true;
  for (const Value& x : v.is_list() ? v.as_list() : Value::List{}) {
    ints = ints && x.is_int();
    xs.push_back(x.is_number() ? x.as_number() : 0);
  }
  Tensor d = Tensor::FromVector<double>(xs);
  return ints ? Cast(d, DType::kInt64) : Cast(d, DType::kFloat32);
}

// The KJT as the TorchRec pages draw it: keys down, samples across.
std::string KjtTable(const Value& v, const std::string& indent) {
  const Value::List& keys = v.Find("keys")->as_list();
  // Lengths of any integer dtype (or even written as floats) read as int64.
  const Tensor lengths = Cast(Column(*v.Find("lengths")), DType::kInt64);
  const Tensor values = Column(*v.Find("values"));
  const Value* w = v.Find("weights");
  const std::optional<Tensor> weights =
      IsColumn(w) ? std::optional<Tensor>(Column(*w)) : std::nullopt;
  if (keys.empty()) return absl::StrCat(indent, "(no keys)\n");
  const int64_t stride = lengths.numel() / static_cast<int64_t>(keys.size());
  std::vector<std::vector<std::string>> rows(keys.size() + 1);
  rows[0].push_back("");
  for (int64_t s = 0; s < stride; ++s) rows[0].push_back(absl::StrCat(s));
  int64_t at = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    rows[k + 1].push_back(
        PyString(keys[k].is_string() ? keys[k].as_string() : "?"));
    for (int64_t s = 0; s < stride; ++s) {
      // A negative length (a malformed KJT) shows as an empty list.
      const int64_t n =
          std::max<int64_t>(lengths.data_as<int64_t>()[k * stride + s], 0);
      std::vector<std::string> items;
      for (int64_t i = 0; i < n && at + i < values.numel(); ++i) {
        std::string item = Element(values, at + i);
        if (weights && at + i < weights->numel())
          absl::StrAppend(&item, " (", Element(*weights, at + i), ")");
        items.push_back(item);
      }
      at += n;
      rows[k + 1].push_back(
          n == 0 ? "None" : absl::StrCat("[", absl::StrJoin(items, ", "), "]"));
    }
  }
  std::vector<size_t> width;
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = indent;
    for (size_t c = 0; c < row.size(); ++c) {
      absl::StrAppend(&line, row[c],
                      std::string(width[c] - row[c].size() + 3, ' '));
    }
    absl::StrAppend(&out, absl::StripTrailingAsciiWhitespace(line), "\n");
  }
  return out;
}

std::string Inline(const Value& v);

std::string MapText(const Value::Map& m) {
  std::vector<std::string> items;
  for (const auto& [k, x] : m)
    items.push_back(absl::StrCat(PyString(k), ": ", Inline(x)));
  return absl::StrCat("{", absl::StrJoin(items, ", "), "}");
}

std::string Inline(const Value& v) {
  if (v.is_null()) return "None";
  if (v.is_bool()) return v.as_bool() ? "True" : "False";
  if (v.is_string()) return PyString(v.as_string());
  if (v.is_tensor()) return TensorText(v.as_tensor());
  if (v.is_list()) {
    std::vector<std::string> items;
    for (const Value& x : v.as_list()) items.push_back(Inline(x));
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }
  if (v.is_map()) return MapText(v.as_map());
  return ToJson(v);
}

// `v` under a heading: on the heading's line if short and flat, else as
// indented lines (KJTs, and maps of KJTs, as tables).
std::string Block(const std::string& heading, const Value& v,
                  const std::string& indent) {
  // A heading line, unless there is no heading (a value shown by itself).
  const std::string head =
      heading.empty() ? "" : absl::StrCat(indent, heading, "\n");
  const std::string inner = heading.empty() ? indent : indent + "  ";
  if (IsKjt(v)) return absl::StrCat(head, KjtTable(v, inner));
  if (v.is_map() && !v.as_map().empty() &&
      std::all_of(v.as_map().begin(), v.as_map().end(),
                  [](const auto& kv) { return IsKjt(kv.second); })) {
    std::string out = head;
    for (const auto& [k, x] : v.as_map())
      absl::StrAppend(&out, Block(k + ":", x, inner));
    return out;
  }
  return absl::StrCat(indent, heading, heading.empty() ? "" : " ", Inline(v),
                      "\n");
}

}  // namespace

std::string Pretty(const Value& value) {
  const Value* ranks = value.Find("ranks");
  if (ranks != nullptr && ranks->is_list()) {
    std::string out;
    std::vector<std::string> params;  // A request's other keys.
    for (const auto& [k, x] : value.as_map()) {
      if (k != "ranks") params.push_back(absl::StrCat(k, "=", Inline(x)));
    }
    if (!params.empty())
      absl::StrAppend(&out, "  (", absl::StrJoin(params, ", "), ")\n");
    const Value::List& list = ranks->as_list();
    for (size_t r = 0; r < list.size(); ++r) {
      if (list[r].is_null()) {
        absl::StrAppend(&out, "  rank ", r, ": (not taking part)\n");
      } else {
        absl::StrAppend(&out,
                        Block(absl::StrCat("rank ", r, ":"), list[r], "  "));
      }
    }
    return out;
  }
  return Block("", value, "  ");
}

}  // namespace ctl
}  // namespace ferry
