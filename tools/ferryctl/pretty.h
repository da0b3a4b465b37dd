// Values for people to read (the `show` statement of scripts), in the
// style of the PyTorch and TorchRec documentation pages:
//
//   {"ranks": [...]}      one "rank r: …" line per rank
//   a tensor              tensor([0, 4, 8]), tensor([1+1j], dtype=complex64)
//   a KJT                 a table: one row per key, one column per sample
//                           'A'   [100]   None   [101, 102]
//   lists, maps           [a, b], {'a': x}
#ifndef FERRY_TOOLS_FERRYCTL_PRETTY_H_
#define FERRY_TOOLS_FERRYCTL_PRETTY_H_

#include <string>

#include "rpc/value/value.h"

namespace ferry {
namespace ctl {

// Lines ending in "\n".
std::string Pretty(const Value& value);

}  // namespace ctl
}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYCTL_PRETTY_H_
