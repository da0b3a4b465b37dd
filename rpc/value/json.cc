#include "rpc/value/json.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/charconv.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rpc/base/limit_errors.h"
#include "rpc/base/limits.h"
#include "rpc/base/status_util.h"
#include "rpc/value/json_format.h"
#include "rpc/value/json_node.h"
#include "rpc/value/json_parse.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/utf8.h"

namespace ferry {
namespace json_internal {

namespace {

// Where an error happened travels as a payload beside the message, so
// callers that embed JSON in other text get it without re-parsing text.
constexpr absl::string_view kPositionPayload = "type.ferry/json.position";

std::string Prefix(int line, int column) {
  return absl::StrCat("json: line ", line, ", column ", column, ": ");
}

}  // namespace

absl::Status PositionedError(absl::StatusCode code, const JsonNode& node,
                             absl::string_view message) {
  absl::Status status(code,
                      absl::StrCat(Prefix(node.line, node.column), message));
  status.SetPayload(kPositionPayload,
                    absl::Cord(absl::StrCat(node.line, " ", node.column)));
  return status;
}

absl::Status ErrorAt(const JsonNode& node, absl::string_view message) {
  return PositionedError(absl::StatusCode::kInvalidArgument, node, message);
}

void ParseErrorPosition(const absl::Status& status, JsonErrorPosition* out) {
  out->message = std::string(status.message());
  absl::optional<absl::Cord> where = status.GetPayload(kPositionPayload);
  if (!where.has_value()) return;
  std::vector<std::string> parts = absl::StrSplit(std::string(*where), ' ');
  int line = 0, column = 0;
  if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &line) ||
      !absl::SimpleAtoi(parts[1], &column)) {
    return;
  }
  out->line = line;
  out->column = column;
  absl::string_view text = status.message();
  if (absl::ConsumePrefix(&text, Prefix(line, column))) {
    out->message = std::string(text);
  }
}

namespace {

// Tensor data nests below the value nesting limit, so the text may nest a
// little deeper than kMaxValueDepth; this bound only protects the stack.
constexpr int kMaxJsonDepth = 2 * kMaxValueDepth + 8;

class Parser {
 public:
  Parser(absl::string_view text, const JsonParseOptions& options)
      : text_(text), options_(options) {}

  absl::StatusOr<JsonNode> ParseDocument() {
    SkipSpace();
    FERRY_ASSIGN_OR_RETURN(JsonNode root, ParseValue(0));
    SkipSpace();
    if (options_.consumed != nullptr) {
      *options_.consumed = pos_;
    } else if (pos_ != text_.size()) {
      return Error("unexpected text after the value");
    }
    return root;
  }

 private:
  absl::Status Error(absl::string_view message) const {
    JsonNode here;
    here.line = line_;
    here.column = column_;
    return ErrorAt(here, message);
  }

  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }

  void Advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      column_ = 1;
    } else {
      ++column_;
    }
    ++pos_;
  }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                        Peek() == '\r')) {
      Advance();
    }
  }

  bool Consume(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    for (size_t k = 0; k < word.size(); ++k) Advance();
    return true;
  }

  absl::StatusOr<JsonNode> ParseValue(int depth) {
    if (depth > kMaxJsonDepth) return Error("nesting too deep");
    JsonNode node;
    node.line = line_;
    node.column = column_;
    char c = Peek();
    if (c == '{') return ParseObject(std::move(node), depth);
    if (c == '[') return ParseArray(std::move(node), depth);
    if (c == '"') {
      node.type = JsonNode::Type::kString;
      FERRY_ASSIGN_OR_RETURN(node.s, ParseString());
      return node;
    }
    if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber(std::move(node));
    if (c == '$') return ParseVariable(std::move(node));
    if (Consume("true")) {
      node.type = JsonNode::Type::kBool;
      node.b = true;
      return node;
    }
    if (Consume("false")) {
      node.type = JsonNode::Type::kBool;
      return node;
    }
    if (Consume("null")) return node;
    if (AtEnd()) return Error("unexpected end of input, expected a value");
    return Error(absl::StrCat("unexpected character '",
                              absl::CEscape(text_.substr(pos_, 1)),
                              "', expected a value"));
  }

  absl::StatusOr<JsonNode> ParseVariable(JsonNode node) {
    Advance();  // '$'
    size_t start = pos_;
    while (!AtEnd() && (std::isalnum(static_cast<unsigned char>(Peek())) ||
                        Peek() == '_')) {
      Advance();
    }
    absl::string_view name = text_.substr(start, pos_ - start);
    if (name.empty()) return ErrorAt(node, "'$' must be followed by a name");
    if (!options_.resolve_variable) {
      return ErrorAt(node, absl::StrCat("unexpected variable $", name));
    }
    absl::StatusOr<Value> value = options_.resolve_variable(name);
    if (!value.ok()) return ErrorAt(node, value.status().message());
    node.type = JsonNode::Type::kResolved;
    node.resolved = *std::move(value);
    return node;
  }

  absl::StatusOr<JsonNode> ParseArray(JsonNode node, int depth) {
    node.type = JsonNode::Type::kArray;
    Advance();  // '['
    SkipSpace();
    if (Peek() == ']') {
      Advance();
      return node;
    }
    while (true) {
      SkipSpace();
      FERRY_ASSIGN_OR_RETURN(JsonNode item, ParseValue(depth + 1));
      node.items.push_back(std::move(item));
      SkipSpace();
      if (Peek() == ',') {
        Advance();
        continue;
      }
      if (Peek() == ']') {
        Advance();
        return node;
      }
      return Error("expected ',' or ']' in array");
    }
  }

  absl::StatusOr<JsonNode> ParseObject(JsonNode node, int depth) {
    node.type = JsonNode::Type::kObject;
    Advance();  // '{'
    // Keys seen, so a duplicate is found in O(1), not by a scan per key.
    absl::flat_hash_set<std::string> keys;
    SkipSpace();
    if (Peek() == '}') {
      Advance();
      return node;
    }
    while (true) {
      SkipSpace();
      if (Peek() != '"') return Error("expected a string key in object");
      JsonNode key_pos;
      key_pos.line = line_;
      key_pos.column = column_;
      FERRY_ASSIGN_OR_RETURN(std::string key, ParseString());
      if (!keys.insert(key).second) {
        return ErrorAt(key_pos, absl::StrCat("duplicate key \"", key, "\""));
      }
      SkipSpace();
      if (Peek() != ':') return Error("expected ':' after object key");
      Advance();
      SkipSpace();
      FERRY_ASSIGN_OR_RETURN(JsonNode item, ParseValue(depth + 1));
      node.members.push_back({std::move(key), std::move(item)});
      SkipSpace();
      if (Peek() == ',') {
        Advance();
        continue;
      }
      if (Peek() == '}') {
        Advance();
        return node;
      }
      return Error("expected ',' or '}' in object");
    }
  }

  absl::StatusOr<uint32_t> ParseHex4() {
    uint32_t cp = 0;
    for (int k = 0; k < 4; ++k) {
      char h = Peek();
      int digit;
      if (h >= '0' && h <= '9') {
        digit = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        digit = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        digit = h - 'A' + 10;
      } else {
        return Error("invalid \\u escape");
      }
      cp = cp * 16 + digit;
      Advance();
    }
    return cp;
  }

  static void AppendUtf8(uint32_t cp, std::string* out) {
    if (cp < 0x80) {
      out->push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else if (cp < 0x10000) {
      out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    } else {
      out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
      out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
    }
  }

  absl::Status ParseEscape(std::string* out) {
    Advance();  // '\\'
    if (AtEnd()) return Error("unterminated string");
    char e = Peek();
    Advance();
    switch (e) {
      case '"':
        out->push_back('"');
        return absl::OkStatus();
      case '\\':
        out->push_back('\\');
        return absl::OkStatus();
      case '/':
        out->push_back('/');
        return absl::OkStatus();
      case 'b':
        out->push_back('\b');
        return absl::OkStatus();
      case 'f':
        out->push_back('\f');
        return absl::OkStatus();
      case 'n':
        out->push_back('\n');
        return absl::OkStatus();
      case 'r':
        out->push_back('\r');
        return absl::OkStatus();
      case 't':
        out->push_back('\t');
        return absl::OkStatus();
      case 'u':
        break;
      default:
        return Error("invalid escape in string");
    }
    FERRY_ASSIGN_OR_RETURN(uint32_t cp, ParseHex4());
    if (cp >= 0xd800 && cp <= 0xdbff) {  // High surrogate: expect the low one.
      if (!Consume("\\u")) return Error("unpaired surrogate in \\u escape");
      FERRY_ASSIGN_OR_RETURN(uint32_t low, ParseHex4());
      if (low < 0xdc00 || low > 0xdfff) {
        return Error("unpaired surrogate in \\u escape");
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      return Error("unpaired surrogate in \\u escape");
    }
    AppendUtf8(cp, out);
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> ParseString() {
    Advance();  // '"'
    std::string out;
    while (true) {
      if (AtEnd()) return Error("unterminated string");
      char c = Peek();
      if (c == '"') {
        Advance();
        break;
      }
      if (c == '\\') {
        FERRY_RETURN_IF_ERROR(ParseEscape(&out));
        continue;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Error("control character in string (escape it)");
      }
      out.push_back(c);
      Advance();
    }
    if (!IsValidUtf8(out)) return Error("string is not valid UTF-8");
    return out;
  }

  absl::StatusOr<JsonNode> ParseNumber(JsonNode node) {
    size_t start = pos_;
    bool is_integer = true;
    if (Peek() == '-') Advance();
    if (Peek() == '0') {
      Advance();
    } else if (Peek() >= '1' && Peek() <= '9') {
      while (std::isdigit(static_cast<unsigned char>(Peek()))) Advance();
    } else {
      return Error("invalid number");
    }
    if (Peek() == '.') {
      is_integer = false;
      Advance();
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) {
        return Error("invalid number: digit expected after '.'");
      }
      while (std::isdigit(static_cast<unsigned char>(Peek()))) Advance();
    }
    if (Peek() == 'e' || Peek() == 'E') {
      is_integer = false;
      Advance();
      if (Peek() == '+' || Peek() == '-') Advance();
      if (!std::isdigit(static_cast<unsigned char>(Peek()))) {
        return Error("invalid number: digit expected in exponent");
      }
      while (std::isdigit(static_cast<unsigned char>(Peek()))) Advance();
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    node.number = absl::string_view(first, last - first);
    if (is_integer) {
      auto [p, ec] = std::from_chars(first, last, node.i);
      if (ec == std::errc() && p == last) {
        node.type = JsonNode::Type::kInt;
        return node;
      }
      // Too large for int64: keep it as a double, as JSON readers do.
    }
    // IEEE round-to-nearest: too small a magnitude reads as a subnormal or
    // (signed) zero, too large as infinity. absl::from_chars sets zero on
    // underflow (std::from_chars leaves the value unset on either).
    auto [p, ec] = absl::from_chars(first, last, node.d);
    if (p != last ||
        (ec != std::errc() && ec != std::errc::result_out_of_range)) {
      return ErrorAt(node, "invalid number");
    }
    if (ec == std::errc::result_out_of_range && node.d != 0) {
      node.d = (*first == '-') ? -HUGE_VAL : HUGE_VAL;
    }
    node.type = JsonNode::Type::kDouble;
    return node;
  }

  absl::string_view text_;
  const JsonParseOptions& options_;
  size_t pos_ = 0;
  int line_ = 1;
  int column_ = 1;
};

// Turns the parsed tree into a Value within `limits`: lists and maps
// nest at most kMaxValueDepth deep, substituted `$NAME` values included
// (they count at the depth where they stand); at most max_items values in
// all (substituted values counted item by item); strings and bytes at
// most max_string_bytes; tensor shapes as tensor.h's rules say.
class ValueBuilder {
 public:
  explicit ValueBuilder(const Limits& limits) : limits_(limits) {}

  absl::StatusOr<Value> Build(const JsonNode& node, int depth);

 private:
  absl::StatusOr<Value> Object(const JsonNode& node, int depth);
  absl::Status CheckResolved(const Value& value, int depth, const JsonNode& at);
  absl::Status Take(const JsonNode& at, int64_t n);
  absl::Status CheckString(const JsonNode& at, size_t size) const;

  const Limits& limits_;
  int64_t items_ = 0;
};

// A Limits error at `node`'s position, keeping its code.
absl::Status LimitErrorAt(const JsonNode& node, const absl::Status& status) {
  return PositionedError(status.code(), node, status.message());
}

absl::Status DepthErrorAt(const JsonNode& node) {
  return ErrorAt(
      node, absl::StrCat("nesting deeper than ", kMaxValueDepth, " levels"));
}

absl::Status ValueBuilder::Take(const JsonNode& at, int64_t n) {
  if (n <= limits_.max_items - items_) {
    items_ += n;
    return absl::OkStatus();
  }
  return LimitErrorAt(
      at, OverLimit(absl::StrCat("more than ", limits_.max_items, " values"),
                    absl::StrCat(limits_.max_items, " values"), "max_items",
                    limits_.max_items));
}

absl::Status ValueBuilder::CheckString(const JsonNode& at, size_t size) const {
  if (size <= static_cast<uint64_t>(limits_.max_string_bytes)) {
    return absl::OkStatus();
  }
  return LimitErrorAt(
      at, OverLimit(absl::StrCat("a string of ", HumanBytes(size)),
                    HumanBytes(limits_.max_string_bytes), "max_string_mb",
                    limits_.max_string_bytes / Limits::kMiB));
}

// Walks a substituted value as if it were written here: its depth below
// `depth` and its items count. The walk stops at the first excess, so it
// never goes deeper than kMaxValueDepth nor past max_items.
absl::Status ValueBuilder::CheckResolved(const Value& value, int depth,
                                         const JsonNode& at) {
  FERRY_RETURN_IF_ERROR(Take(at, 1));
  if (!value.is_list() && !value.is_map()) return absl::OkStatus();
  if (depth >= kMaxValueDepth) {
    return ErrorAt(at, absl::StrCat("nesting deeper than ", kMaxValueDepth,
                                    " levels (with the variable's value)"));
  }
  if (value.is_list()) {
    for (const Value& item : value.as_list()) {
      FERRY_RETURN_IF_ERROR(CheckResolved(item, depth + 1, at));
    }
  } else {
    for (const auto& [key, item] : value.as_map()) {
      FERRY_RETURN_IF_ERROR(CheckResolved(item, depth + 1, at));
    }
  }
  return absl::OkStatus();
}

// {"$bytes": …}, {"$double": …} and {"$rref": …} stand for scalars.
bool IsSpecialObject(const JsonNode& node) {
  if (node.members.empty()) return false;
  const std::string& key = node.members[0].key;
  return key == "$bytes" || key == "$double" || key == "$rref";
}

absl::StatusOr<Value> SpecialObject(const JsonNode& node) {
  const JsonNode& first = node.members[0].value;
  const std::string& key = node.members[0].key;
  if (key == "$bytes") {
    std::string raw;
    if (node.members.size() != 1 || first.type != JsonNode::Type::kString ||
        !absl::Base64Unescape(first.s, &raw)) {
      return ErrorAt(node, "{\"$bytes\": …} takes one base64 string");
    }
    return Value(Bytes{std::move(raw)});
  }
  if (key == "$double") {
    if (node.members.size() == 1 && first.type == JsonNode::Type::kString) {
      if (first.s == "NaN") return Value(std::nan(""));
      if (first.s == "Infinity") return Value(HUGE_VAL);
      if (first.s == "-Infinity") return Value(-HUGE_VAL);
    }
    return ErrorAt(node,
                   "{\"$double\": …} takes \"NaN\", \"Infinity\" or "
                   "\"-Infinity\"");
  }
  // "$rref": a detached description of a reference.
  const JsonNode* owner = node.Member("owner");
  if (node.members.size() != 2 || first.type != JsonNode::Type::kString ||
      owner == nullptr || owner->type != JsonNode::Type::kString) {
    return ErrorAt(node, "an rref object has exactly \"$rref\" and \"owner\"");
  }
  absl::StatusOr<GlobalId> id = ParseGlobalId(first.s);
  if (!id.ok()) return ErrorAt(first, id.status().message());
  RRefDescriptor descriptor;
  descriptor.rref_id = *id;
  descriptor.owner = owner->s;
  return Value(std::make_shared<const RRefBase>(std::move(descriptor)));
}

absl::StatusOr<Value> ValueBuilder::Object(const JsonNode& node, int depth) {
  if (IsSpecialObject(node)) {
    FERRY_ASSIGN_OR_RETURN(Value v, SpecialObject(node));
    if (v.is_bytes())
      FERRY_RETURN_IF_ERROR(CheckString(node, v.as_bytes().data.size()));
    return v;
  }
  if (node.Member("dtype") != nullptr) {
    FERRY_ASSIGN_OR_RETURN(Tensor t, TensorFromJson(node, limits_));
    return Value(std::move(t));
  }
  if (depth >= kMaxValueDepth) return DepthErrorAt(node);
  Value::Map map;
  for (const auto& [key, item] : node.members) {
    FERRY_RETURN_IF_ERROR(CheckString(item, key.size()));
    FERRY_ASSIGN_OR_RETURN(Value v, Build(item, depth + 1));
    map.emplace(key, std::move(v));
  }
  return Value(std::move(map));
}

absl::StatusOr<Value> ValueBuilder::Build(const JsonNode& node, int depth) {
  if (node.type != JsonNode::Type::kResolved) {
    FERRY_RETURN_IF_ERROR(Take(node, 1));
  }
  switch (node.type) {
    case JsonNode::Type::kNull:
      return Value();
    case JsonNode::Type::kBool:
      return Value(node.b);
    case JsonNode::Type::kInt:
      return Value(node.i);
    case JsonNode::Type::kDouble:
      return Value(node.d);
    case JsonNode::Type::kString:
      FERRY_RETURN_IF_ERROR(CheckString(node, node.s.size()));
      return Value(node.s);
    case JsonNode::Type::kResolved:
      FERRY_RETURN_IF_ERROR(CheckResolved(node.resolved, depth, node));
      return node.resolved;
    case JsonNode::Type::kArray: {
      if (depth >= kMaxValueDepth) return DepthErrorAt(node);
      Value::List list;
      list.reserve(node.items.size());
      for (const JsonNode& item : node.items) {
        FERRY_ASSIGN_OR_RETURN(Value v, Build(item, depth + 1));
        list.push_back(std::move(v));
      }
      return Value(std::move(list));
    }
    case JsonNode::Type::kObject:
      return Object(node, depth);
  }
  return ErrorAt(node, "unknown node");
}

void AppendString(absl::string_view s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppend(out, "\\u00", absl::Hex(c, absl::kZeroPad2));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

void AppendValue(const Value& value, std::string* out);

void AppendDouble(double d, std::string* out) {
  if (!std::isfinite(d)) {
    out->append(std::isnan(d) ? "{\"$double\":\"NaN\"}"
                : d > 0       ? "{\"$double\":\"Infinity\"}"
                              : "{\"$double\":\"-Infinity\"}");
    return;
  }
  std::string text = FormatDouble(d);
  // Keep doubles recognisable as doubles when read back.
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  out->append(text);
}

void AppendValue(const Value& value, std::string* out) {
  switch (value.kind()) {
    case Value::Kind::kNull:
      out->append("null");
      return;
    case Value::Kind::kBool:
      out->append(value.as_bool() ? "true" : "false");
      return;
    case Value::Kind::kInt:
      absl::StrAppend(out, value.as_int());
      return;
    case Value::Kind::kDouble:
      AppendDouble(value.as_double(), out);
      return;
    case Value::Kind::kString:
      AppendString(value.as_string(), out);
      return;
    case Value::Kind::kBytes:
      absl::StrAppend(out, "{\"$bytes\":\"",
                      absl::Base64Escape(value.as_bytes().data), "\"}");
      return;
    case Value::Kind::kTensor:
      AppendTensorJson(value.as_tensor(), out);
      return;
    case Value::Kind::kList: {
      out->push_back('[');
      bool first = true;
      for (const Value& item : value.as_list()) {
        if (!first) out->push_back(',');
        first = false;
        AppendValue(item, out);
      }
      out->push_back(']');
      return;
    }
    case Value::Kind::kMap: {
      out->push_back('{');
      bool first = true;
      for (const auto& [key, item] : value.as_map()) {
        if (!first) out->push_back(',');
        first = false;
        AppendString(key, out);
        out->push_back(':');
        AppendValue(item, out);
      }
      out->push_back('}');
      return;
    }
    case Value::Kind::kRRef: {
      const RRefDescriptor& d = value.as_rref()->descriptor();
      absl::StrAppend(out, "{\"$rref\":\"", GlobalIdString(d.rref_id),
                      "\",\"owner\":");
      AppendString(d.owner, out);
      out->push_back('}');
      return;
    }
  }
}

}  // namespace
}  // namespace json_internal

absl::StatusOr<Value> ParseJson(absl::string_view text,
                                const JsonParseOptions& options) {
  json_internal::Parser parser(text, options);
  absl::StatusOr<json_internal::JsonNode> root = parser.ParseDocument();
  const Limits& limits =
      options.limits != nullptr ? *options.limits : DefaultLimits();
  absl::StatusOr<Value> value =
      root.ok() ? json_internal::ValueBuilder(limits).Build(*root, 0)
                : root.status();
  if (!value.ok() && options.error != nullptr) {
    json_internal::ParseErrorPosition(value.status(), options.error);
  }
  return value;
}

absl::StatusOr<Value> ParseJson(absl::string_view text) {
  return ParseJson(text, JsonParseOptions{});
}

std::string ToJson(const Value& value) {
  std::string out;
  json_internal::AppendValue(value, &out);
  return out;
}

std::string FormatDouble(double value) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

std::string FormatFloat(float value) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, result.ptr);
}

}  // namespace ferry
