// ferryctl scripts (`ferryctl run FILE`): one statement per line,
//
//   # comment
//   [NAME =] call WORKER FUNC [ARGS]      ARGS: a JSON array
//   [NAME =] remote WORKER FUNC [ARGS]    binds the RRef itself (held by
//                                         the script until it ends)
//   [NAME =] fetch $R                     the RRef's value (to_here)
//   [NAME =] collective OP REQUEST        REQUEST: JSON, as `collective`
//   [NAME =] status | functions [WORKER] | rrefs [WORKER]
//   [NAME =] value VALUE                  VALUE itself (to name an input)
//   print VALUE                           VALUE: JSON, may use $NAME
//   show VALUE                            VALUE for people (pretty.h)
//   echo TEXT                             TEXT as is
//   expect VALUE JSON                     exit 1 with a diff if unequal
//   sleep MS
//
// `$NAME` may stand for a value anywhere inside JSON (and for WORKER);
// passing `$R` in a call's arguments passes the RRef (a copy). A
// JSON argument may continue over several lines while brackets are open.
// Unbound results are printed as JSON lines. The whole script is checked
// (syntax, unknown commands, variables used before being set) before any
// statement runs; errors name the file, line and column and show the line.
#ifndef FERRY_TOOLS_FERRYCTL_SCRIPT_H_
#define FERRY_TOOLS_FERRYCTL_SCRIPT_H_

#include <functional>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rpc/base/limits.h"
#include "rpc/value/value.h"

namespace ferry {
namespace ctl {

// What a script's job statements run against (call, remote, fetch,
// rrefs, status, functions, collective; sleep too, so tests and fuzzers
// need not wait). SessionJob (session_job.h) is the real one; value,
// show, print, echo and expect never use it.
class ScriptJob {
 public:
  virtual ~ScriptJob() = default;
  virtual absl::StatusOr<Value> Call(const std::string& worker,
                                     const std::string& fn,
                                     std::vector<Value> args) = 0;
  // The RRef itself, held until the job goes away.
  virtual absl::StatusOr<Value> Remote(const std::string& worker,
                                       const std::string& fn,
                                       std::vector<Value> args) = 0;
  virtual absl::StatusOr<Value> Fetch(const Value& rref) = 0;
  // `worker` empty: every worker.
  virtual absl::StatusOr<Value> RRefs(const std::string& worker) = 0;
  virtual absl::StatusOr<Value> JobStatus() = 0;
  virtual absl::StatusOr<Value> Functions(const std::string& worker) = 0;
  virtual absl::StatusOr<Value> Collective(const std::string& op,
                                           Value request) = 0;
  virtual void Sleep(absl::Duration duration) = 0;
};

struct Statement {
  int line = 0;  // 1-based position of the statement's first character.
  int column = 0;
  std::string target;              // The NAME in "NAME = …", or "".
  std::string command;             // call, status, print, …
  std::vector<std::string> words;  // Plain words after the command.
  // The JSON arguments, with where each starts in the file.
  struct Json {
    std::string text;
    int line = 0;
    int column = 0;
  };
  std::vector<Json> json;
  std::string source;  // The statement's first line, for messages.
};

class Script {
 public:
  // Parses and checks `text`. INVALID_ARGUMENT "file:line:col: …".
  // JSON arguments are read within `limits` (json.h) when the script runs.
  static absl::StatusOr<Script> Parse(const std::string& file,
                                      const std::string& text,
                                      const Limits& limits = DefaultLimits());

  // Runs every statement in order against `job`, writing printed values
  // to `out`. Stops at the first failure. JSON arguments are read within
  // the limits given to Parse: nesting, also through `$NAME`, stops at
  // kMaxValueDepth, values at max_items.
  absl::Status Run(ScriptJob& job, std::ostream& out);

  const std::vector<Statement>& statements() const { return statements_; }

 private:
  absl::StatusOr<Value> Execute(const Statement& s, ScriptJob& job,
                                std::ostream& out);
  absl::StatusOr<Value> ExecuteJob(const Statement& s, ScriptJob& job);
  absl::StatusOr<Value> EvalJson(const Statement& s, size_t index) const;

  std::string file_;
  Limits limits_;
  std::vector<std::string> lines_;
  std::vector<Statement> statements_;
  std::map<std::string, Value> vars_;
};

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_SCRIPT_H_
