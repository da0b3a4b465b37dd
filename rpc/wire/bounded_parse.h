// The one way bytes from a peer become a generated protobuf message: they
// are first walked by limit-checked code (rpc/wire/wire_cursor.h) against the
// message's descriptor, counting what protobuf's parse would build —
// messages, repeated elements, strings, unknown fields — and how deep it
// nests; protobuf parses them only if that is within the limits.
//
// Why: a generated parse builds first, and what it built can only be
// checked after. 20 MiB of empty RRefHandles (2 bytes each on the wire,
// ~90 bytes each parsed) grew a worker by 901 MiB before RRefs/RenewLease
// could refuse them (issue 25, F3).
//
//   proto::LeaseRequest request;
//   FERRY_RETURN_IF_ERROR(BoundedParse(bytes, limits, "RRefs/RenewLease",
//                                      &request));
//
// Refused before anything is built, naming `what`, the field ("forks[…]")
// and the flag:
//   more than --max_items items (messages, repeated elements, unknown
//   fields) in the message                               RESOURCE_EXHAUSTED
//   a string or bytes field over --max_string_mb         RESOURCE_EXHAUSTED
//   more memory than kMaxParseGrowth times the message's bytes (plus
//   kParseSlack): many tiny messages (an empty one is 2 bytes on the wire,
//   ~100 in memory)                                      RESOURCE_EXHAUSTED
//   nesting deeper than kMaxParseDepth, malformed bytes, a group, anything
//   protobuf's parse then refuses (e.g. invalid UTF-8)   INVALID_ARGUMENT
// On an error `out` is unspecified.
#ifndef FERRY_RPC_WIRE_BOUNDED_PARSE_H_
#define FERRY_RPC_WIRE_BOUNDED_PARSE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "rpc/base/limits.h"

namespace ferry {

// Protobuf's own default recursion limit.
inline constexpr int kMaxParseDepth = 100;
// What a parse may build, at most: this many times the message's bytes,
// plus kParseSlack. Honest messages stay below (a lease chunk of handles
// 4-9x, a collective header's structure of small tensors up to ~17x, as
// estimated; tests/rpc/wire/bounded_parse_test.cc); an empty message costs
// ~50x.
inline constexpr int64_t kMaxParseGrowth = 24;
inline constexpr int64_t kParseSlack = int64_t{1} << 20;

absl::Status BoundedParse(const grpc::ByteBuffer& bytes, const Limits& limits,
                          absl::string_view what,
                          google::protobuf::Message* out);
absl::Status BoundedParse(absl::string_view bytes, const Limits& limits,
                          absl::string_view what,
                          google::protobuf::Message* out);

// The check alone: OK if protobuf may parse `slices` as a `type`.
absl::Status CheckParseBounds(const std::vector<grpc::Slice>& slices,
                              const google::protobuf::Descriptor* type,
                              const Limits& limits, absl::string_view what);

// What the check estimates a parse of `slices` as a `type` builds (bytes);
// for tests. -1 if the check refuses them.
int64_t EstimatedParseBytes(const std::vector<grpc::Slice>& slices,
                            const google::protobuf::Descriptor* type);

}  // namespace ferry

#endif  // FERRY_RPC_WIRE_BOUNDED_PARSE_H_
