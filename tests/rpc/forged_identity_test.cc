// Identities bound to the transport (issues 12 and 25), in a job with a
// token, on both membership backends (the embedded master, and etcd where
// each node publishes its public key in its record): every attack by a
// peer that has the job's token — the right to join — but not the
// identity it claims. Each is refused (PERMISSION_DENIED, or
// UNAUTHENTICATED for a credential that names no live node: forged, made
// for another node, or of a node gone) and changes nothing: the victim's
// RRef and its owner table entry stay, membership is unchanged, the job
// still serves honest calls.
//
// The attacker is a raw gRPC client registered as a client of its own
// (tests/testing/raw_client.h; on etcd, registered through etcd), or a
// worker's own channel (a worker's credential) for what only workers could
// try.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "collectives/collectives.h"
#include "collectives/elastic/elastic.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/membership_record.pb.h"
#include "proto/rendezvous.pb.h"
#include "proto/rref.pb.h"
#include "proto/store.pb.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/auth/authenticator.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/auth/security.h"
#include "rpc/base/timers.h"
#include "rpc/membership/etcd/etcd_client.h"
#include "tests/testing/await.h"
#include "tests/testing/etcd_cluster.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/raw_exchange.h"
#include "tests/testing/secret_files.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"
#include "tools/runtime/rendezvous.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitTrue;
using ::ferry::testing::DataHeader;
using ::ferry::testing::EtcdCluster;
using ::ferry::testing::FrameBytes;
using ::ferry::testing::RawClient;
using ::ferry::testing::RawReply;
using ::ferry::testing::StatusIs;
using ::testing::HasSubstr;
namespace wire = ::ferry::testing::wire;

constexpr char kAddFork[] = "/ferry.proto.RRefs/AddFork";
constexpr char kConfirmFork[] = "/ferry.proto.RRefs/ConfirmFork";
constexpr char kDeleteFork[] = "/ferry.proto.RRefs/DeleteFork";
constexpr char kFetch[] = "/ferry.proto.RRefs/Fetch";
constexpr char kRenewLease[] = "/ferry.proto.RRefs/RenewLease";
constexpr char kPoll[] = "/ferry.proto.Rendezvous/Poll";
constexpr char kBarrier[] = "/ferry.proto.Rendezvous/Barrier";
constexpr char kCompareSet[] = "/ferry.proto.Store/CompareSet";
constexpr char kStoreSet[] = "/ferry.proto.Store/Set";
constexpr char kShutdown[] = "/ferry.proto.Worker/Shutdown";

// On etcd: the workers' lease TTL (twice etcd's smallest, so a loaded
// machine's stall does not expire a lease) and the bound on any one step.
constexpr absl::Duration kTtl = absl::Seconds(4);
constexpr absl::Duration kWait = absl::Seconds(30);

enum class Backend { kEmbedded, kEtcd };

std::string TestData(const std::string& name) {
  return ::ferry::testing::PrivateCopy(
      absl::StrCat(getenv("TEST_SRCDIR"), "/ferry/tests/testdata/tls/", name));
}

// `code`, with `text` in the message.
void ExpectRefused(const RawReply& r, grpc::StatusCode code,
                   const std::string& text) {
  EXPECT_EQ(r.status.error_code(), code) << r.status.error_message();
  EXPECT_THAT(r.status.error_message(), HasSubstr(text));
}

class ForgedIdentityTest : public ::testing::TestWithParam<Backend> {
 protected:
  static void TearDownTestSuite() { etcd_.reset(); }

