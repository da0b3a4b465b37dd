#include "rpc/wire/wire_reader.h"

#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/worker.pb.h"
#include "rpc/base/status_util.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/tensor_builder.h"
#include "rpc/value/tensor_landing.h"
#include "rpc/wire/wire_writer.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensor_samples.h"

namespace ferry {
namespace {

using ::ferry::testing::SampleTensor;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// `wire` as a ByteBuffer cut into slices of `piece` bytes (0: one slice).
grpc::ByteBuffer Buffer(const std::string& wire, size_t piece = 0) {
  std::vector<grpc::Slice> slices;
  if (piece == 0) piece = wire.size() + 1;
  for (size_t i = 0; i < wire.size(); i += piece) {
    std::string part = wire.substr(i, piece);
    slices.emplace_back(part.data(), part.size());
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Flatten(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(bytes.Dump(&slices).ok());
  std::string wire;
  for (const auto& s : slices)
    wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return wire;
}

std::string Varint(uint64_t v) {
  std::string out;
  for (; v >= 0x80; v >>= 7) out.push_back(static_cast<char>(v | 0x80));
  out.push_back(static_cast<char>(v));
  return out;
}

std::string LengthField(int field, const std::string& bytes) {
  return Varint((uint64_t(field) << 3) | 2) + Varint(bytes.size()) + bytes;
}

proto::CallRequest Header() {
  proto::CallRequest header;
  header.set_function("f");
  header.set_caller_node(7);
  header.set_caller_name("worker7");
  return header;
}

std::string Encode(const std::vector<Value>& args) {
  LazyCodec codec;
  absl::StatusOr<grpc::ByteBuffer> bytes =
      EncodeCallRequest(Header(), args, &codec);
  EXPECT_OK(bytes);
  return bytes.ok() ? Flatten(*bytes) : "";
}

absl::StatusOr<std::vector<Value>> Read(const std::string& wire,
                                        const Limits& limits = Limits(),
                                        size_t piece = 0) {
  FERRY_ASSIGN_OR_RETURN(CallRequestReader reader,
                         CallRequestReader::Open(Buffer(wire, piece), limits));
  return reader.Args(nullptr);
}

std::vector<Value> EveryKind() {
  return {
      Value(),
      Value(false),
      Value(true),
      Value(int64_t{-1}),
      Value(std::numeric_limits<int64_t>::min()),
      Value(-2.5),
      Value(""),
      Value("héllo"),
      Value(Bytes{std::string("\0\xff", 2)}),
      Value(Tensor()),
      Value(SampleTensor(DType::kComplex128, {2, 3})),
      Value(SampleTensor(DType::kFloat32, {4096})),
      Value(SampleTensor(DType::kBool, {3, 0, 2})),
      Value(Tensor::Scalar<int8_t>(-3)),
      Value(Value::List{}),
      Value(Value::Map{{"a", Value()},
                       {"b", Value::List{1, Value::Map{{"", 2.0}}}}}),
      Value(std::make_shared<const RRefBase>(
          RRefDescriptor{{1, 2}, {3, 4}, "worker1", 1})),
  };
}

TEST(WireReaderTest, ReadsWhatTheWriterWrites) {
  std::vector<Value> args = EveryKind();
  std::string wire = Encode(args);
  ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                       CallRequestReader::Open(Buffer(wire), Limits()));
  EXPECT_EQ(reader.header().function, "f");
  EXPECT_EQ(reader.header().caller_node, 7u);
  EXPECT_FALSE(reader.header().create_rref.has_value());
  ASSERT_OK_AND_ASSIGN(std::vector<Value> back, reader.Args(nullptr));
  ASSERT_EQ(back.size(), args.size());
  for (size_t i = 0; i < args.size(); ++i)
    EXPECT_EQ(back[i], args[i]) << "args[" << i << "]";
}

TEST(WireReaderTest, ReadsAcrossSliceBoundaries) {
  std::vector<Value> args = EveryKind();
  std::string wire = Encode(args);
  for (size_t piece : {1, 3, 7, 1000}) {
    ASSERT_OK_AND_ASSIGN(std::vector<Value> back, Read(wire, Limits(), piece));
    ASSERT_EQ(back.size(), args.size()) << piece;
    for (size_t i = 0; i < args.size(); ++i)
      EXPECT_EQ(back[i], args[i]) << "piece " << piece << " args[" << i << "]";
  }
}

TEST(WireReaderTest, ReadsWhatProtobufWrites) {
  // Unpacked shapes, fields out of order, unknown fields and a repeated
  // oneof member: all as the generated parser reads them.
  proto::CallRequest request;
  request.set_caller_name("c");
  ASSERT_OK(ValueToProto(Value(Value::List{1, "x"}), request.add_args()));
  request.set_function("g");
  ASSERT_OK(
      ValueToProto(SampleTensor(DType::kInt16, {2, 2}), request.add_args()));
  std::string wire = request.SerializeAsString();
  wire += std::string("\x78\x05", 2);  // Field 15 (unknown), varint 5.
  // args[2]: an unpacked shape (two varint fields) given after the data.
  proto::Tensor t;
  t.set_dtype(proto::UINT8);
  t.set_data("abcdef");
  std::string tensor = t.SerializeAsString() + "\x10\x02\x10\x03";
  std::string value = "\x32" + std::string(1, static_cast<char>(tensor.size()));
  value += tensor;
  wire += "\x12" + std::string(1, static_cast<char>(value.size())) + value;
  // args[3]: int 1 then string "s": the last member set wins.
  std::string last = std::string("\x10\x01", 2) + "\x22\x01s";
  wire += "\x12" + std::string(1, static_cast<char>(last.size())) + last;
  ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                       CallRequestReader::Open(Buffer(wire), Limits()));
  EXPECT_EQ(reader.header().function, "g");
  ASSERT_OK_AND_ASSIGN(std::vector<Value> args, reader.Args(nullptr));
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[0], Value(Value::List{1, "x"}));
  EXPECT_EQ(args[1], Value(SampleTensor(DType::kInt16, {2, 2})));
  ASSERT_TRUE(args[2].is_tensor());
  EXPECT_EQ(args[2].as_tensor().shape(), (Shape{2, 3}));
  EXPECT_EQ(args[2].as_tensor().bytes(), "abcdef");
  EXPECT_EQ(args[3], Value("s"));
}

TEST(WireReaderTest, LargeTensorInOneSliceIsReferencedNotCopied) {
  Tensor big = SampleTensor(DType::kFloat32, {1 << 16});
  // Unknown fields of 0, 2, 3 and 5 bytes in front put the tensor's bytes
  // at every offset modulo 4: referenced where float32-aligned, else copied.
  for (const std::string& pad : {std::string(), std::string("\x78\x00", 2),
                                 std::string("\x78\x80\x00", 3),
                                 std::string("\x78\x00\x78\x80\x00", 5)}) {
    std::string wire = pad + Encode({Value(big)});
    grpc::ByteBuffer bytes = Buffer(wire);
    std::vector<grpc::Slice> slices;
    ASSERT_TRUE(bytes.Dump(&slices).ok());
    ASSERT_EQ(slices.size(), 1u);
    // The tensor's bytes end the message.
    const char* in_slice = reinterpret_cast<const char*>(slices[0].begin()) +
                           wire.size() - big.nbytes();
    ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                         CallRequestReader::Open(bytes, Limits()));
    ASSERT_OK_AND_ASSIGN(std::vector<Value> args, reader.Args(nullptr));
    const Tensor& t = args[0].as_tensor();
    EXPECT_EQ(t, big);
    const bool aligned = reinterpret_cast<uintptr_t>(in_slice) % 4 == 0;
    EXPECT_EQ(t.data() == in_slice, aligned) << pad.size();
  }
}

