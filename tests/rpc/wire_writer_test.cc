#include "rpc/wire/wire_writer.h"

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"
#include "gtest/gtest.h"
#include "rpc/value/rref_base.h"
#include "rpc/wire/grpc_status.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensor_samples.h"

namespace ferry {
namespace {

using ::ferry::testing::SampleTensor;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

// Encodes with the wire writer, parses with generated protobuf code.
std::vector<Value> RoundTrip(const std::vector<Value>& args,
                             proto::CallRequest* parsed) {
  proto::CallRequest header;
  header.set_function("f");
  header.set_caller_node(7);
  header.set_caller_name("worker7");
  LazyCodec codec;
  absl::StatusOr<grpc::ByteBuffer> bytes =
      EncodeCallRequest(header, args, &codec);
  EXPECT_OK(bytes);
  EXPECT_OK(
      FromGrpcStatus(grpc::SerializationTraits<proto::CallRequest>::Deserialize(
          &*bytes, parsed)));
  std::vector<Value> out;
  for (int i = 0; i < parsed->args_size(); ++i) {
    absl::StatusOr<Value> v = ValueFromProto(parsed->mutable_args(i), "args");
    EXPECT_OK(v);
    out.push_back(v.ok() ? *v : Value());
  }
  return out;
}

TEST(WireWriterTest, EveryKindParsesBackIdentically) {
  std::vector<Value> args = {
      Value(),
      Value(false),
      Value(true),
      Value(int64_t{0}),
      Value(int64_t{-1}),
      Value(std::numeric_limits<int64_t>::min()),
      Value(0.0),
      Value(-2.5),
      Value(""),
      Value("héllo"),
      Value(Bytes{""}),
      Value(Bytes{std::string("\0\xff", 2)}),
      Value(Tensor()),
      Value(SampleTensor(DType::kComplex128, {2, 3})),
      Value(SampleTensor(DType::kFloat32, {4096})),  // Aliased, not copied.
      Value(Tensor::Scalar<int8_t>(-3)),
      Value(Value::List{}),
      Value(Value::Map{}),
      Value(Value::Map{{"a", Value()},
                       {"b", Value::List{1, Value::Map{{"", 2.0}}}}}),
      Value(Value::List{Value::List{Value::List{}},
                        SampleTensor(DType::kBool, {3})}),
      Value(std::make_shared<const RRefBase>(
          RRefDescriptor{{1, 2}, {3, 4}, "worker1", 1})),
  };
  proto::CallRequest parsed;
  std::vector<Value> back = RoundTrip(args, &parsed);
  EXPECT_EQ(parsed.function(), "f");
  EXPECT_EQ(parsed.caller_node(), 7u);
  EXPECT_EQ(parsed.caller_name(), "worker7");
  ASSERT_EQ(back.size(), args.size());
  for (size_t i = 0; i < args.size(); ++i)
    EXPECT_EQ(back[i], args[i]) << "args[" << i << "]";
}

TEST(WireWriterTest, MatchesProtobufBytesExactly) {
  // Same bytes as the generated serializer for the same message.
  std::vector<Value> args = {
      Value(Value::List{1, "x", SampleTensor(DType::kInt16, {2, 2})})};
  proto::CallRequest expected;
  expected.set_function("g");
  ASSERT_OK(ValueToProto(args[0], expected.add_args()));
  proto::CallRequest header;
  header.set_function("g");
  LazyCodec codec;
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer bytes,
                       EncodeCallRequest(header, args, &codec));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bytes.Dump(&slices).ok());
  std::string wire;
  for (const auto& s : slices)
    wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(wire, expected.SerializeAsString());
}

TEST(WireWriterTest, LargeTensorBytesAreNotCopied) {
  Tensor big = SampleTensor(DType::kUInt8, {1 << 20});
  proto::CallRequest header;
  LazyCodec codec;
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer bytes,
                       EncodeCallRequest(header, {Value(big)}, &codec));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bytes.Dump(&slices).ok());
  bool aliased = false;
  for (const auto& s : slices)
    aliased |= s.begin() == reinterpret_cast<const uint8_t*>(big.data());
  EXPECT_TRUE(aliased);
}

TEST(WireWriterTest, ChecksLikeValueToProto) {
  proto::CallRequest header;
  LazyCodec codec;
  EXPECT_THAT(
      EncodeCallRequest(header, {Value(1), Value(std::string("\xff"))}, &codec),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("args[1]: string is not valid UTF-8")));
  Value deep(1);
  for (int i = 0; i < kMaxValueDepth + 1; ++i) deep = Value(Value::List{deep});
  EXPECT_THAT(EncodeCallRequest(header, {deep}, &codec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper")));
}

}  // namespace
}  // namespace ferry