  void SetUp() override {
    const std::string token_file = TestData("token.txt");
    ASSERT_OK_AND_ASSIGN(security_, Security::Load({.token_file = token_file}));
    ASSERT_OK_AND_ASSIGN(std::string token,
                         ReadSecretFile(token_file, "--token_file"));
    token_ = std::string(absl::StripAsciiWhitespace(token));
    if (GetParam() == Backend::kEtcd) {
      ASSERT_NO_FATAL_FAILURE(UseEtcd());
      if (IsSkipped()) return;
    }
    ASSERT_OK_AND_ASSIGN(
        job_, LocalJob::Start(
                  3, {.configure = [this](WorkerConfig& o) { Configure(o); }}));
    RpcClientOptions options;
    options.security = security_;
    options.membership_backend = backend_;
    ASSERT_OK_AND_ASSIGN(victim_, job_->Connect(options));
    ASSERT_OK_AND_ASSIGN(rref_,
                         victim_->rrefs().Remote("worker1", "echo", {7}));
    ASSERT_OK(rref_.ToHere());
    ASSERT_OK_AND_ASSIGN(before_, Owned());
    ASSERT_EQ(before_.size(), 1u);
    ASSERT_EQ(before_[0].forks_size(), 1);
    ASSERT_OK_AND_ASSIGN(fork_, ParseGlobalId(before_[0].forks(0).fork()));
    // The attacker: a client of its own (the token lets it join).
    ASSERT_OK_AND_ASSIGN(attacker_, Register("attacker"));
    attacker_node_ = attacker_.node;
    owner_ =
        std::make_unique<RawClient>(job_->worker(1).rpc().address(), token_);
    owner_->set_credential(CredentialFor(attacker_, 1));
  }

  void TearDown() override {
    if (victim_ != nullptr) victim_->Close();
  }

  // Membership in etcd: one cluster for the suite, a job of its own here.
  void UseEtcd() {
    if (!EtcdCluster::Installed()) GTEST_SKIP() << EtcdCluster::SkipReason();
    if (etcd_ == nullptr) {
      ASSERT_OK_AND_ASSIGN(etcd_, EtcdCluster::Start());
    }
    static int jobs = 0;
    job_name_ = absl::StrCat("forged", ++jobs);
    ASSERT_OK_AND_ASSIGN(
        backend_,
        BackendFactoryFor(
            {.url = absl::StrCat("etcd://", etcd_->endpoints(), "/", job_name_),
             .ttl = kTtl}));
  }

  // A worker's options in this job (LocalJob set rank and world size).
  void Configure(WorkerConfig& o) const {
    o.security = security_;
    if (backend_) {
      o.membership_backend = backend_;
      o.heartbeat_timeout = kTtl;
    }
  }

  // A client of the job registered by hand, as an attacker would: its node
  // and the key pair its credentials are made with.
  struct Forger {
    uint64_t node = 0;
    std::shared_ptr<const NodeKey> key = NodeKey::Generate();
    RawClient* raw = nullptr;  // Registered through it (the master).
  };

  // Registers a client (at the master, or in etcd).
  absl::StatusOr<Forger> Register(const std::string& description) {
    Forger f;
    if (!backend_) {
      registrars_.push_back(
          std::make_unique<RawClient>(job_->master(), token_));
      f.raw = registrars_.back().get();
      absl::StatusOr<uint64_t> node = f.raw->Register();
      if (!node.ok()) return node.status();
      f.node = *node;
      return f;
    }
    absl::StatusOr<std::unique_ptr<MembershipBackend>> backend =
        backend_(&timers_);
    if (!backend.ok()) return backend.status();
    absl::StatusOr<ClientRegistration> registered =
        (*backend)->RegisterClient(description, f.key->public_key(), kWait);
    if (!registered.ok()) return registered.status();
    // Kept (its lease alive) until the test ends.
    registrations_.push_back(*std::move(backend));
    f.node = registered->node;
    return f;
  }

  // What `f` presents to worker `rank` (made for it only).
  std::string CredentialFor(const Forger& f, int rank) const {
    const WorkerInfo& w = job_->worker(0).rpc().directory().at(rank);
    if (f.raw != nullptr) return f.raw->CredentialFor(WorkerInfoToProto(w));
    return MadeWith(*f.key, f.node, w);
  }

  // A credential for `to` made with `key` as node `as`.
  static std::string MadeWith(const NodeKey& key, uint64_t as,
                              const WorkerInfo& to) {
    PresentedCredential c;
    c.node = as;
    c.token = CallToken(*key.Agree(to.public_key), {as, key.public_key()},
                        {WorkerNode(to.rank), to.public_key});
    return FormatCredential(c);
  }

  uint64_t victim() const { return victim_->rpc().node(); }

  // Worker1's owner table, without the entries' ages.
  absl::StatusOr<std::vector<proto::OwnedRRef>> Owned() {
    absl::StatusOr<std::vector<proto::OwnedRRef>> rows =
        victim_->rrefs()
            .ListOwned(1, absl::Seconds(10))
            .Wait(absl::Seconds(20));
    if (rows.ok()) {
      for (proto::OwnedRRef& row : *rows) row.clear_age_ms();
    }
    return rows;
  }

