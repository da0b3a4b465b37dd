// What the value fuzz targets share: an RRef codec that checks a handle as
// a worker's does (its owner rank must name a worker of a kWorldSize job)
// and limits tight enough that the fuzzers reach them.
#ifndef FERRY_TESTS_FUZZ_FAKE_CODEC_H_
#define FERRY_TESTS_FUZZ_FAKE_CODEC_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "proto/value.pb.h"
#include "rpc/base/limits.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/value.h"
#include "rpc/value/value_proto.h"

namespace ferry {
namespace fuzz {

inline constexpr int kWorldSize = 4;

// Encodes descriptors as they are; decodes a handle only if its owner rank
// is a worker of the job.
class FakeCodec final : public RRefCodec {
 public:
  absl::StatusOr<proto::RRefHandle> Encode(const Value::RRefPtr& r) override {
    return DescriptorToProto(r->descriptor());
  }
  absl::StatusOr<Value::RRefPtr> Decode(const proto::RRefHandle& h) override {
    if (h.owner_rank() < 0 || h.owner_rank() >= kWorldSize) {
      return absl::InvalidArgumentError(
          absl::StrCat("owner_rank ", h.owner_rank(), " is not a rank"));
    }
    return Value::RRefPtr(
        std::make_shared<const RRefBase>(DescriptorFromProto(h)));
  }
};

inline Limits TightLimits() {
  Limits l;
  l.max_items = 256;
  l.max_string_bytes = 256;
  l.max_args = 8;
  l.max_tensor_rank = 4;
  l.max_tensor_dim = 4096;
  return l;
}

}  // namespace fuzz
}  // namespace ferry

#endif  // FERRY_TESTS_FUZZ_FAKE_CODEC_H_
