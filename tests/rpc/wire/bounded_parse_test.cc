// BoundedParse: what a generated parse would build is counted from the
// bytes first, and refused before it is built; honest messages pass far
// below the bounds.
#include "rpc/wire/bounded_parse.h"

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/collectives.pb.h"
#include "proto/rendezvous.pb.h"
#include "proto/rref.pb.h"
#include "proto/worker.pb.h"
#include "rpc/base/limits.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string Repeat(const std::string& unit, int64_t n) {
  std::string out;
  out.reserve(unit.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out += unit;
  return out;
}

std::vector<grpc::Slice> SlicesOf(const std::string& bytes) {
  return {grpc::Slice(bytes)};
}

// What the check estimates over the message's bytes, and what protobuf
// then really built (SpaceUsedLong undercounts malloc's overhead).
struct Growth {
  double estimated;
  double built;
};
Growth GrowthOf(const google::protobuf::Message& m) {
  const std::string wire = m.SerializeAsString();
  const int64_t estimate =
      EstimatedParseBytes(SlicesOf(wire), m.GetDescriptor());
  std::unique_ptr<google::protobuf::Message> parsed(m.New());
  EXPECT_OK(BoundedParse(wire, Limits(), "test", parsed.get()));
  return {static_cast<double>(estimate) / wire.size(),
          static_cast<double>(parsed->SpaceUsedLong()) / wire.size()};
}

// A lease chunk as a holder sends it: 8192 handles (rref/lease_chunks.h),
// ids as the RRef layer makes them (a 62-bit random base), or as small as
// they can be.
proto::LeaseRequest LeaseChunk(bool small_ids) {
  proto::LeaseRequest r;
  r.set_holder(3);
  r.set_round(7);
  r.set_chunks(1);
  uint64_t id = small_ids ? 1 : (uint64_t{1} << 61) + 12345;
  for (int i = 0; i < 8192; ++i) {
    proto::RRefHandle* h = r.add_forks();
    h->set_rref_creator(small_ids ? 0 : 2);
    h->set_rref_local(id++);
    h->set_fork_creator(small_ids ? 0 : 3);
    h->set_fork_local(id++);
    h->set_owner("worker0");
  }
  return r;
}

// An all_gather along an axis of a nested structure (AllGatherHeader).
proto::AllGatherHeader NestedHeader() {
  proto::AllGatherHeader h;
  h.set_along_axis(true);
  proto::Structure* s = h.mutable_structure();
  for (int depth = 0; depth < 8; ++depth) {
    proto::StructureMap* map = s->mutable_map();
    for (int k = 0; k < 4; ++k) {
      map->add_keys(absl::StrCat("k", k));
      proto::TensorMeta* t = map->add_values()->mutable_tensor();
      t->set_dtype(proto::FLOAT32);
      t->add_shape(2);
      t->add_shape(3);
    }
    s = map->add_values();
    map->add_keys("next");
  }
  return h;
}

// The densest honest messages: lease chunks of handles with small ids,
// structures of many small tensors (a header's structure of tensors of
// shape [1] is the worst: ~17x). The bound leaves room above them; an
// empty message costs ~50x.
TEST(BoundedParseTest, HonestMessagesPassBelowTheGrowthBound) {
  for (bool small : {false, true}) {
    const Growth g = GrowthOf(LeaseChunk(small));
    std::cout << "lease chunk, " << (small ? "small" : "real")
              << " ids: estimated " << g.estimated << "x, built " << g.built
              << "x\n";
    EXPECT_LT(g.estimated, kMaxParseGrowth / 2.0);
  }
  const Growth nested = GrowthOf(NestedHeader());
  std::cout << "nested header: estimated " << nested.estimated << "x, built "
            << nested.built << "x\n";
  EXPECT_LT(nested.estimated, 0.75 * kMaxParseGrowth);
  proto::AllGatherHeader leaves;
  for (int i = 0; i < 10000; ++i) {
    proto::TensorMeta* t = leaves.mutable_structure()
                               ->mutable_list()
                               ->add_items()
                               ->mutable_tensor();
    t->set_dtype(proto::FLOAT32);
    t->add_shape(1);
  }
  const Growth tiny = GrowthOf(leaves);
  std::cout << "structure of [1]-tensors: estimated " << tiny.estimated
            << "x, built " << tiny.built << "x\n";
  EXPECT_LT(tiny.estimated, 0.8 * kMaxParseGrowth);
  proto::KjtHeader kjt;
  proto::KjtPartHeader* part = kjt.add_parts();
  for (int i = 0; i < 1000; ++i) part->add_keys(absl::StrCat("f", i));
  for (int r = 0; r < 64; ++r) part->add_features_per_rank(16);
  const Growth keys = GrowthOf(kjt);
  std::cout << "kjt header: estimated " << keys.estimated << "x, built "
            << keys.built << "x\n";
  EXPECT_LT(keys.estimated, kMaxParseGrowth / 2.0);
}

