// The envelope of collective messages: what a rank sends arrives as it was
// sent, and whatever else a peer sends is refused by its shape, never read.
#include "collectives/op/message.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/collectives.pb.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;

TEST(MessageTest, RoundTripsHeaderTensorsAndValue) {
  proto::AllReduceHeader header;
  header.set_op("max");
  header.set_direct(true);
  Message sent = Message::Of(header, {Tensor::FromVector<int64_t>({1, 2}),
                                      Tensor::FromVector<float>({3})});
  sent.value = Value(Value::Map{{"k", Value("v")}});
  ASSERT_OK_AND_ASSIGN(Message got, FromEnvelope(ToEnvelope(sent)));
  proto::AllReduceHeader read;
  ASSERT_TRUE(ReadHeader(got, &read));
  EXPECT_EQ(read.op(), "max");
  EXPECT_TRUE(read.direct());
  ASSERT_EQ(got.tensors.size(), 2u);
  EXPECT_EQ(got.tensors[0], Tensor::FromVector<int64_t>({1, 2}));
  EXPECT_EQ(got.tensors[1], Tensor::FromVector<float>({3}));
  EXPECT_EQ(got.value, sent.value);
}

TEST(MessageTest, AnEmptyMessageHasNoHeaderNorData) {
  ASSERT_OK_AND_ASSIGN(Message got, FromEnvelope(ToEnvelope(Message())));
  EXPECT_TRUE(got.header.empty());
  EXPECT_TRUE(got.tensors.empty());
  EXPECT_TRUE(got.value.is_null());
}

TEST(MessageTest, AnythingElseIsRefusedByItsShape) {
  const Value bytes(Bytes{"h"});
  const std::vector<Value> forged = {
      Value(),
      Value("a string"),
      Value(Value::Map{{"meta", Value()}}),
      Value(Value::List{}),
      Value(Value::List{bytes, Value(Value::List{})}),
      Value(Value::List{bytes, Value(Value::List{}), Value(), Value()}),
      Value(Value::List{Value("h"), Value(Value::List{}), Value()}),
      Value(Value::List{bytes, Value(), Value()}),
  };
  for (const Value& v : forged) {
    EXPECT_THAT(FromEnvelope(v),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         HasSubstr("not a collective message")))
        << v.kind_name();
  }
  EXPECT_THAT(
      FromEnvelope(Value(Value::List{
          bytes, Value(Value::List{Value(Tensor::FromVector<float>({1})), 7}),
          Value()})),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("int among its tensors")));
}

TEST(MessageTest, AHeaderOfAnotherKindDoesNotParse) {
  Message m;
  m.header = std::string("\xff\xff\xff", 3);
  proto::AllReduceHeader h;
  EXPECT_FALSE(ReadHeader(m, &h));
}

}  // namespace
}  // namespace ferry
