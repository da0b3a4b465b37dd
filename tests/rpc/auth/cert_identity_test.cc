// Ranks bound to their TLS certificates (ferryd --tls_identity=san):
// under mutual TLS rank N's certificate names worker<N> (subjectAltName DNS
// or URI), and its Join, polls, barriers and calls count only over a
// connection whose certificate names it. The CA and the certificates are
// made at test time with the openssl CLI (tests/testing/test_pki.h).
#include "rpc/auth/cert_identity.h"

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/rendezvous.pb.h"
#include "rpc/auth/security.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/status_matchers.h"
#include "tests/testing/test_pki.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::CertFiles;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::StatusIs;
using ::ferry::testing::TestPki;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr char kJoin[] = "/ferry.proto.Rendezvous/Join";
constexpr char kPoll[] = "/ferry.proto.Rendezvous/Poll";
constexpr char kBarrier[] = "/ferry.proto.Rendezvous/Barrier";
constexpr int kWorld = 3;

TEST(CertNamesTest, AWorkerNameBelongsToItsRankOnly) {
  EXPECT_OK(CheckNameFitsRank("worker2", 2));
  EXPECT_OK(CheckNameFitsRank("alice", 2));     // Any rank's, once.
  EXPECT_OK(CheckNameFitsRank("worker02", 1));  // Not a default name.
  EXPECT_THAT(CheckNameFitsRank("worker2", 1),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("the name worker2 belongs to rank 2, not to "
                                 "rank 1")));
}

TEST(CertNamesTest, TheCertificateMustNameTheRanksWorker) {
  EXPECT_OK(CheckWorkerCert({"localhost", "worker1"}, 1, "Join"));
  EXPECT_THAT(CheckWorkerCert({"worker2", "alice"}, 1, "Join"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("Join: the caller is worker1 but its TLS "
                                 "certificate names only worker2, alice")));
  EXPECT_THAT(CheckWorkerCert({}, 1, "poll"),
              StatusIs(absl::StatusCode::kPermissionDenied,
                       HasSubstr("poll: the caller is worker1 but its TLS "
                                 "certificate names no DNS name or URI")));
}

TEST(CertNamesTest, SanIdentityNeedsMutualTls) {
  ASSERT_OK_AND_ASSIGN(TlsIdentity san, ParseTlsIdentity("san"));
  EXPECT_EQ(san, TlsIdentity::kSan);
  ASSERT_OK_AND_ASSIGN(TlsIdentity none, ParseTlsIdentity("none"));
  EXPECT_EQ(none, TlsIdentity::kNone);
  EXPECT_THAT(
      ParseTlsIdentity("cn"),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected none")));
  EXPECT_THAT(Security::Load({.tls_identity = TlsIdentity::kSan}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--tls_identity=san")));
}

class CertIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!TestPki::Installed()) GTEST_SKIP() << TestPki::SkipReason();
    ASSERT_OK_AND_ASSIGN(pki_, TestPki::Create(absl::StrCat(
                                   std::getenv("TEST_TMPDIR"), "/pki")));
    // worker2's certificate names it by URI, the others by DNS name.
    for (int r = 0; r < kWorld; ++r) {
      const std::string name = absl::StrCat("worker", r);
      const std::string san = r == 2 ? "URI:" : "DNS:";
      ASSERT_OK_AND_ASSIGN(CertFiles files,
                           pki_->Issue(name, {absl::StrCat(san, name)}));
      ASSERT_OK_AND_ASSIGN(workers_[r], Load(files));
    }
    // Signed by the job's CA, naming no worker: a client, or an intruder.
    ASSERT_OK_AND_ASSIGN(CertFiles client,
                         pki_->Issue("ferryctl", {"DNS:ferryctl"}));
    ASSERT_OK_AND_ASSIGN(client_, Load(client));
  }

  absl::StatusOr<std::shared_ptr<const Security>> Load(
      const CertFiles& files) const {
    return Security::Load({.tls_cert_file = files.cert_file,
                           .tls_key_file = files.key_file,
                           .tls_ca_file = pki_->ca_file(),
                           .tls_identity = TlsIdentity::kSan});
  }

  // Rank `rank`'s options, with its own certificate.
  WorkerConfig Config(int rank, const std::string& master) const {
    WorkerConfig o;
    o.rank = rank;
    o.world_size = kWorld;
    o.master = master;
    o.listen = "127.0.0.1:0";
    o.security = workers_[rank];
    return o;
  }

  absl::StatusOr<std::unique_ptr<LocalJob>> StartJob() const {
    return LocalJob::Start(kWorld, {.configure = [this](WorkerConfig& o) {
                             o.security = workers_[o.rank];
                           }});
  }

  // A raw gRPC client at `address` presenting `as`'s certificate.
  static RawClient As(const std::string& address,
                      const std::shared_ptr<const Security>& as) {
    return RawClient(address, "", as->ChannelCredentials());
  }

  static std::string JoinBytes(int rank, const std::string& name) {
    proto::JoinRequest join;
    join.mutable_worker()->set_name(name);
    join.mutable_worker()->set_rank(rank);
    join.mutable_worker()->set_address("127.0.0.1:1");
    join.set_world_size(kWorld);
    join.set_incarnation(99);
    join.set_timeout_ms(1000);
    return join.SerializeAsString();
  }

  std::optional<TestPki> pki_;
  std::shared_ptr<const Security> workers_[kWorld];
  std::shared_ptr<const Security> client_;
};