// The estimate is not below what protobuf builds: the bound means what it
// says.
TEST(BoundedParseTest, TheEstimateCoversWhatIsBuilt) {
  proto::LeaseRequest empties;
  for (int i = 0; i < 10000; ++i) empties.add_forks();
  proto::LeaseRequest real = LeaseChunk(false);
  for (const proto::LeaseRequest* m : {&empties, &real}) {
    const std::string wire = m->SerializeAsString();
    proto::LeaseRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire));
    EXPECT_GE(EstimatedParseBytes(SlicesOf(wire), m->GetDescriptor()),
              static_cast<int64_t>(parsed.SpaceUsedLong()));
  }
}

// Issue 25, F3: 2 bytes on the wire, ~90 in memory, a million times.
TEST(BoundedParseTest, ManyEmptyMessagesAreRefusedBeforeTheyAreBuilt) {
  proto::LeaseRequest out;
  const std::string many = Repeat(std::string("\x12\x00", 2), 10 << 20);
  EXPECT_THAT(BoundedParse(many, Limits(), "worker0: RRefs/RenewLease", &out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("worker0: RRefs/RenewLease: forks: more "
                                       "than 1048576 items in one message"),
                             HasSubstr("(--max_items=1048576)"))));
  EXPECT_EQ(out.forks_size(), 0);
  const std::string fewer = Repeat(std::string("\x12\x00", 2), 1 << 19);
  EXPECT_THAT(BoundedParse(fewer, Limits(), "RRefs/RenewLease", &out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("RRefs/RenewLease: forks: a message "
                                       "of 1 MiB would take more than"),
                             HasSubstr("24 times its size"))));
  EXPECT_EQ(out.forks_size(), 0);
  // A few are nothing.
  EXPECT_OK(BoundedParse(Repeat(std::string("\x12\x00", 2), 1000), Limits(), "",
                         &out));
  EXPECT_EQ(out.forks_size(), 1000);
}

// Unknown fields are kept by protobuf, each an allocation: they count.
TEST(BoundedParseTest, UnknownFieldsCount) {
  proto::StatusRequest out;  // No fields at all.
  Limits limits;
  limits.max_items = 1000;
  // Field 1000 varints; field 15, empty strings.
  const std::string varints = Repeat(std::string("\xc0\x3e\x00", 3), 1001);
  EXPECT_THAT(BoundedParse(varints, limits, "Worker/GetStatus", &out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("Worker/GetStatus: (unknown fields): "
                                       "more than 1000 items"),
                             HasSubstr("(--max_items=1000)"))));
  const std::string strings = Repeat(std::string("\x7a\x00", 2), 300000);
  EXPECT_THAT(BoundedParse(strings, Limits(), "Worker/GetStatus", &out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("would take more than")));
  // A known field in another wire type is unknown too, as in protobuf.
  EXPECT_THAT(BoundedParse(Repeat(std::string("\x15\x00\x00\x00\x00", 5), 1001),
                           limits, "", &out),
              StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(BoundedParseTest, RepeatedNumbersPackedOrNot) {
  proto::AllToAllSingleHeader h;
  for (int i = 0; i < 100; ++i) h.add_input_splits(i);
  const std::string packed = h.SerializeAsString();
  std::string unpacked;
  for (int i = 0; i < 100; ++i) unpacked += std::string("\x08", 1) + char(i);
  for (const std::string& wire : {packed, unpacked}) {
    proto::AllToAllSingleHeader out;
    ASSERT_OK(BoundedParse(wire, Limits(), "", &out));
    EXPECT_EQ(out.input_splits_size(), 100);
  }
  Limits limits;
  limits.max_items = 99;
  proto::AllToAllSingleHeader out;
  EXPECT_THAT(BoundedParse(packed, limits, "h", &out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("h: input_splits: more than 99 items")));
}

TEST(BoundedParseTest, LongStringsAreRefused) {
  proto::RegisterClientRequest r;
  r.set_description(std::string(3 << 20, 'd'));
  Limits limits;
  limits.max_string_bytes = 2 << 20;
  proto::RegisterClientRequest out;
  EXPECT_THAT(BoundedParse(r.SerializeAsString(), limits,
                           "Rendezvous/RegisterClient", &out),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("Rendezvous/RegisterClient: "
                                       "description: a string of 3 MiB"),
                             HasSubstr("(--max_string_mb=2)"))));
}

