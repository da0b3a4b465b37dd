// ferryctl: the command-line driver of ferry jobs (see `ferryctl --help`).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/status_util.h"
#include "rpc/process_tuning.h"
#include "rpc/value/json.h"
#include "tools/ferryctl/cli.h"
#include "tools/ferryctl/cluster.h"
#include "tools/ferryctl/commands.h"
#include "tools/ferryctl/help.h"
#include "tools/ferryctl/observe_commands.h"
#include "tools/ferryctl/script.h"
#include "tools/ferryctl/session.h"
#include "tools/ferryctl/session_job.h"
#include "tools/ferryctl/waits.h"
#include "tools/version.h"

namespace ferry {
namespace ctl {
namespace {

int UsageFailure(const UsageError& e) {
  std::cerr << "ferryctl: " << e.message << "\n\n" << HelpText(e.command);
  return 2;
}

int Failure(const absl::Status& s) {
  std::cerr << "ferryctl: " << StatusCodeName(s.code()) << ": " << s.message()
            << std::endl;
  return 1;
}

// The --format values a command takes.
std::vector<std::string> Formats(const std::string& command) {
  if (command == "status") return {"table", "json", "prometheus"};
  if (command == "analyze" || command == "stacks") return {"text", "json"};
  return {"table", "json"};
}

// Positional-argument counts per command: [min, max].
std::optional<UsageError> CheckArity(const CommandLine& cl) {
  static const std::map<std::string, std::pair<size_t, size_t>> kArity = {
      {"up", {0, 0}},        {"down", {0, 0}},    {"status", {0, 0}},
      {"functions", {0, 1}}, {"call", {2, 3}},    {"run", {1, 1}},
      {"remote", {2, 3}},    {"rrefs", {0, 1}},   {"collective", {1, 1}},
      {"dump", {0, 4096}},   {"analyze", {1, 1}}, {"stacks", {1, 1}},
      {"watch", {0, 1}},
  };
  auto it = kArity.find(cl.command);
  if (it == kArity.end()) return std::nullopt;
  size_t n = cl.positional.size();
  if (n < it->second.first || n > it->second.second) {
    return UsageError{
        absl::StrCat("'", cl.command, "' takes ", it->second.first,
                     it->second.first == it->second.second
                         ? ""
                         : absl::StrCat("-", it->second.second),
                     " argument(s), got ", n),
        cl.command};
  }
  if (auto format = cl.Flag("format")) {
    const std::vector<std::string> allowed = Formats(cl.command);
    if (std::find(allowed.begin(), allowed.end(), *format) == allowed.end()) {
      return UsageError{
          absl::StrCat("--format must be ", absl::StrJoin(allowed, " or "),
                       ", got '", *format, "'"),
          cl.command};
    }
  }
  if (cl.command == "up" && !cl.Flag("world_size")) {
    return UsageError{"'up' needs --world_size=N", "up"};
  }
  return std::nullopt;
}

absl::StatusOr<std::string> ReadScript(const std::string& path) {
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot read script '", path, "'"));
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<Value> RunUp(const CommandLine& cl) {
  UpOptions o;
  FERRY_ASSIGN_OR_RETURN(int64_t world, cl.IntFlag("world_size", 0));
  FERRY_ASSIGN_OR_RETURN(int64_t port, cl.IntFlag("port", 29500));
  FERRY_ASSIGN_OR_RETURN(int64_t timeout_ms, cl.IntFlag("timeout_ms", 60000));
  o.world_size = static_cast<int>(world);
  o.port = static_cast<int>(port);
  o.dir = cl.Flag("dir").value_or("");
  // The daemons get the security this ferryctl uses, then the flags after --.
  o.ferryd_flags = SecurityFlagsForFerryd(cl);
  o.has_token = cl.Flag("token_file").has_value();
  o.ferryd_flags.insert(o.ferryd_flags.end(), cl.passthrough.begin(),
                        cl.passthrough.end());
  o.timeout = timeout_ms == 0 ? absl::Hours(1) : absl::Milliseconds(timeout_ms);
  return Up(o);
}

// Runs the command; nullopt for commands that print nothing themselves.
absl::StatusOr<std::optional<Value>> Dispatch(const CommandLine& cl) {
  if (cl.command == "up") return RunUp(cl);
  if (cl.command == "analyze") {
    // Reads files only: no job needed.
    FERRY_ASSIGN_OR_RETURN(
        std::string report,
        AnalyzeCommand(cl.positional[0], cl.Flag("format") == "json"));
    std::cout << report;
    return std::optional<Value>();
  }
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Open(cl));
  const auto& p = cl.positional;
  if (cl.command == "down") return Down(*session);
  if (cl.command == "status") {
    // A table for people at a terminal, JSON for programs (unless asked).
    const std::string format =
        cl.Flag("format").value_or(isatty(STDOUT_FILENO) ? "table" : "json");

    if (format == "prometheus") {
      FERRY_ASSIGN_OR_RETURN(std::string text, MetricsCommand(*session));
      std::cout << text;
      return std::optional<Value>();
    }
    FERRY_ASSIGN_OR_RETURN(Value status, StatusCommand(*session));
    if (format == "json") return status;
    std::cout << StatusTable(status) << BlockingLines(status);
    return std::optional<Value>();
  }
  if (cl.command == "dump")
    return DumpCommand(*session, cl.Flag("out").value_or(""), p);
  if (cl.command == "watch") {
    FERRY_ASSIGN_OR_RETURN(int64_t count, cl.IntFlag("count", 0));
    FERRY_RETURN_IF_ERROR(WatchCommand(*session, p.empty() ? "" : p[0], count,
                                       cl.BoolFlag("all"), std::cout,
                                       std::cerr));
    return std::optional<Value>();
  }
  if (cl.command == "stacks") {
    FERRY_ASSIGN_OR_RETURN(Value stacks, StacksCommand(*session, p[0]));
    const std::string format =
        cl.Flag("format").value_or(isatty(STDOUT_FILENO) ? "text" : "json");
    if (format == "json") return stacks;
    std::cout << StacksText(stacks);
    return std::optional<Value>();
  }
  if (cl.command == "functions") {
    return FunctionsCommand(*session, p.empty() ? "0" : p[0]);
  }
  if (cl.command == "rrefs")
    return RRefsCommand(*session, p.empty() ? "" : p[0]);
  if (cl.command == "call" || cl.command == "remote") {
    Value args = Value(Value::List{});
    if (p.size() > 2) {
      absl::StatusOr<Value> parsed = ParseJson(p[2]);
      if (!parsed.ok()) return Annotate(parsed.status(), "ARGS");
      args = *std::move(parsed);
    }
    if (!args.is_list()) {
      return absl::InvalidArgumentError("ARGS must be a JSON array");
    }
    if (cl.command == "remote") {
      return RemoteCommand(*session, p[0], p[1], std::move(args.as_list()));
    }
    if (cl.BoolFlag("trace")) {
      return TracedCallCommand(*session, p[0], p[1], std::move(args.as_list()),
                               std::cerr);
    }
    return CallCommand(*session, p[0], p[1], std::move(args.as_list()));
  }
  if (cl.command == "collective") {
    std::stringstream in;
    in << std::cin.rdbuf();
    absl::StatusOr<Value> request = ParseJson(in.str());
    if (!request.ok()) return Annotate(request.status(), "request (stdin)");
    return CollectiveCommand(*session, p[0], *std::move(request));
  }
  // run
  FERRY_ASSIGN_OR_RETURN(std::string text, ReadScript(p[0]));
  FERRY_ASSIGN_OR_RETURN(Script script,
                         Script::Parse(p[0] == "-" ? "<stdin>" : p[0], text));
  SessionJob job(*session);
  FERRY_RETURN_IF_ERROR(script.Run(job, std::cout));
  return std::optional<Value>();
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  CommandLine cl;
  if (auto usage = ParseCommandLine(args, &cl)) return UsageFailure(*usage);
  if (cl.help) {
    std::cout << HelpText(cl.command);
    return 0;
  }
  if (cl.version) {
    std::cout << "ferryctl " << FerryVersion() << "\n";
    return 0;
  }
  if (auto usage = CheckArity(cl)) return UsageFailure(*usage);
  absl::StatusOr<std::optional<Value>> result = Dispatch(cl);
  if (!result.ok()) return Failure(result.status());
  if (result->has_value()) std::cout << ToJson(**result) << std::endl;
  return 0;
}

}  // namespace
}  // namespace ctl
}  // namespace ferry

int main(int argc, char** argv) {
  ferry::TuneProcessForServing();
  ferry::ExitProcess(ferry::ctl::Main(argc, argv));
}
