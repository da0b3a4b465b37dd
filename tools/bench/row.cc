#include "tools/bench/row.h"

#include <cmath>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rpc/base/status_util.h"

namespace ferry {
namespace bench {

namespace {

constexpr size_t kMaxLine = 4096;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("bench row: ", what));
}

// A cursor over one flat JSON object of strings and numbers: all a row
// needs, so the peers' rows parse without a JSON library.
class Scanner {
 public:
  explicit Scanner(absl::string_view text) : text_(text) {}

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) return ++pos_, true;
    return false;
  }

  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }

  bool AtString() {
    SkipSpace();
    return pos_ < text_.size() && text_[pos_] == '"';
  }

  absl::StatusOr<std::string> String() {
    if (!Consume('"')) return Invalid("expected a string");
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ == text_.size()) break;
        FERRY_ASSIGN_OR_RETURN(c, Unescape(text_[pos_++]));
      }
      out.push_back(c);
    }
    if (!Consume('"')) return Invalid("unterminated string");
    return out;
  }

  // The characters of a JSON number (checked by whoever converts them).
  absl::string_view NumberText() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < text_.size() &&
           absl::string_view("+-.0123456789eE").find(text_[pos_]) !=
               absl::string_view::npos) {
      ++pos_;
    }
    return text_.substr(start, pos_ - start);
  }

 private:
  static absl::StatusOr<char> Unescape(char c) {
    switch (c) {
      case '"':
      case '\\':
      case '/':
        return c;
      case 'n':
        return '\n';
      case 't':
        return '\t';
      default:
        return Invalid(
            absl::StrCat("unsupported escape \\", std::string(1, c)));
    }
  }

  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\r' ||
            text_[pos_] == '\n')) {
      ++pos_;
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

// A field's raw value: its string, or its number's text.
struct Field {
  bool is_string = false;
  std::string text;
};

absl::StatusOr<std::map<std::string, Field>> Fields(absl::string_view json) {
  Scanner s(json);
  std::map<std::string, Field> fields;
  if (!s.Consume('{')) return Invalid("not a JSON object");
  bool first = true;
  while (!s.Consume('}')) {
    if (!first && !s.Consume(',')) return Invalid("expected ',' or '}'");
    first = false;
    FERRY_ASSIGN_OR_RETURN(std::string key, s.String());
    if (!s.Consume(':')) return Invalid(absl::StrCat("no ':' after ", key));
    Field field;
    field.is_string = s.AtString();
    if (field.is_string) {
      FERRY_ASSIGN_OR_RETURN(field.text, s.String());
    } else {
      field.text = std::string(s.NumberText());
    }
    if (!fields.emplace(key, std::move(field)).second) {
      return Invalid(absl::StrCat("repeated key ", key));
    }
  }
  if (!s.AtEnd()) return Invalid("text after the object");
  return fields;
}

absl::Status TakeString(std::map<std::string, Field>& fields,
                        const std::string& key, std::string* out) {
  auto it = fields.find(key);
  if (it == fields.end()) return Invalid(absl::StrCat("no ", key));
  if (!it->second.is_string) {
    return Invalid(absl::StrCat(key, " is not a string"));
  }
  *out = std::move(it->second.text);
  fields.erase(it);
  return absl::OkStatus();
}

absl::Status TakeInt(std::map<std::string, Field>& fields,
                     const std::string& key, int64_t max, int64_t* out) {
  auto it = fields.find(key);
  if (it == fields.end()) return Invalid(absl::StrCat("no ", key));
  int64_t v = 0;
  if (it->second.is_string || !absl::SimpleAtoi(it->second.text, &v) || v < 0 ||
      v > max) {
    return Invalid(absl::StrCat(key, " is not an integer in 0..", max, ": ",
                                it->second.text));
  }
  *out = v;
  fields.erase(it);
  return absl::OkStatus();
}

absl::Status TakeDouble(std::map<std::string, Field>& fields,
                        const std::string& key, double* out) {
  auto it = fields.find(key);
  if (it == fields.end()) return Invalid(absl::StrCat("no ", key));
  double v = 0;
  if (it->second.is_string || !absl::SimpleAtod(it->second.text, &v) ||
      !std::isfinite(v)) {
    return Invalid(
        absl::StrCat(key, " is not a finite number: ", it->second.text));
  }
  *out = v;
  fields.erase(it);
  return absl::OkStatus();
}

}  // namespace

std::string RowJson(const Row& row) {
  return absl::StrFormat(
      "{\"suite\":\"%s\",\"metric\":\"%s\",\"system\":\"%s\",\"op\":\"%s\","
      "\"size_bytes\":%d,\"world\":%d,\"inflight\":%d,\"value\":%.3f}",
      row.suite, row.metric, row.system, row.op, row.size_bytes, row.world,
      row.inflight, row.value);
}

absl::StatusOr<Row> ParseRow(absl::string_view json) {
  if (json.size() > kMaxLine) {
    return Invalid(absl::StrCat("line of ", json.size(), " bytes (at most ",
                                kMaxLine, ")"));
  }
  FERRY_ASSIGN_OR_RETURN(auto fields, Fields(json));
  Row row;
  int64_t world = 0, inflight = 0;
  FERRY_RETURN_IF_ERROR(TakeString(fields, "suite", &row.suite));
  FERRY_RETURN_IF_ERROR(TakeString(fields, "metric", &row.metric));
  FERRY_RETURN_IF_ERROR(TakeString(fields, "system", &row.system));
  FERRY_RETURN_IF_ERROR(TakeString(fields, "op", &row.op));
  FERRY_RETURN_IF_ERROR(
      TakeInt(fields, "size_bytes", int64_t{1} << 40, &row.size_bytes));
  FERRY_RETURN_IF_ERROR(TakeInt(fields, "world", 65536, &world));
  FERRY_RETURN_IF_ERROR(TakeInt(fields, "inflight", 1 << 20, &inflight));
  FERRY_RETURN_IF_ERROR(TakeDouble(fields, "value", &row.value));
  if (!fields.empty()) {
    return Invalid(absl::StrCat("unknown key ", fields.begin()->first));
  }
  row.world = static_cast<int>(world);
  row.inflight = static_cast<int>(inflight);
  return row;
}

}  // namespace bench
}  // namespace ferry
