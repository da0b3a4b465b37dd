// What keeping a Value costs, in bytes: RRef owners charge it to the
// creator (rref/owner_table.h), broadcast chooses its algorithm by it.
// Internal: not part of ferry.h.
#ifndef FERRY_RPC_VALUE_PAYLOAD_BYTES_H_
#define FERRY_RPC_VALUE_PAYLOAD_BYTES_H_

#include <cstdint>

#include "rpc/value/value.h"

namespace ferry {

// About how many bytes `v` takes on the wire, and so what keeping it costs:
// its tensors', strings' and bytes' contents, and a few bytes per value.
// A tensor counts all its bytes, even where it shares them with another.
int64_t PayloadBytes(const Value& v);

}  // namespace ferry

#endif  // FERRY_RPC_VALUE_PAYLOAD_BYTES_H_
