// A hostile member inside an op: messages forged with raw frames must fail
// the op, never the worker. The job here has no token, so frames sent
// without a credential are taken at their word (in a job with one, a frame
// under another's rank is refused: tests/rpc/forged_identity_test.cc).
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "collectives/collectives.h"
#include "collectives/transport/op_key.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/collectives.pb.h"
#include "tests/collectives/spmd.h"
#include "tests/testing/raw_exchange.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::DataHeader;
using ::ferry::testing::FrameBytes;
using ::ferry::testing::SendFrames;
using ::ferry::testing::Spmd;
using ::ferry::testing::StatusIs;
using ::ferry::testing::ValueBytes;
using ::testing::HasSubstr;

class ForgedPeerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LocalJob::Options options;
    options.configure = [this](WorkerConfig& o) { Configure(o); };
    ASSERT_OK_AND_ASSIGN(job_, LocalJob::Start(3, options));
    channel_ = grpc::CreateChannel(job_->worker(2).rpc().address(),
                                   grpc::InsecureChannelCredentials());
  }

  // Sends `message` to worker 2 as what rank `src` (0 or 1) sends it in op
  // `op`'s first exchange, the gather of every rank's header
  // (collectives/algorithms/gather_all.h): on three ranks worker 2 hears rank 0
  // in round 0 and rank 1 in round 1.
  void Forge(const std::string& op, int src, const Value& message) {
    Forge(op, src, FirstGatherStep(3) + (src == 0 ? 0 : 1), message);
  }
  void Forge(const std::string& op, int src, int step, const Value& message) {
    const std::string payload = ValueBytes(message);
    grpc::Status s = SendFrames(
        channel_, {FrameBytes(DataHeader(op, step, src,
                                         static_cast<int64_t>(payload.size())),
                              payload)});
    ASSERT_TRUE(s.ok()) << s.error_message();
  }

  // Rank `src`'s message with typed header `header` as that gather packs
  // it (a round's message holds one rank's here).
  static Value Packed(int src, const std::string& header) {
    proto::GatheredHeader packed;
    packed.set_first(src);
    packed.add_headers(header);
    packed.add_tensor_counts(0);
    return Value(Value::List{Value(Bytes{packed.SerializeAsString()}),
                             Value(Value::List{}), Value()});
  }

  virtual void Configure(WorkerConfig&) {}

  // An honest op on every rank still works.
  void ExpectJobWorks() {
    auto out = Spmd<Tensor>(*job_, [](WorkerImpl& w, int) {
      return AllReduce(w.collectives().world(), Tensor::FromVector<float>({1}));
    });
    for (auto& r : out) {
      ASSERT_OK(r);
      EXPECT_EQ(r->ToVector<float>(), std::vector<float>{3});
    }
  }

  std::unique_ptr<LocalJob> job_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Before, ranks 0 and 1 both forged as sending the structure null made
// rank 2's all_gather call as_map() on null: bad_variant_access thrown on
// a collectives thread, std::terminate, the worker gone.
TEST_F(ForgedPeerTest, ANullStructureFailsTheOpNotTheWorker) {
  const Value forged(Value::Map{
      {"meta", Value(Value::Map{{"axis", int64_t{0}}, {"structure", Value()}})},
      {"inline", true},
      {"value", Value()}});
  Forge("world/t:forged", 0, forged);
  Forge("world/t:forged", 1, forged);
  absl::StatusOr<Value> out =
      AllGather(job_->worker(2).collectives().world(),
                Value(Tensor::FromVector<float>({1, 2})), 0,
                {.timeout = absl::Seconds(10), .tag = "forged"});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("malformed message from rank 0")));
  ExpectJobWorks();
}

// Kinds a skeleton never has, on either side of the comparison.
TEST_F(ForgedPeerTest, AScalarStructureFailsTheOp) {
  const Value forged(Value::Map{
      {"meta",
       Value(Value::Map{{"axis", int64_t{0}}, {"structure", int64_t{5}}})},
      {"inline", true},
      {"value", Value()}});
  Forge("world/t:scalar", 0, forged);
  Forge("world/t:scalar", 1, forged);
  absl::StatusOr<Value> out =
      AllGather(job_->worker(2).collectives().world(),
                Value(Tensor::FromVector<float>({1, 2})), 0,
                {.timeout = absl::Seconds(10), .tag = "scalar"});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("malformed message")));
  ExpectJobWorks();
}