// ReadValue copies the first tensor it meets into the landing offered, if
// it is the landing's size; no other tensor goes there.
TEST(WireReaderTest, TheFirstTensorOfTheLandingsSizeLandsThere) {
  const Tensor a = Tensor::FromVector<int64_t>({1, 2, 3});
  const Tensor b = Tensor::FromVector<int64_t>({4, 5, 6});
  ASSERT_OK_AND_ASSIGN(TensorBuilder out,
                       TensorBuilder::Create(DType::kInt64, {3}));
  ASSERT_OK_AND_ASSIGN(
      grpc::ByteBuffer wire,
      EncodeValue(Value(Value::List{Value(a), Value(b)}), nullptr, "v"));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(Buffer(Flatten(wire), 5).Dump(&slices).ok());
  TensorLanding at = TensorLanding::Within(out, 0, 3);
  ASSERT_OK_AND_ASSIGN(Value v, ReadValue(slices, Limits(), "v", &at));
  EXPECT_TRUE(at.Holds(v.as_list()[0].as_tensor()));
  EXPECT_FALSE(at.Holds(v.as_list()[1].as_tensor()));
  EXPECT_EQ(v.as_list()[0].as_tensor(), a);
  EXPECT_EQ(v.as_list()[1].as_tensor(), b);

  // The first tensor is of another size: nothing lands, not even b.
  TensorLanding wrong = TensorLanding::Within(out, 0, 2);
  ASSERT_OK_AND_ASSIGN(
      wire, EncodeValue(Value(Value::List{
                            Value(Tensor::FromVector<int64_t>({9})), Value(b)}),
                        nullptr, "v"));
  slices.clear();
  ASSERT_TRUE(wire.Dump(&slices).ok());
  ASSERT_OK_AND_ASSIGN(v, ReadValue(slices, Limits(), "v", &wrong));
  EXPECT_FALSE(wrong.Holds(v.as_list()[1].as_tensor()));
  EXPECT_EQ(v.as_list()[1].as_tensor(), b);
  EXPECT_THAT(ReadValue({grpc::Slice(std::string("\x32\x05"))}, Limits(), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("v: malformed message")));
}

