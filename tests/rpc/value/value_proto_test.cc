#include "rpc/value/value_proto.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "rpc/base/limits.h"
#include "rpc/value/rref_base.h"
#include "rpc/value/value.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/tensor_samples.h"

namespace ferry {
namespace {

using ::ferry::testing::SampleTensor;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

Value RoundTrip(const Value& v) {
  proto::Value p;
  absl::Status s = ValueToProto(v, &p);
  EXPECT_TRUE(s.ok()) << s;
  // Through bytes, as on the wire.
  proto::Value parsed;
  EXPECT_TRUE(parsed.ParseFromString(p.SerializeAsString()));
  absl::StatusOr<Value> back = ValueFromProto(&parsed, "value");
  EXPECT_TRUE(back.ok()) << back.status();
  return back.ok() ? *back : Value();
}

class EveryDTypeTest : public ::testing::TestWithParam<DType> {};

TEST_P(EveryDTypeTest, TensorsRoundTrip) {
  for (const Shape& shape :
       {Shape{5}, Shape{2, 3}, Shape{}, Shape{0}, Shape{3, 0, 2}}) {
    Tensor t = SampleTensor(GetParam(), shape, 7);
    EXPECT_EQ(RoundTrip(Value(t)), Value(t)) << ShapeString(shape);
  }
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, EveryDTypeTest,
                         ::testing::ValuesIn(kAllDTypes),
                         [](const ::testing::TestParamInfo<DType>& info) {
                           return std::string(DTypeName(info.param));
                         });

TEST(ValueProtoTest, ScalarsRoundTrip) {
  for (const Value& v :
       {Value(), Value(true), Value(false), Value(int64_t{-7}), Value(2.5),
        Value("héllo"), Value(Bytes{std::string("\x00\xff", 2)})}) {
    EXPECT_EQ(RoundTrip(v), v);
  }
}

TEST(ValueProtoTest, NestedMapsAndListsRoundTrip) {
  Value v(Value::Map{
      {"a", Value::List{1, 2.5, "x", Value()}},
      {"b", Value::Map{{"t", SampleTensor(DType::kComplex64, {2, 2})},
                       {"empty", Value::List{}}}},
  });
  EXPECT_EQ(RoundTrip(v), v);
}

TEST(ValueProtoTest, RRefDescriptorRoundTripsWithoutCodec) {
  RRefDescriptor d{{1, 2}, {3, 4}, "worker1", 1};
  Value v(std::make_shared<const RRefBase>(d));
  Value back = RoundTrip(v);
  ASSERT_TRUE(back.is_rref());
  EXPECT_EQ(back.as_rref()->descriptor(), d);
}

TEST(ValueProtoTest, DecodingMovesTensorBytes) {
  proto::Value p;
  ASSERT_OK(ValueToProto(Value(SampleTensor(DType::kFloat64, {1024})), &p));
  const char* wire_bytes = p.tensor().data().data();
  ASSERT_OK_AND_ASSIGN(Value v, ValueFromProto(&p, "value"));
  EXPECT_EQ(v.as_tensor().data(), wire_bytes);
}

TEST(ValueProtoTest, WrongByteLengthNamesPath) {
  proto::Value p;
  proto::Tensor* t = p.mutable_list()
                         ->add_items()
                         ->mutable_list()
                         ->add_items()
                         ->mutable_tensor();
  t->set_dtype(proto::FLOAT32);
  t->add_shape(3);
  t->set_data(std::string(11, 'x'));
  EXPECT_THAT(ValueFromProto(&p, "args[1]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[1][0][0]: data: 11 bytes")));
}

TEST(ValueProtoTest, UnknownDTypeNamed) {
  proto::Value p;
  p.mutable_tensor()->set_dtype(static_cast<proto::DType>(42));
  EXPECT_THAT(ValueFromProto(&p, "args[0]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0].dtype: unknown dtype 42")));
  p.mutable_tensor()->set_dtype(proto::DTYPE_UNSPECIFIED);
  EXPECT_THAT(ValueFromProto(&p, "args[0]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("unknown dtype 0")));
}

TEST(ValueProtoTest, NegativeDimAndOverflowNamed) {
  proto::Value p;
  (*p.mutable_map()->mutable_entries())["x"].mutable_tensor()->set_dtype(
      proto::INT8);
  auto* t = (*p.mutable_map()->mutable_entries())["x"].mutable_tensor();
  t->add_shape(4);
  t->add_shape(-2);
  EXPECT_THAT(ValueFromProto(&p, "args[0]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0].x.shape[1]: negative dimension -2")));
  // Past the limits' reach, int64 overflow itself is caught: 2^61 int64
  // elements (with a zero dim) are 2^64 bytes.
  Limits unbounded;
  unbounded.max_tensor_dim = std::numeric_limits<int64_t>::max();
  t->set_dtype(proto::INT64);
  t->set_shape(0, int64_t{1} << 61);
  t->set_shape(1, 0);
  EXPECT_THAT(ValueFromProto(&p, "args[0]", nullptr, unbounded),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("overflows int64")));
}

