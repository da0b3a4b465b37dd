#include "tools/ferryctl/script.h"

#include <cctype>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "rpc/base/status_util.h"
#include "rpc/value/json.h"
#include "rpc/value/json_parse.h"
#include "tools/ferryctl/pretty.h"
#include "tools/ferryctl/value_diff.h"

namespace ferry {
namespace ctl {

namespace {

// What follows each command: w = word, J = JSON, T = the rest of the line
// as text, ? = optional last item;
// `value` says whether the command produces a result.
struct CommandSpec {
  const char* args;
  bool value;
};

const std::map<std::string, CommandSpec>& Commands() {
  static const auto* table = new std::map<std::string, CommandSpec>{
      {"call", {"w w J?", true}}, {"remote", {"w w J?", true}},
      {"fetch", {"J", true}},     {"rrefs", {"w?", true}},
      {"status", {"", true}},     {"functions", {"w?", true}},
      {"print", {"J", false}},    {"expect", {"J J", false}},
      {"sleep", {"w", false}},    {"collective", {"w J", true}},
      {"value", {"J", true}},     {"show", {"J", false}},
      {"echo", {"T?", false}},
  };
  return *table;
}

bool IsIdentifier(absl::string_view s) {
  if (s.empty() ||
      !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) {
    return false;
  }
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

struct RawStatement {
  std::string text;  // Comments removed; newlines kept.
  int line = 0;
  int column = 0;
};

// "call, collective, echo, …": every command, for messages.
std::string CommandNames() {
  std::vector<std::string> names;
  for (const auto& [name, unused] : Commands()) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

bool TakesText(const std::string& command) {
  auto it = Commands().find(command);
  return it != Commands().end() && it->second.args[0] == 'T';
}

// Splits the file into statements: a statement ends at a newline outside
// strings and brackets, except that a statement of free text (echo) always
// ends with its line: brackets and quotes in text do not continue it.
// Comments (# outside strings) are dropped.
std::vector<RawStatement> SplitStatements(const std::string& text) {
  std::vector<RawStatement> out;
  RawStatement cur;
  int line = 1, column = 1, depth = 0;
  bool in_string = false, escaped = false, in_comment = false;
  bool first_word_done = false, free_text = false;
  auto flush = [&] {
    depth = 0;
    in_string = escaped = first_word_done = free_text = false;
    if (absl::StripAsciiWhitespace(cur.text).empty()) {
      cur = RawStatement();
      return;
    }
    out.push_back(cur);
    cur = RawStatement();
  };
  for (char c : text) {
    if (c == '\n') {
      in_comment = false;
      if ((depth <= 0 && !in_string) || free_text) {
        flush();
      } else {
        cur.text.push_back('\n');
      }
      ++line;
      column = 1;
      continue;
    }
    if (!in_comment && !first_word_done && !cur.text.empty() &&
        (c == ' ' || c == '\t' || c == '\r' || c == '#')) {
      first_word_done = true;
      free_text = TakesText(cur.text);
    }
    if (!in_comment) {
      if (in_string) {
        if (escaped)
          escaped = false;
        else if (c == '\\')
          escaped = true;
        else if (c == '"')
          in_string = false;
      } else if (c == '#') {
        in_comment = true;
      } else if (c == '"') {
        in_string = true;
      } else if (free_text) {
        // Brackets in text are just characters.
      } else if (c == '[' || c == '{') {
        ++depth;
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
    if (!in_comment) {
      if (cur.text.empty() && (c == ' ' || c == '\t' || c == '\r')) {
        ++column;
        continue;
      }
      if (cur.text.empty()) {
        cur.line = line;
        cur.column = column;
      }
      cur.text.push_back(c);
    }
    ++column;
  }
  flush();
  return out;
}

// A cursor over a statement's text that knows file positions.
class Cursor {
 public:
  Cursor(const RawStatement& raw) : raw_(raw) {}

  void SkipSpace() {
    while (pos_ < raw_.text.size() &&
           std::isspace(static_cast<unsigned char>(raw_.text[pos_]))) {
      ++pos_;
    }
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= raw_.text.size();
  }
  std::string Word() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < raw_.text.size() &&
           !std::isspace(static_cast<unsigned char>(raw_.text[pos_]))) {
      ++pos_;
    }
    return raw_.text.substr(start, pos_ - start);
  }
  std::string Rest() {
    SkipSpace();
    std::string rest = raw_.text.substr(pos_);
    pos_ = raw_.text.size();
    return std::string(absl::StripTrailingAsciiWhitespace(rest));
  }
  // The rest of the statement as typed, after one separating space.
  std::string Text() {
    if (pos_ < raw_.text.size() && raw_.text[pos_] == ' ') ++pos_;
    std::string rest = raw_.text.substr(pos_);
    pos_ = raw_.text.size();
    return std::string(absl::StripTrailingAsciiWhitespace(rest));
  }
  size_t pos() const { return pos_; }
  void Seek(size_t pos) { pos_ = pos; }
  void Advance(size_t n) { pos_ += n; }
  // File line/column of text offset `offset`.
  std::pair<int, int> Where(size_t offset) const {
    int line = raw_.line, column = raw_.column;
    for (size_t i = 0; i < offset && i < raw_.text.size(); ++i) {
      if (raw_.text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    return {line, column};
  }

 private:
  const RawStatement& raw_;
  size_t pos_ = 0;
};

}  // namespace

// Formats "file:line:col: message" with the offending line and a caret.
// Columns count bytes; the caret is placed under the character as the line
// is displayed (tabs kept as tabs, one space per UTF-8 character).
static absl::Status ScriptError(absl::StatusCode code, const std::string& file,
                                const std::vector<std::string>& lines, int line,
                                int column, absl::string_view message) {
  std::string text = absl::StrCat(file, ":", line, ":", column, ": ", message);
  if (line >= 1 && line <= static_cast<int>(lines.size())) {
    const std::string& source = lines[line - 1];
    std::string pad;
    for (int i = 0; i + 1 < column; ++i) {
      const char c = i < static_cast<int>(source.size()) ? source[i] : ' ';
      if (c == '\t') {
        pad.push_back('\t');
      } else if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) {
        pad.push_back(' ');  // Not a UTF-8 continuation byte.
      }
    }
    absl::StrAppend(&text, "\n    ", source, "\n    ", pad, "^");
  }
  return absl::Status(code, text);
}

namespace {

struct Parser {
  const std::string& file;
  const std::vector<std::string>& lines;
  std::set<std::string> defined;

  absl::Status Error(int line, int column, absl::string_view message) const {
    return ScriptError(absl::StatusCode::kInvalidArgument, file, lines, line,
                       column, message);
  }

  // Checks a JSON argument: syntax, and that its variables are defined.
  absl::Status CheckJson(const Statement::Json& json, size_t* consumed) const {
    JsonParseOptions options;
    options.resolve_variable =
        [this](absl::string_view name) -> absl::StatusOr<Value> {
      if (defined.count(std::string(name))) return Value();
      return absl::NotFoundError(absl::StrCat(
          "unknown variable $", name, " (set it first: ", name, " = …)"));
    };
    options.consumed = consumed;
    JsonErrorPosition where;
    options.error = &where;
    absl::StatusOr<Value> v = ParseJson(json.text, options);
    if (v.ok()) return absl::OkStatus();
    int line = json.line + where.line - 1;
    int column =
        where.line <= 1 ? json.column + where.column - 1 : where.column;
    return Error(line, column, where.message);
  }

  absl::Status CheckWord(const std::string& word, int line, int column) const {
    if (word.size() > 1 && word[0] == '$' && !defined.count(word.substr(1))) {
      return Error(line, column, absl::StrCat("unknown variable ", word));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Statement> ParseOne(const RawStatement& raw) {
    Statement s;
    s.line = raw.line;
    s.column = raw.column;
    s.source = lines[raw.line - 1];
    Cursor cur(raw);
    std::string first = cur.Word();
    size_t after_first = cur.pos();  // Then: the end of the command word.
    cur.SkipSpace();
    // "NAME = …" assigns, except after a command that takes free text
    // ("echo = …" prints "= …").
    auto text_command = Commands().find(first);
    const bool takes_text =
        text_command != Commands().end() && text_command->second.args[0] == 'T';
    if (!takes_text && cur.pos() < raw.text.size() &&
        raw.text[cur.pos()] == '=') {
      if (!IsIdentifier(first)) {
        return Error(
            raw.line, raw.column,
            absl::StrCat("'", first, "' is not a valid variable name"));
      }
      s.target = first;
      cur.Advance(1);
      s.command = cur.Word();
      after_first = cur.pos();
    } else {
      s.command = first;
      cur.Seek(after_first);  // Free text starts right after the command.
    }
    // Where the command word starts, for messages about it.
    auto [cl, cc] = cur.Where(after_first - s.command.size());
    auto spec = Commands().find(s.command);
    if (s.command.empty()) {
      return Error(cl, cc,
                   absl::StrCat("expected a command after '", s.target,
                                " =' (one of: ", CommandNames(), ")"));
    }
    if (spec == Commands().end()) {
      return Error(cl, cc,
                   absl::StrCat("unknown command '", s.command,
                                "' (expected one of: ", CommandNames(), ")"));
    }
    if (!s.target.empty() && !spec->second.value) {
      return Error(
          raw.line, raw.column,
          absl::StrCat("'", s.command, "' produces no value to assign"));
    }
    std::vector<std::string> items =
        absl::StrSplit(spec->second.args, ' ', absl::SkipEmpty());
    for (size_t i = 0; i < items.size(); ++i) {
      bool optional = items[i].size() > 1 && items[i][1] == '?';
      bool last = i + 1 == items.size();
      if (items[i][0] == 'T') {  // Free text keeps its leading spaces.
        s.words.push_back(cur.Text());
        continue;
      }
      if (cur.AtEnd()) {
        if (optional) break;
        auto [l, c] = cur.Where(raw.text.size());
        return Error(l, c,
                     absl::StrCat("'", s.command, "' needs more arguments (",
                                  spec->second.args, ")"));
      }
      auto [l, c] = cur.Where(cur.pos());
      if (items[i][0] == 'w') {
        std::string w = cur.Word();
        FERRY_RETURN_IF_ERROR(CheckWord(w, l, c));
        s.words.push_back(w);
        continue;
      }
      Statement::Json json{last ? cur.Rest() : raw.text.substr(cur.pos()), l,
                           c};
      size_t consumed = 0;
      FERRY_RETURN_IF_ERROR(CheckJson(json, last ? nullptr : &consumed));
      if (!last) {
        json.text = json.text.substr(0, consumed);
        cur.Advance(consumed);
      }
      s.json.push_back(std::move(json));
    }
    if (!cur.AtEnd()) {
      auto [l, c] = cur.Where(cur.pos());
      return Error(l, c,
                   absl::StrCat("unexpected text after '", s.command,
                                "' (arguments: ", spec->second.args, ")"));
    }
    if (!s.target.empty()) defined.insert(s.target);
    return s;
  }
};

}  // namespace

absl::StatusOr<Script> Script::Parse(const std::string& file,
                                     const std::string& text,
                                     const Limits& limits) {
  Script script;
  script.file_ = file;
  script.limits_ = limits;
  script.lines_ = absl::StrSplit(text, '\n');
  // Lines as shown in messages: without the '\r' of CRLF line ends.
  for (std::string& line : script.lines_) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
  }
  Parser parser{file, script.lines_, {}};
  for (const RawStatement& raw : SplitStatements(text)) {
    FERRY_ASSIGN_OR_RETURN(Statement s, parser.ParseOne(raw));
    script.statements_.push_back(std::move(s));
  }
  return script;
}

absl::StatusOr<Value> Script::EvalJson(const Statement& s, size_t index) const {
  JsonParseOptions options;
  options.resolve_variable =
      [this](absl::string_view name) -> absl::StatusOr<Value> {
    auto it = vars_.find(std::string(name));
    if (it == vars_.end())
      return absl::NotFoundError(absl::StrCat("unset variable $", name));
    return it->second;
  };
  options.limits = &limits_;
  return ParseJson(s.json[index].text, options);
}

namespace {

// A WORKER word: a name, a rank, or $VAR holding either.
absl::StatusOr<std::string> WorkerWord(
    const std::string& word, const std::map<std::string, Value>& vars) {
  if (word.size() < 2 || word[0] != '$') return word;
  auto it = vars.find(word.substr(1));
  if (it == vars.end()) {
    return absl::NotFoundError(absl::StrCat("unset variable ", word));
  }
  const Value& v = it->second;
  if (v.is_string()) return v.as_string();
  if (v.is_int()) return absl::StrCat(v.as_int());
  return absl::InvalidArgumentError(
      absl::StrCat(word, " names no worker (it holds a ", v.kind_name(), ")"));
}

}  // namespace

absl::StatusOr<Value> Script::ExecuteJob(const Statement& s, ScriptJob& job) {
  if (s.command == "call" || s.command == "remote") {
    FERRY_ASSIGN_OR_RETURN(std::string worker, WorkerWord(s.words[0], vars_));
    Value args = Value(Value::List{});
    if (!s.json.empty()) {
      FERRY_ASSIGN_OR_RETURN(args, EvalJson(s, 0));
    }
    if (!args.is_list()) {
      return absl::InvalidArgumentError(
          absl::StrCat(s.command, " arguments must be a JSON array"));
    }
    if (s.command == "call") {
      return job.Call(worker, s.words[1], std::move(args.as_list()));
    }
    return job.Remote(worker, s.words[1], std::move(args.as_list()));
  }
  if (s.command == "fetch") {
    FERRY_ASSIGN_OR_RETURN(Value rref, EvalJson(s, 0));
    return job.Fetch(rref);
  }
  if (s.command == "rrefs") {
    std::string worker;
    if (!s.words.empty()) {
      FERRY_ASSIGN_OR_RETURN(worker, WorkerWord(s.words[0], vars_));
    }
    return job.RRefs(worker);
  }
  if (s.command == "status") return job.JobStatus();
  if (s.command == "collective") {
    FERRY_ASSIGN_OR_RETURN(Value request, EvalJson(s, 0));
    return job.Collective(s.words[0], std::move(request));
  }
  if (s.command == "functions") {
    std::string worker = "0";
    if (!s.words.empty()) {
      FERRY_ASSIGN_OR_RETURN(worker, WorkerWord(s.words[0], vars_));
    }
    return job.Functions(worker);
  }
  if (s.command == "sleep") {
    int64_t ms;
    if (!absl::SimpleAtoi(s.words[0], &ms) || ms < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("sleep takes milliseconds, got '", s.words[0], "'"));
    }
    job.Sleep(absl::Milliseconds(ms));
    return Value();
  }
  return absl::InternalError(absl::StrCat("unhandled command ", s.command));
}

absl::StatusOr<Value> Script::Execute(const Statement& s, ScriptJob& job,
                                      std::ostream& out) {
  if (s.command == "value") return EvalJson(s, 0);
  if (s.command == "show") {
    FERRY_ASSIGN_OR_RETURN(Value v, EvalJson(s, 0));
    out << Pretty(v) << std::flush;
    return Value();
  }
  if (s.command == "echo") {
    out << (s.words.empty() ? "" : s.words[0]) << std::endl;
    return Value();
  }
  if (s.command == "print") {
    FERRY_ASSIGN_OR_RETURN(Value v, EvalJson(s, 0));
    out << ToJson(v) << std::endl;
    return Value();
  }
  if (s.command == "expect") {
    FERRY_ASSIGN_OR_RETURN(Value got, EvalJson(s, 0));
    FERRY_ASSIGN_OR_RETURN(Value want, EvalJson(s, 1));
    if (auto diff = FirstDifference(got, want)) {
      return absl::FailedPreconditionError(
          absl::StrCat("expect failed: ", *diff));
    }
    return Value();
  }
  return ExecuteJob(s, job);
}

absl::Status Script::Run(ScriptJob& job, std::ostream& out) {
  for (const Statement& s : statements_) {
    absl::StatusOr<Value> result = Execute(s, job, out);
    if (!result.ok()) {
      return ScriptError(result.status().code(), file_, lines_, s.line,
                         s.column, result.status().message());
    }
    if (!s.target.empty()) {
      vars_[s.target] = *std::move(result);
    } else if (Commands().at(s.command).value) {
      out << ToJson(*result) << std::endl;
    }
  }
  return absl::OkStatus();
}

}  // namespace ctl
}  // namespace ferry
