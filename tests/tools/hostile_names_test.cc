// Names are data (issue 49, R6) on real ferryd daemons: a worker name
// that is a path is refused — by ferryd itself, and by the master to a
// raw Join —, a client description with a line break is refused at
// RegisterClient, and `ferryctl dump` names its files by rank. On 1dde932
// a worker joined with --name=../../x, and `ferryctl dump --out=D` then
// wrote x.json outside D with what that worker chose.
#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.grpc.pb.h"
#include "rpc/auth/node_key.h"
#include "rpc/value/json.h"
#include "rpc/value/value.h"
#include "tests/testing/daemon_cluster.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/subprocess.h"

namespace ferry {
namespace {

using ::ferry::testing::DaemonCluster;
using ::ferry::testing::ProcessResult;
using ::ferry::testing::Runfile;
using ::testing::HasSubstr;

constexpr char kPathName[] = "../../x";

TEST(HostileNamesTest, FerrydRefusesANameThatIsAPath) {
  absl::StatusOr<ProcessResult> r =
      testing::RunProcess({Runfile("tools/ferryd"), "--rank=0",
                           "--world_size=1", "--master=127.0.0.1:0",
                           "--insecure", absl::StrCat("--name=", kPathName)},
                          {}, absl::Seconds(20));
  ASSERT_OK(r);
  EXPECT_FALSE(r->timed_out) << "ferryd ran with --name=" << kPathName;
  EXPECT_EQ(r->exit_code, 1) << r->Describe();
  EXPECT_THAT(r->err, HasSubstr("--name (or FERRY_NAME): worker name "
                                "\"../../x\""));
}

class HostileNamesJobTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<std::unique_ptr<DaemonCluster>> job = DaemonCluster::Up(2);
    ASSERT_OK(job);
    job_ = job->release();
  }
  static void TearDownTestSuite() {
    delete job_;
    job_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(job_, nullptr); }

  static std::unique_ptr<proto::Rendezvous::Stub> Master() {
    return proto::Rendezvous::NewStub(grpc::CreateChannel(
        job_->master(), grpc::InsecureChannelCredentials()));
  }
  static void Authorize(grpc::ClientContext* context) {
    context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    context->AddMetadata("authorization",
                         absl::StrCat("Bearer ", job_->token()));
  }

  static inline DaemonCluster* job_ = nullptr;
};

// A Join naming itself with a path is refused before anything else is
// looked at (on 1dde932 only an empty name was: this one got as far as
// the rank, held, ALREADY_EXISTS).
TEST_F(HostileNamesJobTest, TheMasterRefusesANameThatIsAPath) {
  proto::JoinRequest r;
  r.mutable_worker()->set_name(kPathName);
  r.mutable_worker()->set_rank(1);
  r.mutable_worker()->set_public_key(NodeKey::Generate()->public_key());
  r.set_world_size(2);
  r.set_incarnation(7);
  r.set_timeout_ms(5000);
  grpc::ClientContext context;
  Authorize(&context);
  proto::JoinResponse response;
  grpc::Status s = Master()->Join(&context, r, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("Join: worker name"));
}

// A description is shown in the master's events and ferryctl's listings:
// no line breaks, no escapes (on 1dde932 taken as sent).
TEST_F(HostileNamesJobTest, TheMasterRefusesADescriptionThatIsNoText) {
  proto::RegisterClientRequest r;
  r.set_description("ferryctl\n[worker0] shutting down");
  r.set_public_key(NodeKey::Generate()->public_key());
  grpc::ClientContext context;
  Authorize(&context);
  proto::RegisterClientResponse response;
  grpc::Status s = Master()->RegisterClient(&context, r, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("client description"));
}

// ferryctl dump writes worker<rank>.json into --out, whatever the names.
TEST_F(HostileNamesJobTest, DumpFilesAreNamedByRank) {
  const std::string out = absl::StrCat(std::getenv("TEST_TMPDIR"), "/dump");
  absl::StatusOr<ProcessResult> r = job_->Ctl({"dump", "--out=" + out});
  ASSERT_OK(r);
  ASSERT_EQ(r->exit_code, 0) << r->Describe();
  absl::StatusOr<Value> printed = ParseJson(r->out);
  ASSERT_OK(printed);
  const Value* files = printed->Find("files");
  ASSERT_NE(files, nullptr) << r->out;
  ASSERT_EQ(files->as_list().size(), 2u) << r->out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path = absl::StrCat(out, "/worker", rank, ".json");
    EXPECT_EQ(files->as_list()[rank].as_string(), path);
    struct stat st;
    EXPECT_EQ(stat(path.c_str(), &st), 0) << path;
  }
}

}  // namespace
}  // namespace ferry
