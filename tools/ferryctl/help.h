// ferryctl's usage and per-command help texts.
#ifndef FERRY_TOOLS_FERRYCTL_HELP_H_
#define FERRY_TOOLS_FERRYCTL_HELP_H_

#include <string>

namespace ferry {
namespace ctl {

// The general usage (command == "") or one command's help; "" if unknown.
std::string HelpText(const std::string& command);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_HELP_H_