// Where the tensors' bytes begin is found from the bytes before them alone,
// depth first through lists and maps.
TEST(WireReaderTest, FindsTheTensorsBytesFromAPrefix) {
  const Tensor t = SampleTensor(DType::kFloat32, {64});
  const Tensor u = Tensor::FromVector<int32_t>({1, 2});
  const Value v(
      Value::List{Value(Bytes{"header"}),
                  Value(Value::Map{{"k", Value(int64_t{1})},
                                   {"t", Value(Value::List{Value(t)})}}),
                  Value(u)});
  ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer bytes, EncodeValue(v, nullptr, "v"));
  const std::string wire = Flatten(bytes);
  const size_t at = wire.find(std::string(t.bytes()));
  const size_t u_at = wire.rfind(std::string(u.bytes()));
  ASSERT_NE(at, std::string::npos);
  ASSERT_NE(u_at, std::string::npos);
  auto find = [&](size_t prefix) {
    std::vector<grpc::Slice> slices;
    EXPECT_TRUE(Buffer(wire.substr(0, prefix), 7).Dump(&slices).ok());
    absl::StatusOr<std::vector<TensorPlace>> places =
        FindTensorData(slices, wire.size());
    EXPECT_OK(places);
    return places.ok() ? *places : std::vector<TensorPlace>();
  };
  // Cut before t's data length: nothing placed yet.
  EXPECT_TRUE(find(at - 2).empty());
  // Up to t's data (or into it): t only.
  for (size_t prefix : {at, at + 1}) {
    std::vector<TensorPlace> places = find(prefix);
    ASSERT_EQ(places.size(), 1u) << prefix;
    EXPECT_EQ(places[0].offset, at);
    EXPECT_EQ(places[0].length, t.nbytes());
  }
  // The whole message: u too.
  std::vector<TensorPlace> places = find(wire.size());
  ASSERT_EQ(places.size(), 2u);
  EXPECT_EQ(places[1].offset, u_at);
  EXPECT_EQ(places[1].length, u.nbytes());
  ASSERT_OK_AND_ASSIGN(
      bytes, EncodeValue(Value(Value::List{Value("no tensor")}), nullptr, "v"));
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(bytes.Dump(&slices).ok());
  ASSERT_OK_AND_ASSIGN(std::vector<TensorPlace> none,
                       FindTensorData(slices, bytes.Length()));
  EXPECT_TRUE(none.empty());
}

