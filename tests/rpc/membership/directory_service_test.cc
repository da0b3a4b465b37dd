// A worker other than the master answers RegisterClient from its
// directory: read-only, with client ids of its own range, and for each
// worker what it vouches for the client there (issue 25: no shared key).
#include "rpc/membership/directory_service.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/auth/node_key.h"
#include "rpc/membership/directory.h"
#include "rpc/value/value.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

class DirectoryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = proto::Rendezvous::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    server_->Shutdown(std::chrono::system_clock::now());
  }

  grpc::Status Register(proto::RegisterClientResponse* response,
                        const std::string& public_key) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    proto::RegisterClientRequest request;
    request.set_public_key(public_key);
    return stub_->RegisterClient(&context, request, response);
  }

  // Worker2's key, and its peers'.
  std::shared_ptr<const NodeKey> keys_[3] = {
      NodeKey::Generate(), NodeKey::Generate(), NodeKey::Generate()};
  std::shared_ptr<const NodeKey> client_ = NodeKey::Generate();
  DirectoryService service_{2, keys_[2]};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::Rendezvous::Stub> stub_;
};

TEST_F(DirectoryServiceTest, UnavailableUntilJoined) {
  proto::RegisterClientResponse response;
  grpc::Status s = Register(&response, client_->public_key());
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("worker2"));
}

TEST_F(DirectoryServiceTest, AnswersReadOnlyFromItsDirectory) {
  std::vector<WorkerInfo> workers;
  for (int rank = 0; rank < 3; ++rank) {
    workers.push_back({.name = absl::StrCat("worker", rank),
                       .rank = rank,
                       .public_key = keys_[rank]->public_key()});
  }
  service_.SetDirectory(Directory(workers));
  proto::RegisterClientResponse first, second, keyless;
  ASSERT_TRUE(Register(&first, client_->public_key()).ok());
  ASSERT_TRUE(Register(&second, client_->public_key()).ok());
  EXPECT_EQ(Register(&keyless, "").error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(first.read_only());
  ASSERT_EQ(first.workers_size(), 3);
  EXPECT_EQ(first.workers(1).name(), "worker1");
  // Past every id the master hands out (kFirstClientNode + n, n < 2^32),
  // and distinct.
  EXPECT_GE(first.node(), uint64_t{3} << 32);
  EXPECT_FALSE(IsWorkerNode(first.node()));
  EXPECT_NE(first.node(), second.node());
  // For each worker, what worker2 vouches for the client there: made
  // with the pair secret of worker2 and that worker only.
  ASSERT_EQ(first.vouchers_size(), 3);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(
        first.vouchers(rank),
        VoucherTag(*keys_[rank]->Agree(keys_[2]->public_key()),
                   {2, keys_[2]->public_key()},
                   {static_cast<uint64_t>(rank), keys_[rank]->public_key()},
                   {first.node(), client_->public_key()}));
  }
  EXPECT_NE(first.vouchers(0), second.vouchers(0));
}

TEST_F(DirectoryServiceTest, JoinStaysTheMasters) {
  grpc::ClientContext context;
  proto::JoinResponse response;
  EXPECT_EQ(stub_->Join(&context, {}, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace ferry
