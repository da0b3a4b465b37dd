// ferryctl's command line: global flags, a command, its flags and
// positional arguments. Flags are --name=value (or --name value); "--" ends
// flag parsing (the rest passes through, e.g. to ferryd in `up`).
#ifndef FERRY_TOOLS_FERRYCTL_CLI_H_
#define FERRY_TOOLS_FERRYCTL_CLI_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {
namespace ctl {

struct CommandLine {
  std::string command;
  std::vector<std::string> positional;
  std::map<std::string, std::string> flags;  // Command flags and globals.
  std::vector<std::string> passthrough;      // After "--".
  bool help = false;
  bool version = false;  // --version: print ferry's version (no command).

  std::optional<std::string> Flag(const std::string& name) const;
  // A boolean flag: present (and not "=false" or "=0").
  bool BoolFlag(const std::string& name) const;
  // The flag as a non-negative integer, `fallback` if absent;
  // INVALID_ARGUMENT names the flag if malformed.
  absl::StatusOr<int64_t> IntFlag(const std::string& name,
                                  int64_t fallback) const;
};

// A usage error: ferryctl prints the message and usage, and exits 2.
struct UsageError {
  std::string message;
  std::string command;  // For the command's own usage; "" = general.
};

// Parses argv[1..]. Unknown flags (for the command) are usage errors.
std::optional<UsageError> ParseCommandLine(const std::vector<std::string>& args,
                                           CommandLine* out);

// The flags each command accepts (globals are accepted everywhere).
const std::vector<std::string>& GlobalFlags();
const std::vector<std::string>* CommandFlags(const std::string& command);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_CLI_H_