// Issue 25, F1: a tensor field that ends inside its own data field. Its
// data's length was read past the tensor's end, and the place taken as
// inside the message; now it is malformed, named where.
TEST(WireReaderTest, ATensorEndingInsideItsDataFieldIsMalformed) {
  const std::string wire =
      std::string("\x2a\x02xy", 4) + std::string("\x32\x01\x1a\x80\x80\x04", 6);
  const std::vector<grpc::Slice> slices = {grpc::Slice(wire)};
  EXPECT_THAT(FindTensorData(slices, 1 << 20),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("message.tensor: malformed message")));
  EXPECT_THAT(ReadValue(slices, Limits(), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("v: malformed message")));
  // A tensor nested in lists and maps is named by where it is.
  const std::string nested =
      std::string("\x3a\x05\x0a\x03", 4) + std::string("\x32\x01\x1a", 3);
  EXPECT_THAT(FindTensorData({grpc::Slice(nested)}, nested.size()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("message.list.tensor")));
}

TEST(WireReaderTest, ResponseRoundTrip) {
  for (const Value& v : EveryKind()) {
    LazyCodec codec;
    ASSERT_OK_AND_ASSIGN(grpc::ByteBuffer bytes, EncodeCallResponse(v, &codec));
    ASSERT_OK_AND_ASSIGN(Value back, ReadCallResponse(Buffer(Flatten(bytes), 5),
                                                      Limits(), nullptr));
    EXPECT_EQ(back, v);
  }
  ASSERT_OK_AND_ASSIGN(Value empty,
                       ReadCallResponse(grpc::ByteBuffer(), Limits(), nullptr));
  EXPECT_TRUE(empty.is_null());
}

TEST(WireReaderTest, TooManyArgumentsFailBeforeAnyIsBuilt) {
  Limits limits;
  limits.max_args = 3;
  std::string wire = Encode({1, 2, 3, 4});
  ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                       CallRequestReader::Open(Buffer(wire), limits));
  EXPECT_EQ(reader.header().function, "f");
  EXPECT_THAT(reader.Args(nullptr),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("more than 3 arguments"),
                             HasSubstr("(--max_args=3)"))));
}

std::string EncodeWithKwargs(const std::vector<Value>& args,
                             Value::Map kwargs) {
  LazyCodec codec;
  absl::StatusOr<grpc::ByteBuffer> bytes =
      EncodeCallRequest(Header(), args, &codec, Value(std::move(kwargs)));
  EXPECT_OK(bytes);
  return bytes.ok() ? Flatten(*bytes) : "";
}

absl::StatusOr<std::vector<Value>> ReadWithKwargs(
    const std::string& wire, Value::Map* kwargs,
    const Limits& limits = Limits()) {
  FERRY_ASSIGN_OR_RETURN(CallRequestReader reader,
                         CallRequestReader::Open(Buffer(wire, 7), limits));
  return reader.Args(nullptr, kwargs);
}

TEST(WireReaderTest, KeywordArgumentsRoundTrip) {
  Value::Map sent{{"scale", 2.5},
                  {"w", SampleTensor(DType::kFloat32, {3})},
                  {"nested", Value::List{1, Value::Map{{"a", "b"}}}}};
  std::string wire = EncodeWithKwargs({1, 2}, sent);
  ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                       CallRequestReader::Open(Buffer(wire), Limits()));
  EXPECT_TRUE(reader.header().kwargs);
  Value::Map kwargs;
  ASSERT_OK_AND_ASSIGN(std::vector<Value> args, reader.Args(nullptr, &kwargs));
  EXPECT_EQ(args, (std::vector<Value>{1, 2}));
  EXPECT_EQ(kwargs, sent);
}

