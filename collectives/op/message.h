// What the ranks of a collective op send each other: the algorithm's typed
// header (a small protobuf of proto/collectives.proto), the tensors it
// carries, and — only for the collectives that move arbitrary values
// (broadcast, scatter, gather) — a Value.
//
//   proto::AllReduceHeader h;  …
//   op.Send(to, 0, Message::Of(h, {input}));
//   …
//   proto::AllReduceHeader theirs;
//   if (!ReadHeader(got, &theirs)) → malformed (the sender is at fault)
//
// On the wire a message is the Value list [header bytes, tensors, value,
// op name]
// (ToEnvelope/FromEnvelope; proto/collectives.proto): the transport moves
// Values, with the tensors' bytes aliased, and the algorithms never see
// that form.
#ifndef FERRY_COLLECTIVES_OP_MESSAGE_H_
#define FERRY_COLLECTIVES_OP_MESSAGE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "google/protobuf/message.h"
#include "rpc/value/tensor.h"
#include "rpc/value/value.h"

namespace ferry {

struct Message {
  std::string header;  // A serialized header; empty for none.
  std::vector<Tensor> tensors;
  Value value;
  // The collective the sender runs ("all_reduce"), set by the transport:
  // a receiver running another op under the same key fails the op naming
  // both (a program that called collectives in a different order). Empty
  // from a sender that does not say.
  std::string op;

  static Message Of(const google::protobuf::MessageLite& header,
                    std::vector<Tensor> tensors = {});
  static Message OfTensors(std::vector<Tensor> tensors) {
    return Message{"", std::move(tensors), Value()};
  }
  static Message OfValue(Value value) {
    return Message{"", {}, std::move(value)};
  }
};

// The wire form of `m` (tensors shared, not copied), saying it belongs
// to collective `op` (if not empty).
Value ToEnvelope(const Message& m, absl::string_view op = {});

// The message a peer sent as `envelope`. INVALID_ARGUMENT saying what is
// wrong if it is no envelope (a forged or garbled message).
absl::StatusOr<Message> FromEnvelope(const Value& envelope);

// Parses `m`'s header as `out`; false if it is not one.
// Through BoundedParse (rpc/wire/bounded_parse.h), within DefaultLimits().
bool ReadHeader(const Message& m, google::protobuf::Message* out);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_OP_MESSAGE_H_
