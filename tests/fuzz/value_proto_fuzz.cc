// Fuzz target: wire bytes of a proto Value → ValueFromProto
// (rpc/value/value_proto.h), without an RRef codec and with a fake one
// that adopts handles the way a worker's would (refusing an owner rank
// outside the job), under default or tight limits.
//
// Input: the first byte's bits pick the codec and the limits; the rest is
// the serialized proto::Value.
// Properties: no crash; a value that decodes encodes again (unless it
// holds a string that is not UTF-8, which encoding refuses) and decodes to
// the same value (compared as JSON, which shows NaN).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/value.pb.h"
#include "rpc/base/limits.h"
#include "rpc/value/json.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"
#include "tests/fuzz/fake_codec.h"

namespace ferry {
namespace {

using fuzz::FakeCodec;
using fuzz::TightLimits;

void Check(const uint8_t* data, size_t size, RRefCodec* codec,
           const Limits& limits) {
  proto::Value message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return;
  absl::StatusOr<Value> v = ValueFromProto(&message, "args[0]", codec, limits);
  if (!v.ok()) return;
  proto::Value again;
  if (!ValueToProto(*v, &again, codec).ok()) return;
  absl::StatusOr<Value> w = ValueFromProto(&again, "again", codec, limits);
  if (!w.ok() || ToJson(*w) != ToJson(*v)) std::abort();
}

}  // namespace
}  // namespace ferry

// Protobuf logs every string that is not UTF-8; fuzzing makes many.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const ferry::Limits* const tight =
      new ferry::Limits(ferry::TightLimits());
  ferry::FakeCodec codec;
  ferry::Check(data + 1, size - 1, (data[0] & 1) ? &codec : nullptr,
               (data[0] & 2) ? *tight : ferry::DefaultLimits());
  return 0;
}