// `field` (length-delimited) holding `body`.
std::string Field(int field, const std::string& body) {
  std::string out(1, static_cast<char>(field << 3 | 2));
  for (uint64_t n = body.size();; n >>= 7) {
    out.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    if (n < 0x80) break;
  }
  return out + body;
}

TEST(BoundedParseTest, NestingDeeperThanProtobufAllowsIsRefused) {
  // Structure.list (2) → StructureList.items (1) → Structure …: two
  // messages a step.
  auto nest = [](int steps) {
    std::string s;
    for (int i = 0; i < steps; ++i) s = Field(2, Field(1, s));
    return s;
  };
  proto::Structure out;
  EXPECT_OK(BoundedParse(nest(49), Limits(), "header", &out));
  EXPECT_THAT(BoundedParse(nest(51), Limits(), "header", &out),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 100 messages")));
}

TEST(BoundedParseTest, MalformedBytesAreInvalidArgument) {
  proto::ForkRequest out;
  for (const std::string& bad :
       {std::string("\x08", 1), std::string("\x0b", 1),
        std::string("\x12\x05\x01", 3), std::string("\x08\xff", 2),
        std::string(11, '\xff')}) {
    EXPECT_THAT(BoundedParse(bad, Limits(), "RRefs/AddFork", &out),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("RRefs/AddFork: malformed message")))
        << bad.size();
  }
  // What the walk passes but protobuf refuses: invalid UTF-8 in a string.
  proto::RegisterClientRequest r;
  EXPECT_THAT(BoundedParse(std::string("\x0a\x02\xff\xfe", 4), Limits(),
                           "Rendezvous/RegisterClient", &r),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("protobuf's parse refused it")));
}

// Every request type of every service a worker serves parses its honest
// form, and is refused a flood naming its service and method.
TEST(BoundedParseTest, EveryServicesRequests) {
  const std::vector<const google::protobuf::FileDescriptor*> files = {
      proto::CallRequest::descriptor()->file(),
      proto::ForkRequest::descriptor()->file(),
      proto::JoinRequest::descriptor()->file()};
  Limits limits;
  limits.max_items = 1000;
  const std::string flood = Repeat(std::string("\xc0\x3e\x00", 3), 1001);
  int methods = 0;
  for (const google::protobuf::FileDescriptor* file : files) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        const google::protobuf::MethodDescriptor* method = service->method(m);
        const google::protobuf::Message* prototype =
            google::protobuf::MessageFactory::generated_factory()->GetPrototype(
                method->input_type());
        std::unique_ptr<google::protobuf::Message> request(prototype->New());
        const std::string what =
            absl::StrCat(service->name(), "/", method->name());
        EXPECT_OK(BoundedParse(std::string(), Limits(), what, request.get()));
        EXPECT_THAT(
            BoundedParse(flood, limits, what, request.get()),
            StatusIs(absl::StatusCode::kResourceExhausted,
                     AllOf(HasSubstr(what), HasSubstr("(--max_items=1000)"))));
        ++methods;
      }
    }
  }
  EXPECT_EQ(methods, 14);
}

}  // namespace
}  // namespace ferry
