// Where two values differ, said for a person reading an `expect` failure:
// "ranks[2].data[3]: got 5, expected 6".
#ifndef FERRY_TOOLS_FERRYCTL_VALUE_DIFF_H_
#define FERRY_TOOLS_FERRYCTL_VALUE_DIFF_H_

#include <optional>
#include <string>

#include "rpc/value/value.h"

namespace ferry {
namespace ctl {

// The first difference (depth first), or nullopt if equal.
std::optional<std::string> FirstDifference(const Value& got, const Value& want);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_VALUE_DIFF_H_