TEST(WireReaderTest, NoKeywordArgumentsSendsNoField) {
  std::string wire = EncodeWithKwargs({1}, {});
  EXPECT_EQ(wire, Encode({1}));
  ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                       CallRequestReader::Open(Buffer(wire), Limits()));
  EXPECT_FALSE(reader.header().kwargs);
}

TEST(WireReaderTest, RepeatedKwargsFieldsMerge) {
  // Two kwargs fields, as protobuf would merge them: the later key wins.
  std::string wire =
      EncodeWithKwargs({}, {{"a", 1}, {"b", 2}}) +
      Flatten(*EncodeCallRequest(proto::CallRequest(), {}, nullptr,
                                 Value(Value::Map{{"b", 3}})));
  Value::Map kwargs;
  ASSERT_OK(ReadWithKwargs(wire, &kwargs).status());
  EXPECT_EQ(kwargs, (Value::Map{{"a", 1}, {"b", 3}}));
}

TEST(WireReaderTest, KeywordArgumentsAreRefusedWhereNotTaken) {
  EXPECT_THAT(Read(EncodeWithKwargs({1}, {{"b", 2}})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kwargs: keyword arguments are not taken")));
}

TEST(WireReaderTest, KeywordArgumentsCountAgainstMaxArgs) {
  Limits limits;
  limits.max_args = 3;
  Value::Map kwargs;
  EXPECT_OK(
      ReadWithKwargs(EncodeWithKwargs({1, 2}, {{"c", 3}}), &kwargs, limits)
          .status());
  kwargs.clear();
  EXPECT_THAT(ReadWithKwargs(EncodeWithKwargs({1, 2}, {{"c", 3}, {"d", 4}}),
                             &kwargs, limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("more than 3 arguments"),
                             HasSubstr("(--max_args=3)"))));
  // Their values share the message's --max_items budget.
  limits = Limits();
  limits.max_items = 10;
  kwargs.clear();
  EXPECT_THAT(
      ReadWithKwargs(
          EncodeWithKwargs({1}, {{"many", Value(Value::List(20, Value()))}}),
          &kwargs, limits),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("kwargs.many: more than 10 values")));
}

TEST(WireReaderTest, EveryKwargsFieldCountsAgainstMaxArgs) {
  // Empty kwargs fields build nothing, but each costs a cursor: bounded.
  Limits limits;
  limits.max_args = 4;
  std::string empty_field = LengthField(7, "");
  std::string wire = Encode({});
  for (int i = 0; i < 5; ++i) wire += empty_field;
  Value::Map kwargs;
  EXPECT_THAT(ReadWithKwargs(wire, &kwargs, limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("(--max_args=4)")));
}

TEST(WireReaderTest, KeywordsMustBeNames) {
  for (const std::string& bad :
       {std::string(""), std::string("1a"), std::string("a-b"),
        std::string("a b"), std::string("é"), std::string(129, 'k')}) {
    Value::Map kwargs;
    EXPECT_THAT(ReadWithKwargs(EncodeWithKwargs({}, {{bad, 1}}), &kwargs),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("is not a keyword")))
        << bad;
  }
  Value::Map kwargs;
  EXPECT_OK(ReadWithKwargs(
                EncodeWithKwargs({}, {{"_a1", 1}, {std::string(128, 'k'), 2}}),
                &kwargs)
                .status());
  EXPECT_EQ(kwargs.size(), 2u);
}

TEST(WireReaderTest, KwargsMustBeAMap) {
  // A list where the map belongs: the kwargs field (7) holding the Value
  // {list (7): {items (1): {int_value (2): 1}}}.
  const std::string int_one("\x10\x01", 2);
  const std::string list_value = LengthField(7, LengthField(1, int_one));
  Value::Map kwargs;
  EXPECT_THAT(ReadWithKwargs(Encode({}) + LengthField(7, list_value), &kwargs),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("kwargs: expected a map of keyword "
                                 "arguments, got list")));
}