TEST(ValueProtoTest, BoolBytesValidated) {
  proto::Value p;
  p.mutable_tensor()->set_dtype(proto::BOOL);
  p.mutable_tensor()->add_shape(1);
  p.mutable_tensor()->set_data("\x02");
  EXPECT_THAT(ValueFromProto(&p, "result"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("result: data: bool element 0")));
}

Value Nested(int depth) {
  Value v(1);
  for (int i = 0; i < depth; ++i) v = Value(Value::List{v});
  return v;
}

TEST(ValueProtoTest, NestingLimitBothWays) {
  proto::Value p;
  EXPECT_OK(ValueToProto(Nested(kMaxValueDepth), &p));
  EXPECT_OK(ValueFromProto(&p, "value"));
  EXPECT_THAT(ValueToProto(Nested(kMaxValueDepth + 1), &p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64")));
  // A peer can send deeper nesting than we produce; decoding refuses it.
  proto::Value deep;
  proto::Value* cur = &deep;
  for (int i = 0; i < kMaxValueDepth + 1; ++i) {
    cur = cur->mutable_list()->add_items();
  }
  EXPECT_THAT(ValueFromProto(&deep, "args[0]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("nesting deeper than 64")));
}

TEST(ValueProtoTest, InvalidUtf8StringRefused) {
  proto::Value p;
  EXPECT_THAT(ValueToProto(Value(std::string("\xff\xfe")), &p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not valid UTF-8")));
}

TEST(ValueTest, EqualitySemantics) {
  EXPECT_EQ(Value(), Value(nullptr));
  EXPECT_NE(Value(1), Value(1.0));  // int and double are different kinds.
  EXPECT_NE(Value("a"), Value(Bytes{"a"}));
  EXPECT_EQ(Value(Value::List{1, "a"}), Value(Value::List{1, "a"}));
  EXPECT_NE(Value(Value::List{1}), Value(Value::List{1, 1}));
  EXPECT_EQ(Value(Value::Map{{"k", 1}}), Value(Value::Map{{"k", 1}}));
  EXPECT_NE(Value(Value::Map{{"k", 1}}), Value(Value::Map{{"j", 1}}));
  Tensor t = Tensor::FromVector<float>({1, 2});
  EXPECT_EQ(Value(t), Value(Tensor::FromVector<float>({1, 2})));
  EXPECT_NE(Value(t), Value(Tensor::FromVector<double>({1, 2})));
}

TEST(ValueTest, DepthAndKindNames) {
  EXPECT_EQ(ValueDepth(Value(1)), 0);
  EXPECT_EQ(ValueDepth(Nested(3)), 3);
  EXPECT_EQ(Value(Value::Map{}).kind_name(), "map");
  EXPECT_EQ(Value(Tensor()).kind_name(), "tensor");
}

TEST(GlobalIdTest, TextRoundTrip) {
  for (GlobalId id :
       {GlobalId{0, 1}, GlobalId{7, 123}, GlobalId{kFirstClientNode + 3, 9}}) {
    ASSERT_OK_AND_ASSIGN(GlobalId back, ParseGlobalId(GlobalIdString(id)));
    EXPECT_EQ(back, id);
  }
  EXPECT_EQ(GlobalIdString({kFirstClientNode + 3, 9}), "c3.9");
  EXPECT_THAT(ParseGlobalId("x1.2"),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---- Limits ----

constexpr auto kExhausted = absl::StatusCode::kResourceExhausted;

TEST(ValueProtoTest, HugeZeroSizeShapeNamesPathAndFlag) {
  // The concat argument: [[{float32, [2^62, 0]}], 1].
  proto::Value p;
  auto* t = p.mutable_list()
                ->add_items()
                ->mutable_list()
                ->add_items()
                ->mutable_tensor();
  t->set_dtype(proto::FLOAT32);
  t->add_shape(int64_t{1} << 62);
  t->add_shape(0);
  p.mutable_list()->add_items()->set_int_value(1);
  EXPECT_THAT(
      ValueFromProto(&p, "args[1]"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("args[1][0][0].shape[0]: dimension "
                         "4611686018427387904 is over the limit of "
                         "1099511627776 (--max_tensor_dim=1099511627776)")));
}

TEST(ValueProtoTest, RankIsBounded) {
  proto::Value p;
  auto* t = p.mutable_tensor();
  t->set_dtype(proto::INT8);
  for (int i = 0; i < 33; ++i) t->add_shape(1);
  t->set_data("x");
  EXPECT_THAT(ValueFromProto(&p, "args[0]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0].shape: rank 33 is over the limit "
                                 "of 32 (--max_tensor_rank=32)")));
}

TEST(ValueProtoTest, ItemsAreCountedAcrossTheMessage) {
  Limits limits;
  limits.max_items = 10;
  proto::Value list;
  for (int i = 0; i < 4; ++i)
    list.mutable_list()->add_items()->set_int_value(i);
  // One list of 4 items is 5 values; a decoder counts every argument.
  ValueDecoder decoder(limits);
  proto::Value a = list, b = list, c = list;
  EXPECT_OK(decoder.Decode(&a, "args[0]"));
  EXPECT_OK(decoder.Decode(&b, "args[1]"));
  EXPECT_EQ(decoder.items(), 10);
  EXPECT_THAT(decoder.Decode(&c, "args[2]"),
              StatusIs(kExhausted,
                       AllOf(HasSubstr("args[2]: more than 10 values in one "
                                       "message"),
                             HasSubstr("(--max_items=10)"))));
  // A long list is refused before anything is reserved for it.
  proto::Value wide;
  for (int i = 0; i < 100; ++i) wide.mutable_list()->add_items();
  EXPECT_THAT(ValueFromProto(&wide, "args[0]", nullptr, limits),
              StatusIs(kExhausted, HasSubstr("--max_items=10")));
}

TEST(ValueProtoTest, StringsBytesAndKeysAreBounded) {
  Limits limits;
  limits.max_string_bytes = 4;
  proto::Value s;
  s.set_string_value("12345");
  EXPECT_THAT(ValueFromProto(&s, "args[0]", nullptr, limits),
              StatusIs(kExhausted, AllOf(HasSubstr("args[0]: a string of 5 B"),
                                         HasSubstr("(--max_string_mb=0)"))));
  proto::Value b;
  b.set_bytes_value("12345");
  EXPECT_THAT(ValueFromProto(&b, "args[0]", nullptr, limits),
              StatusIs(kExhausted, HasSubstr("--max_string_mb")));
  proto::Value m;
  (*m.mutable_map()->mutable_entries())["long key"].set_int_value(1);
  EXPECT_THAT(ValueFromProto(&m, "args[0]", nullptr, limits),
              StatusIs(kExhausted, HasSubstr("args[0] key: a string of 8 B")));
}

}  // namespace
}  // namespace ferry