// Honest traffic of every kind passes: calls, RRefs, collectives, a client.
TEST_F(CertIdentityTest, AJobOfCertifiedWorkersServes) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job, StartJob());
  RpcClientOptions options;
  options.security = client_;
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<ClientImpl> client,
                       job->Connect(options));
  for (int r = 0; r < kWorld; ++r) {
    ASSERT_OK_AND_ASSIGN(
        Value name,
        client->rpc().RpcSync(absl::StrCat("worker", r), "worker_name", {}));
    EXPECT_EQ(name, Value(absl::StrCat("worker", r)));
  }
  ASSERT_OK_AND_ASSIGN(RRef rref, client->rrefs().Remote("worker2", "echo",
                                                         {Value(int64_t{5})}));
  // The client passes its copy to worker1, which fetches it from worker2.
  ASSERT_OK_AND_ASSIGN(
      Value fetched,
      client->rpc().RpcSync("worker1", "to_here", {rref.AsValue()}));
  EXPECT_EQ(fetched, Value(int64_t{5}));
  std::vector<absl::StatusOr<Tensor>> out(kWorld,
                                          absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      out[r] = AllReduce(job->worker(r).collectives().world(),
                         Tensor::FromVector<float>({1}));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (auto& r : out) {
    ASSERT_OK(r);
    EXPECT_EQ(r->ToVector<float>(), std::vector<float>{3});
  }
  client->Close();
}

// Before the job forms, a certificate for one worker (or for none) takes
// no other rank: the real worker1 joins after the attempts.
TEST_F(CertIdentityTest, NoRankIsTakenWithAnotherWorkersCertificate) {
  WorkerImpl worker0(Config(0, ""));
  ASSERT_OK_AND_ASSIGN(const std::string master, worker0.Listen());
  absl::Status joined0;
  std::thread start0([&] { joined0 = worker0.Start(); });
  RawClient as_worker2 = As(master, workers_[2]);
  RawReply r = as_worker2.Unary(kJoin, JoinBytes(1, "worker1"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("Join: the caller is worker1 but its TLS certificate "
                        "names only worker2"));
  r = as_worker2.Unary(kJoin, JoinBytes(1, "worker2"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("Join: the name worker2 belongs to rank 2, not to "
                        "rank 1"));
  // A client's certificate names no worker, whatever name the Join says.
  RawClient as_client = As(master, client_);
  r = as_client.Unary(kJoin, JoinBytes(1, "ferryctl"));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("the caller is worker1 but its TLS certificate names "
                        "only ferryctl"));

  // The real rank 1, under a name of its choosing.
  WorkerConfig config1 = Config(1, master);
  config1.name = "alice";
  WorkerImpl worker1(config1);
  WorkerImpl worker2(Config(2, master));
  absl::Status joined2;
  std::thread start2([&] { joined2 = worker2.Start(); });
  EXPECT_OK(worker1.Start());
  start2.join();
  start0.join();
  ASSERT_OK(joined0);
  ASSERT_OK(joined2);
  EXPECT_EQ(worker0.rpc().directory().at(1).address, worker1.rpc().address());
  EXPECT_EQ(worker0.rpc().directory().at(1).name, "alice");
  ASSERT_OK_AND_ASSIGN(Value name,
                       worker1.rpc().RpcSync("worker0", "worker_name", {}));
  EXPECT_EQ(name, Value("worker0"));
  ASSERT_OK_AND_ASSIGN(name, worker2.rpc().RpcSync("alice", "worker_name", {}));
  EXPECT_EQ(name, Value("alice"));
  worker2.Stop();
  worker1.Stop();
  worker0.Stop();
}

// A worker's credential, if it ever leaked, is no use over a connection
// whose certificate names another worker: calls, polls and barriers are
// refused.
TEST_F(CertIdentityTest, AWorkersCredentialNeedsItsCertificate) {
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<LocalJob> job, StartJob());
  // What worker1 presents to worker0 (and to the master, worker0's).
  const std::string credential =
      job->worker(1).rpc().channels().secrets().CredentialFor(
          0, job->worker(1).rpc().directory().at(0).public_key);
  ASSERT_FALSE(credential.empty());
  const std::string worker0 = job->worker(0).rpc().address();
  const std::string call =
      wire::CallRequest("echo", {wire::Int(1)}, 1, "worker1");
  RawClient as_worker2 = As(worker0, workers_[2]);
  as_worker2.set_credential(credential);
  RawReply r = as_worker2.Unary(testing::kCallMethod, call);
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("node credential: the caller is worker1 but its TLS "
                        "certificate names only worker2"));
  proto::PollRequest leave;
  leave.set_node(1);
  leave.set_leaving(true);
  r = as_worker2.Unary(kPoll, leave.SerializeAsString());
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("poll: the caller is worker1 but its TLS "
                        "certificate names only worker2"));
  proto::BarrierRequest barrier;
  barrier.set_node(1);
  barrier.set_name("shutdown.enter");
  barrier.set_timeout_ms(1000);
  r = as_worker2.Unary(kBarrier, barrier.SerializeAsString());
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(r.status.error_message(),
              HasSubstr("barrier: the caller is worker1 but its TLS "
                        "certificate names only worker2"));
  // With worker1's own certificate the same call is worker1's.
  RawClient as_worker1 = As(worker0, workers_[1]);
  as_worker1.set_credential(credential);
  r = as_worker1.Unary(testing::kCallMethod, call);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  // Nobody left: worker1 still serves its peers.
  EXPECT_FALSE(job->worker(0).rpc().membership().DownReason(1).has_value());
  ASSERT_OK_AND_ASSIGN(
      Value name, job->worker(0).rpc().RpcSync("worker1", "worker_name", {}));
  EXPECT_EQ(name, Value("worker1"));
}

}  // namespace
}  // namespace ferry