TEST(WireReaderTest, TooManyValuesFail) {
  Limits limits;
  limits.max_items = 10;
  Value::List many(20, Value());
  // Refused before the list is built.
  EXPECT_THAT(
      Read(Encode({Value(many)}), limits),
      StatusIs(absl::StatusCode::kResourceExhausted,
               AllOf(HasSubstr("args[0]: more than 10 values in one message"),
                     HasSubstr("(--max_items=10)"))));
  // Nested values count too.
  Value::List nested(5, Value(Value::List{1}));
  EXPECT_THAT(Read(Encode({Value(nested)}), limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("args[0][4]: more than 10 values")));
  // Counted across arguments.
  EXPECT_THAT(
      Read(Encode({Value(Value::List(6)), Value(Value::List(6))}), limits),
      StatusIs(absl::StatusCode::kResourceExhausted,
               HasSubstr("--max_items=10")));
}

TEST(WireReaderTest, LongStringsFail) {
  Limits limits;
  limits.max_string_bytes = 8;
  EXPECT_THAT(Read(Encode({Value(Value::Map{{"k", "123456789"}})}), limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       AllOf(HasSubstr("args[0].k: a string of 9 B"),
                             HasSubstr("--max_string_mb=0"))));
  EXPECT_THAT(Read(Encode({Value(Bytes{"123456789"})}), limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("max_string_mb")));
  EXPECT_THAT(Read(Encode({Value(Value::Map{{"123456789", 1}})}), limits),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       HasSubstr("args[0]: a string of 9 B")));
  EXPECT_OK(Read(Encode({Value("12345678")}), limits));
}

TEST(WireReaderTest, DeepValuesFail) {
  Value deep(1);
  for (int i = 0; i < kMaxValueDepth; ++i) deep = Value(Value::List{deep});
  EXPECT_OK(Read(Encode({deep})));
  // One level more, written by hand (the writer refuses it).
  std::string value = Varint(2 << 3) + Varint(1);  // int 1
  for (int i = 0; i < kMaxValueDepth + 1; ++i) {
    value = LengthField(7, LengthField(1, value));  // [value]
  }
  std::string wire = LengthField(1, "f") + LengthField(2, value);
  EXPECT_THAT(Read(wire), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("nesting deeper than 64")));
}

// A CallRequest whose one argument is this tensor message.
std::string TensorArg(const proto::Tensor& t) {
  proto::CallRequest r;
  r.set_function("f");
  *r.add_args()->mutable_tensor() = t;
  return r.SerializeAsString();
}

TEST(WireReaderTest, TensorShapesAreBoundedEvenWhenEmpty) {
  proto::Tensor t;
  t.set_dtype(proto::FLOAT32);
  t.add_shape(int64_t{1} << 62);
  t.add_shape(0);
  EXPECT_THAT(Read(TensorArg(t)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("args[0].shape[0]: dimension"),
                             HasSubstr("--max_tensor_dim="))));
  t.clear_shape();
  for (int i = 0; i < 40; ++i) t.add_shape(0);
  EXPECT_THAT(Read(TensorArg(t)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("args[0].shape: rank 33"),
                             HasSubstr("--max_tensor_rank=32"))));
  t.clear_shape();
  t.add_shape(1 << 20);
  t.add_shape(1 << 20);
  t.add_shape(0);
  t.add_shape(1 << 20);
  EXPECT_THAT(Read(TensorArg(t)), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("spans more than")));
  t.clear_shape();
  t.add_shape(-2);
  EXPECT_THAT(Read(TensorArg(t)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0].shape[0]: negative dimension -2")));
}

TEST(WireReaderTest, TensorFieldsAreChecked) {
  proto::Tensor t;
  t.set_dtype(static_cast<proto::DType>(99));
  EXPECT_THAT(Read(TensorArg(t)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0].dtype: unknown dtype 99")));
  t.set_dtype(proto::FLOAT32);
  t.add_shape(2);
  t.set_data("abc");
  EXPECT_THAT(Read(TensorArg(t)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0]: data: 3 bytes, but float32 shape "
                                 "[2] needs 2 x 4 = 8")));
  t.set_dtype(proto::BOOL);
  t.clear_shape();
  t.add_shape(3);
  t.set_data(std::string("\x01\x02\x00", 3));
  EXPECT_THAT(Read(TensorArg(t)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0]: data: bool element 1")));
}

