// Fuzz target: BoundedParse (rpc/wire/bounded_parse.h) over the request types
// of every service a worker serves and the other messages peers send that
// generated code parses (collective frame and message headers, etcd
// membership records), as one gRPC message would hold them: cut into
// slices where the input says.
//
// Input: [0] the message type (kTypes[[0] % n]); [1] where the bytes are
// cut into two slices ([1]·size/256); the rest, the message's bytes.
// Seeds: honest messages of each type, as the code that sends them makes
// them (tests/fuzz/corpus/bounded_parse_fuzz/).
//
// Properties: no crash; what the check lets through, protobuf parses (the
// walk refuses nothing protobuf needs and accepts only what it reads),
// and protobuf then built no more than the check's bound
// (kMaxParseGrowth × bytes + kParseSlack); what protobuf cannot parse,
// the check does not pass as parsed.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/collectives.pb.h"
#include "proto/membership_record.pb.h"
#include "proto/rendezvous.pb.h"
#include "proto/rref.pb.h"
#include "proto/worker.pb.h"
#include "rpc/base/limits.h"
#include "rpc/wire/bounded_parse.h"

namespace ferry {
namespace {

void Fail(const char* what) {
  std::fprintf(stderr, "bounded_parse_fuzz: %s\n", what);
  std::abort();
}

const std::vector<const google::protobuf::Message*>& Types() {
  static const auto* types = new std::vector<const google::protobuf::Message*>{
      // Worker (Call reads raw), RRefs, Rendezvous requests.
      &proto::StatusRequest::default_instance(),
      &proto::ListFunctionsRequest::default_instance(),
      &proto::ShutdownRequest::default_instance(),
      &proto::ForkRequest::default_instance(),
      &proto::LeaseRequest::default_instance(),
      &proto::ListOwnedRequest::default_instance(),
      &proto::JoinRequest::default_instance(),
      &proto::RegisterClientRequest::default_instance(),
      &proto::PollRequest::default_instance(),
      &proto::BarrierRequest::default_instance(),
      // Inside values and frames.
      &proto::RRefHandle::default_instance(),
      &proto::ChunkHeader::default_instance(),
      &proto::AllReduceHeader::default_instance(),
      &proto::ReduceScatterHeader::default_instance(),
      &proto::AllGatherHeader::default_instance(),
      &proto::AllToAllSingleHeader::default_instance(),
      &proto::KjtHeader::default_instance(),
      // etcd records.
      &proto::RankRecord::default_instance(),
      &proto::ClientRecord::default_instance(),
  };
  return *types;
}

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using ferry::Types;
  if (size < 2) return 0;
  const google::protobuf::Message* type = Types()[data[0] % Types().size()];
  const std::string bytes(reinterpret_cast<const char*>(data + 2), size - 2);
  const size_t cut = bytes.size() * data[1] / 256;
  grpc::Slice parts[2] = {grpc::Slice(bytes.data(), cut),
                          grpc::Slice(bytes.data() + cut, bytes.size() - cut)};
  const grpc::ByteBuffer buffer(parts, 2);
  ferry::Limits limits;
  limits.max_items = 4096;  // Small, so floods meet it quickly.
  std::unique_ptr<google::protobuf::Message> bounded(type->New());
  const absl::Status s =
      ferry::BoundedParse(buffer, limits, "fuzz", bounded.get());
  std::unique_ptr<google::protobuf::Message> plain(type->New());
  const bool parses = plain->ParseFromString(bytes);
  if (s.ok()) {
    if (!parses) ferry::Fail("the check passed what protobuf cannot parse");
    const int64_t bound =
        ferry::kMaxParseGrowth * static_cast<int64_t>(bytes.size()) +
        ferry::kParseSlack;
    if (static_cast<int64_t>(bounded->SpaceUsedLong()) > bound) {
      ferry::Fail("protobuf built more than the check allowed");
    }
  } else if (s.code() != absl::StatusCode::kInvalidArgument &&
             s.code() != absl::StatusCode::kResourceExhausted) {
    ferry::Fail("a code other than INVALID_ARGUMENT or RESOURCE_EXHAUSTED");
  }
  return 0;
}
