#include "collectives/op/message.h"

#include "absl/strings/str_cat.h"
#include "rpc/base/limits.h"
#include "rpc/wire/bounded_parse.h"

namespace ferry {

Message Message::Of(const google::protobuf::MessageLite& header,
                    std::vector<Tensor> tensors) {
  return Message{header.SerializeAsString(), std::move(tensors), Value()};
}

Value ToEnvelope(const Message& m, absl::string_view op) {
  Value::List tensors(m.tensors.begin(), m.tensors.end());
  Value::List envelope{Value(Bytes{m.header}), Value(std::move(tensors)),
                       m.value};
  // After the tensors, so where the first tensor lands is unchanged.
  if (!op.empty()) envelope.push_back(Value(op));
  return Value(std::move(envelope));
}

absl::StatusOr<Message> FromEnvelope(const Value& envelope) {
  // Positional, so a message costs a few bytes of framing and no keys; the
  // shape is checked as a whole before anything is taken from it.
  // Three parts, or four with the sender's op name (a string).
  if (!envelope.is_list() || envelope.as_list().size() < 3 ||
      envelope.as_list().size() > 4 || !envelope.as_list()[0].is_bytes() ||
      !envelope.as_list()[1].is_list() ||
      (envelope.as_list().size() == 4 && !envelope.as_list()[3].is_string())) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a collective message (", envelope.kind_name(), ")"));
  }
  const Value::List& parts = envelope.as_list();
  Message m;
  m.header = parts[0].as_bytes().data;
  m.tensors.reserve(parts[1].as_list().size());
  for (const Value& t : parts[1].as_list()) {
    if (!t.is_tensor()) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.kind_name(), " among its tensors"));
    }
    m.tensors.push_back(t.as_tensor());
  }
  m.value = parts[2];
  if (parts.size() == 4) m.op = parts[3].as_string();
  return m;
}

bool ReadHeader(const Message& m, google::protobuf::Message* out) {
  return BoundedParse(m.header, DefaultLimits(), "header", out).ok();
}

}  // namespace ferry
