// The options every collective takes (a plain struct, for the public API).
#ifndef FERRY_COLLECTIVES_OP_OPTIONS_H_
#define FERRY_COLLECTIVES_OP_OPTIONS_H_

#include <string>

#include "absl/time/time.h"

namespace ferry {

struct CollectiveOptions {
  // The op's deadline, from its start on this rank; zero: the worker's
  // default call timeout.
  absl::Duration timeout = absl::ZeroDuration();
  // Names the op instead of the group's sequence number. Every member
  // passes the same tag; tags are unique among the group's ops.
  std::string tag;
};

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_OPTIONS_H_