// Typed headers are checked before they are read: a dtype no tensor has, or
// more dims than --max_tensor_rank, fails the op naming the sender (and
// printing such a header stays bounded).
TEST_F(ForgedPeerTest, AnImpossibleHeaderFailsTheOp) {
  proto::AllReduceHeader bad_dtype;
  bad_dtype.mutable_input()->set_dtype(static_cast<proto::DType>(99));
  bad_dtype.set_op("sum");
  bad_dtype.set_direct(true);
  proto::AllReduceHeader deep = bad_dtype;
  deep.mutable_input()->set_dtype(proto::FLOAT32);
  for (int i = 0; i < 100000; ++i) deep.mutable_input()->add_shape(1);
  for (const auto& [tag, header] : {std::pair{std::string("dtype"), bad_dtype},
                                    std::pair{std::string("deep"), deep}}) {
    Forge("world/t:" + tag, 0, Packed(0, header.SerializeAsString()));
    Forge("world/t:" + tag, 1, Packed(1, header.SerializeAsString()));
    absl::StatusOr<Tensor> out = AllReduce(
        job_->worker(2).collectives().world(), Tensor::FromVector<float>({1}),
        ReduceOp::kSum, {.timeout = absl::Seconds(10), .tag = tag});
    EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal,
                              HasSubstr("malformed message from rank 0")))
        << tag;
  }
  ExpectJobWorks();
}

// The gather's packs are checked against its schedule: one holding other
// ranks than the sender's, or more tensors than it says, fails the op
// naming the sender.
TEST_F(ForgedPeerTest, AGatherPackOfOtherRanksFailsTheOp) {
  proto::AllReduceHeader honest;
  honest.mutable_input()->set_dtype(proto::FLOAT32);
  honest.mutable_input()->add_shape(1);
  honest.set_op("sum");
  honest.set_direct(true);
  // Rank 0 claiming to pack rank 1's message.
  Forge("world/t:others", 0, Packed(1, honest.SerializeAsString()));
  absl::StatusOr<Tensor> out = AllReduce(
      job_->worker(2).collectives().world(), Tensor::FromVector<float>({1}),
      ReduceOp::kSum, {.timeout = absl::Seconds(10), .tag = "others"});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("malformed message from rank 0")));
  // A pack whose tensor counts run past its tensors.
  proto::GatheredHeader overrun;
  overrun.set_first(0);
  overrun.add_headers(honest.SerializeAsString());
  overrun.add_tensor_counts(3);
  Forge("world/t:overrun", 0,
        Value(Value::List{Value(Bytes{overrun.SerializeAsString()}),
                          Value(Value::List{}), Value()}));
  out = AllReduce(job_->worker(2).collectives().world(),
                  Tensor::FromVector<float>({1}), ReduceOp::kSum,
                  {.timeout = absl::Seconds(10), .tag = "overrun"});
  EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal,
                            HasSubstr("malformed message from rank 0")));
  ExpectJobWorks();
}

// All-to-alls on Bruck's rounds (gather_world = 2: every all-to-all here
// gathers its headers first): a round's message with other than the
// blocks it moves fails the op naming its sender.
class ForgedBruckTest : public ForgedPeerTest {
 protected:
  void Configure(WorkerConfig& o) override { o.collectives.gather_world = 2; }
};

TEST_F(ForgedBruckTest, ARoundOfOtherBlocksFailsTheOp) {
  proto::AllToAllPack small;
  small.set_blocks(true);
  const std::vector<Tensor> mine(3, Tensor::FromVector<float>({2}));
  // Rank 1's round-0 message (step 1) holds one block on three ranks.
  const Value none(Value::List{Value(Bytes{}), Value(Value::List{}), Value()});
  const Value two(
      Value::List{Value(Bytes{}),
                  Value(Value::List{Value(Tensor::FromVector<float>({1})),
                                    Value(Tensor::FromVector<float>({1}))}),
                  Value()});
  for (const auto& [tag, forged] : std::vector<std::pair<std::string, Value>>{
           {"none", none}, {"two", two}}) {
    Forge("world/t:" + tag, 0, Packed(0, small.SerializeAsString()));
    Forge("world/t:" + tag, 1, Packed(1, small.SerializeAsString()));
    Forge("world/t:" + tag, 1, /*step=*/1, forged);
    absl::StatusOr<std::vector<Tensor>> out =
        AllToAll(job_->worker(2).collectives().world(), mine,
                 {.timeout = absl::Seconds(10), .tag = tag});
    EXPECT_THAT(out, StatusIs(absl::StatusCode::kInternal,
                              HasSubstr("malformed message from rank 1 "
                                        "(worker1): not the blocks of its "
                                        "round")))
        << tag;
  }
  ExpectJobWorks();
}

}  // namespace
}  // namespace ferry