  proto::ForkRequest VictimsFork(uint64_t holder) const {
    proto::ForkRequest r;
    r.set_rref_creator(rref_.id().node);
    r.set_rref_local(rref_.id().local);
    r.set_fork_creator(fork_.node);
    r.set_fork_local(fork_.local);
    r.set_holder(holder);
    return r;
  }

  // Nothing changed: the owner table as before, nobody gone, and the
  // victim still reads its value and makes new ones.
  void ExpectNothingChanged() {
    ASSERT_OK_AND_ASSIGN(std::vector<proto::OwnedRRef> now, Owned());
    ASSERT_EQ(now.size(), before_.size());
    EXPECT_EQ(now[0].DebugString(), before_[0].DebugString());
    for (int r = 0; r < job_->size(); ++r) {
      EXPECT_FALSE(job_->worker(r).rpc().membership().DownReason(victim()))
          << "worker" << r << " thinks the victim is gone";
      EXPECT_TRUE(job_->worker(r).rpc().membership().DownNodes().empty());
      EXPECT_FALSE(job_->worker(r).rpc().stopped());
    }
    ASSERT_OK_AND_ASSIGN(Value mine, rref_.ToHere());
    EXPECT_EQ(mine, Value(int64_t{7}));
    {
      ASSERT_OK_AND_ASSIGN(RRef fresh,
                           victim_->rrefs().Remote("worker1", "echo", {8}));
      ASSERT_OK_AND_ASSIGN(Value made, fresh.ToHere());
      EXPECT_EQ(made, Value(int64_t{8}));
    }
    // The fresh value's release is asynchronous: wait (bounded) until the
    // owner table is as before again, so a later check starts from it.
    absl::StatusOr<std::vector<proto::OwnedRRef>> rows;
    AwaitTrue(
        [&] {
          rows = Owned();
          return !rows.ok() || rows->size() == before_.size();
        },
        kWait, /*every=*/absl::Milliseconds(10));
    ASSERT_OK(rows.status());
    EXPECT_EQ(rows->size(), before_.size()) << "the fresh value was not freed";
  }

  static std::unique_ptr<EtcdCluster> etcd_;
  std::string job_name_;
  BackendFactory backend_;  // Unset: the embedded master.
  ThreadTimers timers_;     // For registrations through etcd.
  std::vector<std::unique_ptr<MembershipBackend>> registrations_;
  std::vector<std::unique_ptr<RawClient>> registrars_;
  std::shared_ptr<const Security> security_;
  std::string token_;
  std::unique_ptr<LocalJob> job_;
  std::unique_ptr<ClientImpl> victim_;
  RRef rref_;
  GlobalId fork_;
  std::vector<proto::OwnedRRef> before_;
  std::unique_ptr<RawClient> owner_;  // The attacker, at worker1.
  Forger attacker_;
  uint64_t attacker_node_ = 0;
};

std::unique_ptr<EtcdCluster> ForgedIdentityTest::etcd_;

// Membership calls to the embedded master (polls, barriers), which a job on
// etcd does not have: the attacker at the master.
class ForgedMembershipCallTest : public ForgedIdentityTest {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(ForgedIdentityTest::SetUp());
    if (IsSkipped()) return;
    master_ = std::make_unique<RawClient>(job_->master(), token_);
    master_->set_credential(CredentialFor(attacker_, 0));
  }
  std::unique_ptr<RawClient> master_;
};

// What only etcd has: records anyone with access to etcd may rewrite, and
// replacement incarnations.
class ForgedEtcdTest : public ForgedIdentityTest {};

