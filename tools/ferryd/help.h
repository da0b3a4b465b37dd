// ferryd --help: the usage, then ferryd's own flags by what they are for,
// each with its default, on stdout, and exit status 0. (Abseil's built-in
// --help exits 1 and titles each group of flags with its source file.)
#ifndef FERRY_TOOLS_FERRYD_HELP_H_
#define FERRY_TOOLS_FERRYD_HELP_H_

#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {

// The flags defined in files whose path ends with `file`, under `title`.
struct HelpSection {
  std::string file;
  std::string title;
};

// Whether argv[1..] holds a request for help: --help, -help, -h,
// --helpfull or --helpshort (before a bare "--").
bool AsksForHelp(int argc, char** argv);

// Writes `usage`, then one block per section: its title, then each of its
// flags (sorted by name) as `--name (default: D)` and its help, wrapped.
void PrintHelp(std::ostream& out, absl::string_view usage,
               const std::vector<HelpSection>& sections);

}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYD_HELP_H_
