// The public API (ferry.h) used as a program outside the project would:
// two ferry::Workers and a ferry::Client in this process.
#include <memory>
#include <thread>
#include <vector>

#include "ferry/ferry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Tensor Floats(std::vector<float> v) { return Tensor::FromVector<float>(v); }

class FacadeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int rank = 0; rank < 2; ++rank) {
      WorkerOptions o;
      o.rank = rank;
      o.world_size = 2;
      o.listen = "127.0.0.1:0";
      o.master = master_;
      workers_.push_back(std::make_unique<Worker>(std::move(o)));
      ASSERT_OK(workers_.back()->Register(
          "scale", [](const Tensor& t, double k) { return Scale(t, k); },
          {.params = {"t", "k"}, .doc = "t * k"}));
      if (rank == 0) {
        ASSERT_OK_AND_ASSIGN(master_, workers_[0]->Listen());
      }
    }
    std::vector<absl::Status> started(2);
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] { started[r] = workers_[r]->Start(); });
    }
    for (auto& t : threads) t.join();
    ASSERT_OK(started[0]);
    ASSERT_OK(started[1]);
  }

  void TearDown() override {
    std::vector<std::thread> threads;
    for (auto& w : workers_)
      threads.emplace_back([&w] { (void)w->Shutdown(); });
    for (auto& t : threads) t.join();
  }

  static absl::StatusOr<Tensor> Scale(const Tensor& t, double k) {
    std::vector<float> v = t.ToVector<float>();
    for (float& x : v) x = static_cast<float>(x * k);
    return Floats(v);
  }

  std::string master_;
  std::vector<std::unique_ptr<Worker>> workers_;
};

TEST_F(FacadeTest, WorkersCallEachOtherAndKnowTheJob) {
  Worker& w0 = *workers_[0];
  EXPECT_EQ(w0.name(), "worker0");
  EXPECT_EQ(w0.world_size(), 2);
  EXPECT_EQ(w0.master_address(), master_);
  EXPECT_THAT(w0.workers(), ElementsAre("worker0", "worker1"));
  ASSERT_OK_AND_ASSIGN(Value v,
                       w0.RpcSync("worker1", "scale", {Floats({1, 2}), 3}));
  EXPECT_EQ(v.as_tensor(), Floats({3, 6}));
  EXPECT_THAT(w0.RpcSync("worker1", "nosuch", {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker1")));
  EXPECT_THAT(w0.RpcSync("worker7", "scale", {}),
              StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(FacadeTest, RRefsAndCollectives) {
  ASSERT_OK_AND_ASSIGN(RRef r,
                       workers_[0]->Remote("worker1", "arange", {Value(4)}));
  ASSERT_OK_AND_ASSIGN(Value fetched, r.ToHere());
  EXPECT_EQ(fetched.as_tensor().ToVector<int64_t>(),
            (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(r.owner_name(), "worker1");

  std::vector<absl::StatusOr<Tensor>> sums(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      sums[rank] = AllReduce(workers_[rank]->world(), Floats({1.0f + rank, 10}),
                             ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_OK(sums[rank].status());
    EXPECT_EQ(*sums[rank], Floats({3, 20}));
  }
  EXPECT_THAT(workers_[0]->NewGroup({0, 5}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// Groups named from an instance number every member was given (torch's
// reconfigure uuid): the same group on both whatever groups each made
// before, another group for another number.
TEST_F(FacadeTest, InstanceGroupsAreNamedFromTheirInstance) {
  // Worker 0 made a group of these ranks before; worker 1 did not.
  ASSERT_OK(workers_[0]->NewGroup({0, 1}).status());
  std::vector<std::shared_ptr<ProcessGroup>> groups(2);
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_OK_AND_ASSIGN(groups[rank],
                         workers_[rank]->InstanceGroup({0, 1}, 7));
  }
  EXPECT_EQ(groups[0]->name(), groups[1]->name());
  ASSERT_OK_AND_ASSIGN(std::shared_ptr<ProcessGroup> other,
                       workers_[0]->InstanceGroup({0, 1}, 8));
  EXPECT_NE(other->name(), groups[0]->name());
  std::vector<absl::StatusOr<Tensor>> sums(2);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      sums[rank] =
          AllReduce(*groups[rank], Floats({1.0f + rank}), ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    ASSERT_OK(sums[rank].status());
    EXPECT_EQ(*sums[rank], Floats({3}));
  }
  EXPECT_THAT(
      workers_[0]->InstanceGroup({0, 1}, uint64_t{1} << 62),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  EXPECT_THAT(workers_[0]->InstanceGroup({1}, 7),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(FacadeTest, ClientCallsInspectsAndDrivesCollectives) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<Client> client,
                       Client::Connect({.master = master_}));
  EXPECT_THAT(client->name(), HasSubstr("client"));
  ASSERT_OK_AND_ASSIGN(Value v,
                       client->RpcSync("worker0", "scale", {Floats({2}), 2}));
  EXPECT_EQ(v.as_tensor(), Floats({4}));

  ASSERT_OK_AND_ASSIGN(WorkerStatus status, client->GetStatus("worker1"));
  EXPECT_EQ(status.name, "worker1");
  EXPECT_EQ(status.state, "running");
  EXPECT_EQ(status.limits.at("max_tensor_rank"), Limits{}.max_tensor_rank);

  ASSERT_OK_AND_ASSIGN(std::vector<FunctionInfo> functions,
                       client->ListFunctions("worker1"));
  bool found = false;
  for (const FunctionInfo& f : functions) found |= f.name == "scale";
  EXPECT_TRUE(found);

  ASSERT_OK_AND_ASSIGN(
      Value request, ParseJson(R"({"ranks": [{"dtype": "float32", "data": [1]},
                                              {"dtype": "float32", "data": [2]}],
                                    "op": "sum"})"));
  ASSERT_OK_AND_ASSIGN(Value out, client->RunCollective("all_reduce", request));
  EXPECT_EQ(ToJson(out), R"({"ranks":[{"dtype":"float32","data":[3]},)"
                         R"({"dtype":"float32","data":[3]}]})");
  client->Close();
}

TEST(FacadeStartTest, UnreadableSecurityFilesFailStart) {
  WorkerOptions o;
  o.listen = "127.0.0.1:0";
  o.security.token_file = "/nonexistent/token";
  Worker w(o);
  EXPECT_THAT(w.Start(), StatusIs(absl::StatusCode::kInvalidArgument,
                                  HasSubstr("/nonexistent/token")));
  EXPECT_THAT(Client::Connect({.master = "127.0.0.1:1",
                               .security = {.token_file = "/nonexistent/t"}}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace ferry