TEST_P(ForgedIdentityTest, DeleteOfAnothersForkIsRefused) {
  // Claiming to be the holder, and saying who it is: both refused.
  ExpectRefused(
      owner_->Unary(kDeleteFork, VictimsFork(victim()).SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("the fork's holder claims client node ", victim(),
                   " but the call's credential is "
                   "client node ",
                   attacker_node_));
  ExpectRefused(owner_->Unary(kDeleteFork,
                              VictimsFork(attacker_node_).SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED, "the fork's holder");
  proto::ForkRequest abandon = VictimsFork(victim());
  abandon.set_only_unconfirmed(true);
  ExpectRefused(owner_->Unary(kDeleteFork, abandon.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED, "the fork's holder");
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, FetchWithoutAForkOfOnesOwnIsRefused) {
  proto::ForkRequest null_fork = VictimsFork(attacker_node_);
  null_fork.set_fork_creator(0);
  null_fork.set_fork_local(0);
  ExpectRefused(owner_->Unary(kFetch, null_fork.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED, "null fork");
  ExpectRefused(
      owner_->Unary(kFetch, VictimsFork(attacker_node_).SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED, "the fork's holder");
  ExpectRefused(
      owner_->Unary(kFetch, VictimsFork(victim()).SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("holder claims client node ", victim()));
  // A value not created yet cannot be waited for with another's ids.
  proto::ForkRequest future = VictimsFork(attacker_node_);
  future.set_rref_local(rref_.id().local + 100);
  ExpectRefused(owner_->Unary(kFetch, future.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED, "rref_creator claims");
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, RenewalForAFakeHolderIsRefused) {
  // A complete round listing nothing would drop all the victim's forks.
  proto::LeaseRequest renew;
  renew.set_holder(victim());
  renew.set_round(1000);
  renew.set_chunk(0);
  renew.set_chunks(1);
  renew.set_epoch(1000);
  ExpectRefused(owner_->Unary(kRenewLease, renew.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                absl::StrCat("holder claims client node ", victim()));
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, ConfirmingOrPreDeletingAnothersCopyChangesNothing) {
  ExpectRefused(
      owner_->Unary(kConfirmFork, VictimsFork(victim()).SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("holder claims client node ", victim()));
  // A delete that comes before its copy is registered is remembered, and
  // the copy then never is: a delete of the victim's next copy (its ids are
  // easy to guess) would free its next remote()'s value at birth. Only the
  // copy's creator may send one; anyone else's is answered and ignored.
  proto::ForkRequest next = VictimsFork(victim());
  next.set_rref_local(rref_.id().local + 2);
  next.set_fork_local(rref_.id().local + 3);
  RawReply ignored = owner_->Unary(kDeleteFork, next.SerializeAsString());
  EXPECT_TRUE(ignored.status.ok()) << ignored.status.error_message();
  // Makes the victim's next remote() (those very ids) and reads it back.
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, VouchingForAnothersCopyInTransitIsRefused) {
  // The attacker renews its own lease, listing the victim's copy as one it
  // sent: that would keep another's unconfirmed copy alive at its word.
  proto::LeaseRequest renew;
  renew.set_holder(attacker_node_);
  proto::RRefHandle* h = renew.add_in_transit();
  h->set_rref_creator(rref_.id().node);
  h->set_rref_local(rref_.id().local);
  h->set_fork_creator(fork_.node);
  h->set_fork_local(fork_.local);
  ExpectRefused(
      owner_->Unary(kRenewLease, renew.SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("RenewLease: in_transit[0] is copy ", GlobalIdString(fork_),
                   " of rref ", GlobalIdString(rref_.id()),
                   ", made by client node ", victim(), "; client node ",
                   attacker_node_, " may vouch only for copies it sent"));
  ExpectNothingChanged();
  // Its own copies it may list (none is registered: nothing changes).
  h->set_fork_creator(attacker_node_);
  RawReply own = owner_->Unary(kRenewLease, renew.SerializeAsString());
  EXPECT_TRUE(own.status.ok()) << own.status.error_message();
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, ACopyIsPassedOnOnlyByItsHolder) {
  // Registering a copy of the victim's RRef for itself (its own fork id),
  // then fetching with it, would read any value whose id it can guess.
  proto::ForkRequest add = VictimsFork(attacker_node_);
  add.set_fork_creator(attacker_node_);
  add.set_fork_local(1);
  ExpectRefused(
      owner_->Unary(kAddFork, add.SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("AddFork: client node ", attacker_node_,
                   " holds no copy of rref ", GlobalIdString(rref_.id())));
  ExpectRefused(owner_->Unary(kFetch, add.SerializeAsString()),
                grpc::StatusCode::NOT_FOUND, "is not registered");
  // Or for the owner, as a copy of the victim's registered for another.
  ExpectRefused(
      owner_->Unary(kAddFork, VictimsFork(attacker_node_).SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED, "fork_creator claims");
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, ALentCopyIsLentOnlyByItsHolder) {
  // A copy "lent" to its owner for a call (borrowed: the owner takes a
  // local fork of its own), by a caller that holds none: to_here on the
  // owner would hand the attacker the victim's value.
  proto::RRefHandle lent;
  lent.set_rref_creator(rref_.id().node);
  lent.set_rref_local(rref_.id().local);
  lent.set_owner("worker1");
  lent.set_owner_rank(1);
  lent.set_borrowed(true);
  ExpectRefused(
      owner_->Unary(
          testing::kCallMethod,
          wire::CallRequest("to_here", {wire::RRef(lent)}, attacker_node_)),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("client node ", attacker_node_, " holds no copy of rref ",
                   GlobalIdString(rref_.id()), " to lend"));
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, APredictableRRefIdCannotBePreCreated) {
  // The victim's next ids are easy to guess: its node, the next counter.
  proto::CallRequest call;
  call.set_function("echo");
  call.add_args()->set_int_value(666);
  call.set_caller_node(attacker_node_);
  proto::RRefHandle* h = call.mutable_create_rref();
  h->set_rref_creator(victim());
  h->set_rref_local(rref_.id().local + 2);
  h->set_fork_creator(victim());
  h->set_fork_local(rref_.id().local + 3);
  h->set_owner("worker1");
  h->set_owner_rank(1);
  ExpectRefused(owner_->Unary(testing::kCallMethod, call.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                "are not the caller's own");
  // Nor by claiming to be the victim.
  call.set_caller_node(victim());
  ExpectRefused(owner_->Unary(testing::kCallMethod, call.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                absl::StrCat("caller_node claims client node ", victim(),
                             " but the call's credential is client node ",
                             attacker_node_));
  ExpectNothingChanged();
  // An honest call of the attacker's own is served.
  RawReply honest =
      owner_->Unary(testing::kCallMethod,
                    wire::CallRequest("echo", {wire::Int(1)}, attacker_node_));
  EXPECT_TRUE(honest.status.ok()) << honest.status.error_message();
}

TEST_P(ForgedIdentityTest, ARemoteIsMadeOnlyOnTheOwnerItNames) {
  // The attacker's own ids, but an RRef worker2 would own, sent to worker1.
  proto::CallRequest call;
  call.set_function("echo");
  call.add_args()->set_int_value(666);
  call.set_caller_node(attacker_node_);
  proto::RRefHandle* h = call.mutable_create_rref();
  h->set_rref_creator(attacker_node_);
  h->set_rref_local(1);
  h->set_fork_creator(attacker_node_);
  h->set_fork_local(2);
  h->set_owner("worker2");
  h->set_owner_rank(2);
  ExpectRefused(owner_->Unary(testing::kCallMethod, call.SerializeAsString()),
                grpc::StatusCode::INVALID_ARGUMENT,
                "create_rref: the rref would be owned by worker2, not worker1");
  ExpectNothingChanged();
}

TEST_P(ForgedMembershipCallTest, LeavingAsAnotherClientIsRefused) {
  proto::PollRequest leave;
  leave.set_node(victim());
  leave.set_leaving(true);
  ExpectRefused(master_->Unary(kPoll, leave.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                absl::StrCat("poll: node claims client node ", victim(),
                             " but the call is client node ", attacker_node_));
  ExpectNothingChanged();
}

// Deciding an agreement of the world ahead of its members (elastic.h's
// decisions live in the master's store): a client, with the token and
// its own credential, may not.
TEST_P(ForgedMembershipCallTest, AClientCannotDecideAnAgreement) {
  proto::StoreCompareSetRequest decide;
  decide.set_key("ferry/agree/world/t:agree.0@0");
  decide.set_desired("0:1");
  ExpectRefused(master_->Unary(kCompareSet, decide.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                "only the job's workers change");
  proto::StoreSetRequest set;
  set.set_key(decide.key());
  set.set_value("0:1");
  ExpectRefused(master_->Unary(kStoreSet, set.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                "only the job's workers change");
  // The agreement, when the members hold it, is theirs.
  std::vector<absl::StatusOr<Agreement>> got(3);
  std::vector<std::thread> members;
  for (int r = 0; r < 3; ++r) {
    members.emplace_back([&, r] {
      got[r] = Agree(job_->worker(r).collectives().world(), true);
    });
  }
  for (auto& t : members) t.join();
  for (int r = 0; r < 3; ++r) {
    ASSERT_OK(got[r].status());
    EXPECT_TRUE(got[r]->flag);
    EXPECT_EQ(got[r]->members, std::vector<int>({0, 1, 2}));
  }
}

TEST_P(ForgedMembershipCallTest, ABarrierForAWorkerIsRefused) {
  proto::BarrierRequest barrier;
  barrier.set_node(1);
  barrier.set_name("shutdown.enter");
  barrier.set_timeout_ms(10000);
  ExpectRefused(master_->Unary(kBarrier, barrier.SerializeAsString()),
                grpc::StatusCode::PERMISSION_DENIED,
                "barrier: node claims worker1 but the call is client node");
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, ShutdownIsForClientsOnly) {
  // A worker asking another to stop.
  auto stub = proto::Worker::NewStub(job_->worker(1).rpc().channels().ForWorker(
      job_->worker(1).rpc().directory().at(0)));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  proto::ShutdownRequest request;
  proto::ShutdownResponse response;
  grpc::Status s = stub->Shutdown(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(),
              HasSubstr("worker0: Shutdown is for clients only; the caller is "
                        "worker1"));
  // A caller with the token but no identity.
  RawClient anonymous(job_->master(), token_);
  ExpectRefused(anonymous.Unary(kShutdown, ""),
                grpc::StatusCode::PERMISSION_DENIED, "anonymous");
  // A credential of a key nobody published.
  anonymous.set_credential(MadeWith(*NodeKey::Generate(), attacker_node_,
                                    job_->worker(0).rpc().directory().at(0)));
  ExpectRefused(anonymous.Unary(kShutdown, ""),
                grpc::StatusCode::UNAUTHENTICATED, "names no live node");
  anonymous.set_credential(std::string(64, 'a'));
  ExpectRefused(anonymous.Unary(kShutdown, ""),
                grpc::StatusCode::UNAUTHENTICATED, "is malformed");
  ExpectNothingChanged();
}

TEST_P(ForgedIdentityTest, CollectiveFramesComeOnlyFromTheirSender) {
  const std::string payload =
      ::ferry::testing::ValueBytes(Value(Tensor::FromVector<float>({1})));
  const std::string frame = FrameBytes(
      DataHeader("world/t:forged", 0, 1, static_cast<int64_t>(payload.size())),
      payload);
  // Worker0 sending as worker1.
  grpc::Status s =
      ::ferry::testing::SendFrames(job_->worker(0).rpc().channels().ForWorker(
                                       job_->worker(0).rpc().directory().at(2)),
                                   {frame});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(),
              HasSubstr("the frame claims src rank 1 but the stream's "
                        "credential is worker0"));
  // A client, whatever rank it claims.
  s = ::ferry::testing::SendFrames(
      victim_->rpc().channels().ForWorker(victim_->rpc().directory().at(2)),
      {frame});
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(s.error_message(), HasSubstr("come only from workers"));
  ASSERT_OK_AND_ASSIGN(proto::WorkerStatus status,
                       victim_->rpc().GetStatus("worker2", absl::Seconds(5)));
  EXPECT_EQ(status.mailbox_bytes(), 0);
  // An honest op is unaffected.
  std::vector<absl::StatusOr<Tensor>> out(job_->size(),
                                          absl::UnknownError("not run"));
  std::vector<std::thread> ranks;
  for (int r = 0; r < job_->size(); ++r) {
    ranks.emplace_back([&, r] {
      out[r] = AllReduce(job_->worker(r).collectives().world(),
                         Tensor::FromVector<float>({1}));
    });
  }
  for (std::thread& t : ranks) t.join();
  for (auto& r : out) {
    ASSERT_OK(r);
    EXPECT_EQ(r->ToVector<float>(), std::vector<float>{3});
  }
  ExpectNothingChanged();
}

// Issue 25 F8: what a node presents to one worker (a squatter, say, that
// collects its callers' credentials) is worth nothing at another: a
// client's and a worker's credentials, replayed elsewhere, name nobody.
TEST_P(ForgedIdentityTest, ACredentialIsUselessAnywhereButItsDestination) {
  const WorkerInfo& one = job_->worker(0).rpc().directory().at(1);
  // What the victim presents to worker1, and what worker0 does.
  const std::string victims =
      victim_->rpc().channels().secrets().CredentialFor(1, one.public_key);
  const std::string worker0s =
      job_->worker(0).rpc().channels().secrets().CredentialFor(1,
                                                               one.public_key);
  ASSERT_FALSE(victims.empty());
  ASSERT_FALSE(worker0s.empty());
  RawClient at2(job_->worker(2).rpc().address(), token_);
  at2.set_credential(victims);
  ExpectRefused(at2.Unary(kShutdown, ""), grpc::StatusCode::UNAUTHENTICATED,
                "names no live node");
  ExpectRefused(at2.Unary(testing::kCallMethod,
                          wire::CallRequest("echo", {wire::Int(1)}, victim())),
                grpc::StatusCode::UNAUTHENTICATED, "names no live node");
  at2.set_credential(worker0s);
  ExpectRefused(
      at2.Unary(testing::kCallMethod,
                wire::CallRequest("echo", {wire::Int(1)}, 0, "worker0")),
      grpc::StatusCode::UNAUTHENTICATED, "names no live node");
  // At its own destination it is its maker's (the squatter could only
  // ever use it against itself).
  RawClient at1(job_->worker(1).rpc().address(), token_);
  at1.set_credential(worker0s);
  RawReply own =
      at1.Unary(testing::kCallMethod,
                wire::CallRequest("echo", {wire::Int(1)}, 0, "worker0"));
  EXPECT_TRUE(own.status.ok()) << own.status.error_message();
  ExpectNothingChanged();
}

// Issue 25 F4: a worker holds no key that makes a client's credential:
// what it can make with its own key names it, or (its read-only range)
// new clients of its own, never a client another node registered.
TEST_P(ForgedIdentityTest, AWorkerCannotPassForAClient) {
  RpcAgent& one = job_->worker(1).rpc();
  const WorkerInfo& two = one.directory().at(2);
  RawClient at2(job_->worker(2).rpc().address(), token_);
  // The victim's node, with worker1's key.
  at2.set_credential(MadeWith(one.key(), victim(), two));
  ExpectRefused(at2.Unary(kShutdown, ""), grpc::StatusCode::UNAUTHENTICATED,
                "names no live node");
  // A client id the master would issue next, vouched for by worker1 as if
  // it were the master.
  const uint64_t fresh = attacker_node_ + 1000;
  PresentedCredential vouched;
  vouched.node = fresh;
  vouched.token =
      CallToken(*one.key().Agree(two.public_key),
                {fresh, one.key().public_key()}, {2, two.public_key});
  vouched.public_key = one.key().public_key();
  vouched.voucher = VoucherTag(
      *one.key().Agree(two.public_key), {0, one.directory().at(0).public_key},
      {2, two.public_key}, {fresh, one.key().public_key()});
  at2.set_credential(FormatCredential(vouched));
  ExpectRefused(at2.Unary(kShutdown, ""), grpc::StatusCode::UNAUTHENTICATED,
                "names no live node");
  ExpectNothingChanged();
}

// Whoever may write the job's keys in etcd may rewrite a client's record
// with a key of its own: a client node's first key stays its only one, so
// the attacker's credential still names the attacker.
TEST_P(ForgedEtcdTest, ARewrittenClientRecordMovesNoIdentity) {
  ASSERT_OK_AND_ASSIGN(Forger attacker, Register("attacker2"));
  const uint64_t node = attacker.node;
  EtcdOptions options;
  options.endpoints = etcd_->endpoint_list();
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<EtcdClient> etcd,
                       EtcdClient::Connect(options));
  proto::ClientRecord forged;
  forged.set_description("the victim, really");
  forged.set_public_key(attacker.key->public_key());
  ASSERT_OK(etcd->Put(absl::StrCat("/ferry/", job_name_, "/clients/", victim()),
                      forged.SerializeAsString())
                .Wait(kWait)
                .status());
  // A client registered after the rewrite is admitted after it too (one
  // watch, in order): once its call passed, worker1 has seen the rewrite.
  ASSERT_OK_AND_ASSIGN(Forger witness, Register("witness"));
  const uint64_t witness_node = witness.node;
  RawClient as_witness(job_->worker(1).rpc().address(), token_);
  as_witness.set_credential(CredentialFor(witness, 1));
  RawReply seen =
      as_witness.Unary(testing::kCallMethod,
                       wire::CallRequest("echo", {wire::Int(1)}, witness_node));
  ASSERT_TRUE(seen.status.ok()) << seen.status.error_message();

  RawClient as_attacker(job_->worker(1).rpc().address(), token_);
  as_attacker.set_credential(CredentialFor(attacker, 1));
  ExpectRefused(
      as_attacker.Unary(kDeleteFork, VictimsFork(victim()).SerializeAsString()),
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat("the fork's holder claims client node ", victim(),
                   " but the call's credential is client node ", node));
  ExpectNothingChanged();
}

// Until etcd deleted `key` (its holder's lease expired), bounded.
void WaitKeyGone(const EtcdCluster& cluster, const std::string& key) {
  EtcdOptions options;
  options.endpoints = cluster.endpoint_list();
  ASSERT_OK_AND_ASSIGN(auto etcd, EtcdClient::Connect(options));
  ASSERT_OK_AND_ASSIGN(EtcdRange now, etcd->Get(key).Wait(kWait));
  if (now.kvs.empty()) return;
  absl::Mutex mu;
  bool gone = false;
  auto watch = etcd->WatchPrefix(
      key, now.revision + 1, {.on_events = [&](std::vector<EtcdEvent> events) {
        absl::MutexLock lock(&mu);
        for (const EtcdEvent& e : events) {
          if (e.type == EtcdEvent::Type::kDelete) gone = true;
        }
      }});
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(mu.AwaitWithTimeout(absl::Condition(&gone), kWait))
        << key << " still held";
  }
  watch->Stop();
}

// A replacement for a dead rank makes a credential of its own: the others
// admit it from their watch (its calls are its own at once), and the dead
// incarnation's credential names nobody any more.
TEST_P(ForgedEtcdTest, AReplacementIsKnownByItsNewCredentialOnly) {
  // What the old incarnation presented to worker1.
  const std::string old =
      job_->worker(2).rpc().channels().secrets().CredentialFor(
          1, job_->worker(1).rpc().directory().at(1).public_key);
  ASSERT_FALSE(old.empty());
  job_->worker(2).Stop();  // As if killed: its lease runs out.
  ASSERT_NO_FATAL_FAILURE(
      WaitKeyGone(*etcd_, absl::StrCat("/ferry/", job_name_, "/ranks/2")));
  WorkerConfig config;
  config.rank = 2;
  config.world_size = job_->size();
  config.listen = "127.0.0.1:0";
  Configure(config);
  WorkerImpl replacement(config);
  ASSERT_OK(replacement.Start());
  const std::string fresh =
      replacement.rpc().channels().secrets().CredentialFor(
          1, replacement.rpc().directory().at(1).public_key);
  EXPECT_NE(fresh, old);
  // The replacement's call, as worker2, right after it joined.
  ASSERT_OK_AND_ASSIGN(Value name,
                       replacement.rpc().RpcSync("worker1", "worker_name", {}));
  EXPECT_EQ(name, Value("worker1"));
  // The old incarnation's credential: nobody's.
  RawClient ghost(job_->worker(1).rpc().address(), token_);
  ghost.set_credential(old);
  ExpectRefused(
      ghost.Unary(testing::kCallMethod,
                  wire::CallRequest("echo", {wire::Int(1)}, 2, "worker2")),
      grpc::StatusCode::UNAUTHENTICATED, "names no live node");
  replacement.Stop();
}

INSTANTIATE_TEST_SUITE_P(Backends, ForgedIdentityTest,
                         ::testing::Values(Backend::kEmbedded, Backend::kEtcd),
                         [](const auto& info) {
                           return info.param == Backend::kEtcd ? "etcd"
                                                               : "embedded";
                         });
INSTANTIATE_TEST_SUITE_P(Embedded, ForgedMembershipCallTest,
                         ::testing::Values(Backend::kEmbedded),
                         [](const auto&) { return "embedded"; });
INSTANTIATE_TEST_SUITE_P(Etcd, ForgedEtcdTest,
                         ::testing::Values(Backend::kEtcd),
                         [](const auto&) { return "etcd"; });

}  // namespace
}  // namespace ferry
