// A worker other than the master answers RegisterClient from its
// directory: read-only, with client ids of its own range.
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
#include "rpc/authenticator.h"
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

  grpc::Status Register(proto::RegisterClientResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    return stub_->RegisterClient(&context, {}, response);
  }

  DirectoryService service_{2};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::Rendezvous::Stub> stub_;
};

TEST_F(DirectoryServiceTest, UnavailableUntilJoined) {
  proto::RegisterClientResponse response;
  grpc::Status s = Register(&response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("worker2"));
}

TEST_F(DirectoryServiceTest, AnswersReadOnlyFromItsDirectory) {
  service_.SetDirectory(Directory({{.name = "worker0", .rank = 0},
                                   {.name = "worker1", .rank = 1},
                                   {.name = "worker2", .rank = 2}}),
                        "client-key");
  proto::RegisterClientResponse first, second;
  ASSERT_TRUE(Register(&first).ok());
  ASSERT_TRUE(Register(&second).ok());
  EXPECT_TRUE(first.read_only());
  ASSERT_EQ(first.workers_size(), 3);
  EXPECT_EQ(first.workers(1).name(), "worker1");
  // Past every id the master hands out (kFirstClientNode + n, n < 2^32),
  // and distinct.
  EXPECT_GE(first.node(), uint64_t{3} << 32);
  EXPECT_FALSE(IsWorkerNode(first.node()));
  EXPECT_NE(first.node(), second.node());
  // Each names its own node under the job's client key.
  EXPECT_EQ(first.credential(), ClientCredential("client-key", first.node()));
  EXPECT_EQ(second.credential(), ClientCredential("client-key", second.node()));
}

TEST_F(DirectoryServiceTest, JoinStaysTheMasters) {
  grpc::ClientContext context;
  proto::JoinResponse response;
  EXPECT_EQ(stub_->Join(&context, {}, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace ferry
