#include "tools/ferryctl/pretty.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/value/json.h"
#include "rpc/value/json_format.h"
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

// torch prints a tensor of at most kSummarizeOver elements in full; a
// larger one shows the first and last kEdgeItems of each dimension with
// "..." between. Beyond that, at most kMaxShown elements are printed in
// all, so printing is bounded whatever the shape.
constexpr int64_t kSummarizeOver = 1000;
constexpr int64_t kEdgeItems = 3;
constexpr int64_t kMaxShown = 1000;

// Prints a non-empty tensor nested like Python lists.
class NestedPrinter {
 public:
  explicit NestedPrinter(const Tensor& t)
      : t_(t), summarize_(t.numel() > kSummarizeOver) {}

  // The elements of dims [d:] starting at `offset`.
  std::string Print(size_t d, int64_t offset) {
    if (d == t_.shape().size()) {
      --budget_;
      return Element(t_, offset);
    }
    int64_t inner = 1;  // No overflow: the tensor is not empty.
    for (size_t k = d + 1; k < t_.shape().size(); ++k) inner *= t_.shape()[k];
    const int64_t n = t_.shape()[d];
    const bool cut = summarize_ && n > 2 * kEdgeItems;
    std::vector<std::string> items;
    for (int64_t i = 0; i < n; ++i) {
      if (budget_ <= 0) {
        items.push_back("...");
        break;
      }
      if (cut && i == kEdgeItems) {
        items.push_back("...");
        i = n - kEdgeItems - 1;
        continue;
      }
      items.push_back(Print(d + 1, offset + i * inner));
    }
    return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
  }

 private:
  const Tensor& t_;
  const bool summarize_;
  int64_t budget_ = kMaxShown;
};

std::string TensorText(const Tensor& t) {
  // torch leaves out the default dtypes, and shows an empty tensor's
  // shape instead of walking it (its other dims may be huge).
  const bool plain = t.dtype() == DType::kInt64 || t.dtype() == DType::kFloat32;
  std::string body = "[]";
  if (t.numel() > 0) {
    body = NestedPrinter(t).Print(0, 0);
  } else if (t.rank() > 1) {
    absl::StrAppend(&body, ", size=(", absl::StrJoin(t.shape(), ", "), ")");
  }
  return absl::StrCat("tensor(", body, plain ? "" : ", dtype=",
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

// A KJT table shows at most this many samples, and values per cell.
constexpr int64_t kMaxKjtSamples = 64;
constexpr int64_t kMaxKjtCellValues = 32;

// One cell: the `n` values (and weights) from `at`, those that exist.
std::string KjtCell(const Tensor& values, const std::optional<Tensor>& weights,
                    int64_t at, int64_t n) {
  if (n == 0) return "None";
  std::vector<std::string> items;
  for (int64_t i = 0; i < n && at + i < values.numel(); ++i) {
    if (i == kMaxKjtCellValues) {
      items.push_back("...");
      break;
    }
    std::string item = Element(values, at + i);
    if (weights && at + i < weights->numel())
      absl::StrAppend(&item, " (", Element(*weights, at + i), ")");
    items.push_back(item);
  }
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
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
  const int64_t columns = std::min(stride, kMaxKjtSamples);
  std::vector<std::vector<std::string>> rows(keys.size() + 1);
  rows[0].push_back("");
  for (int64_t s = 0; s < columns; ++s) rows[0].push_back(absl::StrCat(s));
  if (columns < stride) rows[0].push_back("...");
  // Where the next sample's values begin, clamped to the values there are:
  // lengths of a malformed KJT may be negative or add up past int64.
  int64_t at = 0;
  const int64_t* len = lengths.data_as<int64_t>();
  for (size_t k = 0; k < keys.size(); ++k) {
    rows[k + 1].push_back(
        PyString(keys[k].is_string() ? keys[k].as_string() : "?"));
    for (int64_t s = 0; s < stride; ++s) {
      // A negative length (a malformed KJT) shows as an empty list.
      const int64_t n = std::max<int64_t>(len[k * stride + s], 0);
      if (s < columns) rows[k + 1].push_back(KjtCell(values, weights, at, n));
      at = n > values.numel() - at ? values.numel() : at + n;
    }
    if (columns < stride) rows[k + 1].push_back("...");
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