TEST(WireReaderTest, MalformedBytesAreInvalidArgument) {
  std::string wire = Encode({Value(Value::List{1, 2, "three"})});
  // Every truncation is either a shorter valid message or an error, never
  // a crash; most are errors.
  int errors = 0;
  for (size_t n = 0; n < wire.size(); ++n) {
    absl::StatusOr<std::vector<Value>> r = Read(wire.substr(0, n));
    if (!r.ok()) {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                              HasSubstr("malformed")));
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_THAT(Read(std::string("\x12\xff\xff\xff\xff\x0f", 6)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("length past the end")));
  EXPECT_THAT(
      Read(std::string("\x0b", 1)),  // Wire type 3 (a group).
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("malformed")));
}

TEST(WireReaderTest, StringsMustBeUtf8) {
  proto::CallRequest r;
  r.set_function("f");
  std::string wire = r.SerializeAsString() + "\x12\x03\x22\x01\xff";
  EXPECT_THAT(Read(wire), StatusIs(absl::StatusCode::kInvalidArgument,
                                   HasSubstr("args[0]: string is not valid "
                                             "UTF-8")));
}

// Issue 49: a 512 KiB caller_name was kept with every span and echoed
// back by ferry.trace. It is skipped, whatever it holds: who calls is the
// credential's node.
TEST(WireReaderTest, TheClaimedCallerNameIsSkipped) {
  proto::CallRequest r = Header();
  r.set_caller_name(std::string(512 << 10, 'w'));
  const std::string wire =
      r.SerializeAsString() + LengthField(4, std::string("\xff\xfe", 2));
  ASSERT_OK_AND_ASSIGN(CallRequestReader reader,
                       CallRequestReader::Open(Buffer(wire), Limits()));
  EXPECT_EQ(reader.header().function, "f");
  EXPECT_EQ(reader.header().caller_node, 7u);
}

// Counts RRefs decoded, refusing those it is told to.
class CountingCodec : public RRefCodec {
 public:
  absl::StatusOr<proto::RRefHandle> Encode(const Value::RRefPtr& r) override {
    return DescriptorToProto(r->descriptor());
  }
  absl::StatusOr<Value::RRefPtr> Decode(const proto::RRefHandle& h) override {
    ++decoded;
    if (h.owner_rank() < 0) {
      return absl::InvalidArgumentError("owner rank out of range");
    }
    return Value::RRefPtr(
        std::make_shared<const RRefBase>(DescriptorFromProto(h)));
  }
  int decoded = 0;
};

TEST(WireReaderTest, RRefsGoThroughTheCodec) {
  Value ok(std::make_shared<const RRefBase>(
      RRefDescriptor{{1, 2}, {3, 4}, "worker1", 1}));
  Value bad(std::make_shared<const RRefBase>(
      RRefDescriptor{{1, 2}, {3, 5}, "worker1", -7}));
  CountingCodec codec;
  ASSERT_OK_AND_ASSIGN(
      CallRequestReader reader,
      CallRequestReader::Open(Buffer(Encode({Value(Value::List{ok, bad})})),
                              Limits()));
  EXPECT_THAT(reader.Args(&codec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0][1]: owner rank out of range")));
  EXPECT_EQ(codec.decoded, 2);
}

TEST(WireReaderTest, ReadsCreateRRef) {
  proto::CallRequest r = Header();
  r.mutable_create_rref()->set_owner("worker2");
  r.mutable_create_rref()->set_owner_rank(2);
  ASSERT_OK_AND_ASSIGN(
      CallRequestReader reader,
      CallRequestReader::Open(Buffer(r.SerializeAsString()), Limits()));
  ASSERT_TRUE(reader.header().create_rref.has_value());
  EXPECT_EQ(reader.header().create_rref->owner_rank(), 2);
}

}  // namespace
}  // namespace ferry
