#include "tools/ferryctl/cli.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace ctl {

namespace {

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

const std::vector<std::string>& GlobalFlags() {
  static const auto* flags = new std::vector<std::string>{
      "master",     "timeout_ms", "local",
      "token_file", "insecure",   "tls_cert",
      "tls_key",    "tls_ca",     "tls_server_name",
      "rendezvous", "etcd_ca",    "etcd_cert",
      "etcd_key",   "etcd_user",  "etcd_password_file"};
  return *flags;
}

// Flags that are true by being there (--insecure) or say so (=false).
bool IsBoolFlag(const std::string& name) {
  return name == "insecure" || name == "trace" || name == "all";
}

const std::vector<std::string>* CommandFlags(const std::string& command) {
  static const auto* table =
      new std::map<std::string, std::vector<std::string>>{
          {"up", {"world_size", "port", "dir"}},
          {"down", {}},
          {"status", {"format"}},
          {"functions", {}},
          {"call", {"trace"}},
          {"remote", {}},
          {"rrefs", {}},
          {"run", {}},
          {"collective", {}},
          {"dump", {"out"}},
          {"analyze", {"format"}},
          {"stacks", {"format"}},
          {"watch", {"count", "all"}},
      };
  auto it = table->find(command);
  return it == table->end() ? nullptr : &it->second;
}

std::optional<std::string> CommandLine::Flag(const std::string& name) const {
  auto it = flags.find(name);
  if (it == flags.end()) return std::nullopt;
  return it->second;
}

bool CommandLine::BoolFlag(const std::string& name) const {
  std::optional<std::string> v = Flag(name);
  return v.has_value() && *v != "false" && *v != "0";
}

absl::StatusOr<int64_t> CommandLine::IntFlag(const std::string& name,
                                             int64_t fallback) const {
  std::optional<std::string> v = Flag(name);
  if (!v) return fallback;
  int64_t n;
  if (!absl::SimpleAtoi(*v, &n) || n < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, "=", *v, ": expected a non-negative integer"));
  }
  return n;
}

std::optional<UsageError> ParseCommandLine(const std::vector<std::string>& args,
                                           CommandLine* out) {
  std::vector<std::pair<std::string, std::string>> flags;
  bool flags_done = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (flags_done) {
      out->passthrough.push_back(a);
    } else if (a == "--") {
      flags_done = true;
    } else if (a == "-h" || a == "--help") {
      out->help = true;
    } else if (a == "--version") {
      out->version = true;
    } else if (absl::StartsWith(a, "--")) {
      std::string body = a.substr(2);
      size_t eq = body.find('=');
      if (eq != std::string::npos) {
        flags.emplace_back(body.substr(0, eq), body.substr(eq + 1));
      } else if (IsBoolFlag(body)) {
        flags.emplace_back(body, "true");
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        flags.emplace_back(body, args[++i]);
      } else {
        return UsageError{absl::StrCat("flag --", body, " needs a value"), ""};
      }
    } else if (out->command.empty()) {
      out->command = a;
    } else {
      out->positional.push_back(a);
    }
  }
  if (out->command.empty()) {
    if (out->help || out->version) return std::nullopt;
    return UsageError{"no command given", ""};
  }
  const std::vector<std::string>* allowed = CommandFlags(out->command);
  if (allowed == nullptr) {
    return UsageError{absl::StrCat("unknown command '", out->command, "'"), ""};
  }
  for (auto& [name, value] : flags) {
    if (!Contains(GlobalFlags(), name) && !Contains(*allowed, name)) {
      return UsageError{
          absl::StrCat("unknown flag --", name, " for '", out->command, "'"),
          out->command};
    }
    out->flags[name] = value;
  }
  if (!out->passthrough.empty() && out->command != "up") {
    return UsageError{"only 'up' takes arguments after --", out->command};
  }
  return std::nullopt;
}

}  // namespace ctl
}  // namespace ferry
