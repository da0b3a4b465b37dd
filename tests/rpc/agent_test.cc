// In-process multi-worker tests of the RPC runtime: several workers in one
// process on 127.0.0.1 with picked ports, talking over real gRPC.
#include "rpc/agent.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/value/json.h"
#include "tests/testing/await.h"
#include "tests/testing/membership_waits.h"
#include "tests/testing/raw_client.h"
#include "tests/testing/secret_files.h"
#include "tests/testing/status_matchers.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace {

using ::ferry::testing::AwaitGone;
using ::ferry::testing::AwaitTrue;
using ::ferry::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

Tensor F32(std::vector<float> v) { return Tensor::FromVector<float>(v); }

class AgentTest : public ::testing::Test {
 protected:
  void StartJob(int n, LocalJob::Options options = {}) {
    absl::StatusOr<std::unique_ptr<LocalJob>> job = LocalJob::Start(n, options);
    ASSERT_OK(job);
    job_ = *std::move(job);
  }
  RpcAgent& agent(int rank) { return job_->worker(rank).rpc(); }

  std::unique_ptr<LocalJob> job_;
};

TEST_F(AgentTest, EveryWorkerCallsEveryOther) {
  StartJob(3);
  for (int from = 0; from < 3; ++from) {
    for (int to = 0; to < 3; ++to) {
      ASSERT_OK_AND_ASSIGN(
          Value name, agent(from).RpcSync(absl::StrCat(to), "worker_name", {}));
      EXPECT_EQ(name, Value(absl::StrCat("worker", to)));
    }
  }
  ASSERT_OK_AND_ASSIGN(Value sum,
                       agent(0).RpcSync("worker2", "add", {F32({1, 2}), 3}));
  EXPECT_EQ(sum, Value(F32({4, 5})));
  EXPECT_EQ(agent(1).directory().world_size(), 3);
}

TEST_F(AgentTest, UnknownFunctionIsNotFound) {
  StartJob(2);
  EXPECT_THAT(
      agent(0).RpcSync("worker1", "nope", {}),
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("worker1: nope:")));
}

TEST_F(AgentTest, UnknownWorkerIsNotFound) {
  StartJob(2);
  EXPECT_THAT(
      agent(0).RpcSync("worker9", "echo", {1}),
      StatusIs(
          absl::StatusCode::kNotFound,
          HasSubstr("no worker named 'worker9' (workers: worker0, worker1)")));
}

TEST_F(AgentTest, ArityAndTypeErrorsNameTheArgument) {
  StartJob(2);
  EXPECT_THAT(agent(0).RpcSync("worker1", "add", {1}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("worker1: add: expected 2 arguments, got 1")));
  EXPECT_THAT(agent(0).RpcSync("worker1", "concat",
                               {Value(Value::List{F32({1}), "x"})}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("args[0][1]: expected tensor, got string")));
}

TEST_F(AgentTest, FunctionFailureCarriesWorkerAndMessage) {
  StartJob(3);
  EXPECT_THAT(agent(0).RpcSync("worker2", "fail", {"boom"}),
              StatusIs(absl::StatusCode::kUnknown, "worker2: fail: boom"));
  EXPECT_THAT(agent(0).RpcSync("worker2", "fail", {"gone", "NOT_FOUND"}),
              StatusIs(absl::StatusCode::kNotFound, "worker2: fail: gone"));
}

TEST_F(AgentTest, ThrowingFunctionIsInternalAndWorkerSurvives) {
  StartJob(2, {.setup = [](WorkerImpl& w) {
             ASSERT_OK(w.registry().Register("throws", []() -> int64_t {
               throw std::runtime_error("oops");
             }));
           }});
  EXPECT_THAT(agent(0).RpcSync("worker1", "throws", {}),
              StatusIs(absl::StatusCode::kInternal,
                       HasSubstr("uncaught exception: oops")));
  EXPECT_OK(agent(0).RpcSync("worker1", "echo", {1}));
}

TEST_F(AgentTest, SlowCallTimesOutWithDeadlineExceeded) {
  StartJob(2);
  EXPECT_THAT(agent(0).RpcSync("worker1", "sleep_ms", {10000},
                               {.timeout = absl::Milliseconds(200)}),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("worker1: sleep_ms: ")));
}

TEST_F(AgentTest, ZeroTimeoutMeansNoDeadline) {
  StartJob(2, {.configure = [](WorkerConfig& o) {
             o.default_timeout = absl::Milliseconds(50);
           }});
  EXPECT_OK(agent(0).RpcSync("worker1", "sleep_ms", {200},
                             {.timeout = absl::ZeroDuration()}));
  EXPECT_THAT(agent(0).RpcSync("worker1", "sleep_ms", {5000}),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
}

// A function that waits on another worker through a future holds no
// executor thread: with one thread, many such calls in flight still finish.
TEST_F(AgentTest, AsyncFunctionsDoNotDeadlockASmallExecutor) {
  StartJob(3, {.configure = [](WorkerConfig& o) { o.executor_threads = 1; },
               .setup =
                   [](WorkerImpl& w) {
                     RpcAgent* agent = &w.rpc();
                     ASSERT_OK(w.registry().RegisterAsync(
                         "relay",
                         [agent](const CallContext&, std::vector<Value> args) {
                           // Back through worker0, which is itself waiting on
                           // us.
                           return agent->RpcAsync("worker0", "sleep_ms", {20})
                               .Map([args](const absl::StatusOr<Value>& r)
                                        -> absl::StatusOr<Value> {
                                 if (!r.ok()) return r.status();
                                 return args[0];
                               });
                         },
                         "relay(x) -> value"));
                   }});
  std::vector<Future<Value>> calls;
  for (int i = 0; i < 16; ++i) {
    calls.push_back(agent(0).RpcAsync(absl::StrCat(1 + i % 2), "relay", {i}));
  }
  for (int i = 0; i < 16; ++i) {
    ASSERT_OK_AND_ASSIGN(Value v, calls[i].Wait(absl::Seconds(30)));
    EXPECT_EQ(v, Value(i));
  }
}

TEST_F(AgentTest, MalformedTensorFromRawClientIsRejectedAndWorkerKeepsServing) {
  StartJob(2);
  auto channel = grpc::CreateChannel(agent(1).address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = proto::Worker::NewStub(channel);
  proto::CallRequest request;
  request.set_function("echo");
  proto::Tensor* t = request.add_args()->mutable_tensor();
  t->set_dtype(proto::FLOAT32);
  t->add_shape(4);
  t->set_data("abc");  // 3 bytes for 4 floats.
  grpc::ClientContext context;
  proto::CallResponse response;
  grpc::Status s = stub->Call(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(),
              AllOf(HasSubstr("worker1: echo: args[0]: data: 3 bytes"),
                    HasSubstr("needs 4 x 4 = 16")));
  // Unknown dtype and negative dims, too.
  proto::CallRequest bad = request;
  bad.mutable_args(0)->mutable_tensor()->set_dtype(
      static_cast<proto::DType>(99));
  grpc::ClientContext c2;
  EXPECT_EQ(stub->Call(&c2, bad, &response).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_OK(agent(0).RpcSync("worker1", "echo", {F32({1})}));
}

TEST_F(AgentTest, HealthAnswersAndReflectionIsOffByDefault) {
  StartJob(1);
  auto channel = grpc::CreateChannel(agent(0).address(),
                                     grpc::InsecureChannelCredentials());
  grpc::ClientContext context;
  grpc::Slice nothing("");
  grpc::ByteBuffer empty_request(&nothing, 1);
  // grpc.health.v1.Health/Check with an empty HealthCheckRequest.
  grpc::GenericStub generic(channel);
  grpc::ByteBuffer reply;
  absl::Notification done;
  grpc::Status status;
  generic.UnaryCall(&context, "/grpc.health.v1.Health/Check",
                    grpc::StubOptions(), &empty_request, &reply,
                    [&](grpc::Status s) {
                      status = s;
                      done.Notify();
                    });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(reply.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING

  // Reflection is off unless --reflection: a stranger learns no methods.
  grpc::ClientContext reflect_context;
  absl::Notification reflected;
  grpc::Status reflect_status;
  generic.UnaryCall(
      &reflect_context,
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      grpc::StubOptions(), &empty_request, &reply, [&](grpc::Status s) {
        reflect_status = s;
        reflected.Notify();
      });
  ASSERT_TRUE(reflected.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(reflect_status.error_code(), grpc::StatusCode::UNIMPLEMENTED)
      << reflect_status.error_message();
}

TEST_F(AgentTest, StoppedPeerFailsPendingCallsWithItsName) {
  StartJob(3);
  Future<Value> pending = agent(0).RpcAsync("worker2", "sleep_ms", {60000});
  // Let the call arrive before the peer goes away.
  ASSERT_TRUE(
      AwaitTrue([&] { return agent(2).Status().inflight_incoming() > 0; },
                absl::Seconds(30)));
  job_->worker(2).Stop();
  EXPECT_THAT(pending.Wait(absl::Seconds(30)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  // The death is published: new calls fail at once, naming it.
  ASSERT_TRUE(AwaitGone(agent(1).events(), 2, absl::Seconds(30)));
  EXPECT_THAT(
      agent(1).RpcSync("worker2", "echo", {1}),
      StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2 died")));
  EXPECT_OK(agent(1).RpcSync("worker0", "echo", {1}));
}

TEST_F(AgentTest, LeavingPeerIsReportedAsLeft) {
  StartJob(3);
  EXPECT_OK(job_->worker(1).Leave());
  ASSERT_TRUE(AwaitGone(agent(2).events(), 1, absl::Seconds(30)));
  EXPECT_THAT(agent(2).RpcSync("worker1", "echo", {1}),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("worker1 left the job")));
}

TEST_F(AgentTest, GracefulShutdownOfAllWorkers) {
  StartJob(3);
  EXPECT_OK(agent(0).RpcSync("worker1", "echo", {1}));
  EXPECT_OK(job_->ShutdownAll());
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(agent(r).stopped());
}

TEST_F(AgentTest, ShutdownDrainsCallsInFlight) {
  StartJob(2);
  Future<Value> pending = agent(0).RpcAsync("worker1", "sleep_ms", {300});
  EXPECT_OK(job_->ShutdownAll());
  EXPECT_OK(pending.Wait(absl::Seconds(10)));
}

TEST_F(AgentTest, StatusCountsCallsAndFunctions) {
  StartJob(2);
  EXPECT_OK(agent(0).RpcSync("worker1", "echo", {1}));
  proto::WorkerStatus s = agent(1).Status();
  EXPECT_EQ(s.name(), "worker1");
  EXPECT_EQ(s.rank(), 1);
  EXPECT_EQ(s.state(), "running");
  EXPECT_GE(s.calls_served(), 1);
  EXPECT_GE(s.functions(), 13);
}

TEST_F(AgentTest, ClientCallsAnyWorkerWithoutBeingARank) {
  StartJob(3);
  ASSERT_OK_AND_ASSIGN(auto client, job_->Connect());
  EXPECT_GE(client->rpc().node(), kFirstClientNode);
  ASSERT_OK_AND_ASSIGN(Value v,
                       client->rpc().RpcSync("worker2", "arange", {3}));
  EXPECT_EQ(v, Value(Tensor::FromVector<int64_t>({0, 1, 2})));
  ASSERT_OK_AND_ASSIGN(auto status,
                       client->rpc().GetStatus("worker1", absl::Seconds(5)));
  EXPECT_EQ(status.name(), "worker1");
  ASSERT_OK_AND_ASSIGN(
      auto fns, client->rpc().ListFunctions("worker0", absl::Seconds(5)));
  EXPECT_GE(fns.size(), 13u);
}

// ---- Rendezvous failures ----

AgentOptions JoinerOptions(const std::string& master, int rank, int world) {
  AgentOptions o;
  o.rank = rank;
  o.world_size = world;
  o.master = master;
  o.listen = "127.0.0.1:0";
  o.startup_timeout = absl::Seconds(2);
  return o;
}

TEST_F(AgentTest, DuplicateRankIsRefused) {
  StartJob(2);
  RpcAgent late(JoinerOptions(job_->master(), 1, 2));
  EXPECT_THAT(late.Start(),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       HasSubstr("rank 1 is already taken by worker1")));
}

TEST_F(AgentTest, WrongWorldSizeIsRefused) {
  StartJob(2);
  RpcAgent wrong(JoinerOptions(job_->master(), 1, 5));
  EXPECT_THAT(wrong.Start(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("does not match the master's 2")));
}

TEST(RendezvousTest, MissingRankTimesOutNamingIt) {
  AgentOptions o0 = JoinerOptions("", 0, 3);
  o0.startup_timeout = absl::Milliseconds(1500);
  RpcAgent rank0(o0);
  ASSERT_OK_AND_ASSIGN(std::string master, rank0.Listen());
  RpcAgent rank1(JoinerOptions(master, 1, 3));
  absl::Status s1;
  std::thread t([&] { s1 = rank1.Start(); });
  EXPECT_THAT(rank0.Start(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr("rank 2 of 3 did not join within")));
  t.join();
  EXPECT_THAT(
      s1, StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("rank 2")));
}

// Whichever of two workers named alike joins second is refused.
TEST(RendezvousTest, DuplicateNameIsRefused) {
  AgentOptions o0 = JoinerOptions("", 0, 3);
  o0.name = "alice";
  RpcAgent rank0(o0);
  ASSERT_OK_AND_ASSIGN(std::string master, rank0.Listen());
  AgentOptions o1 = JoinerOptions(master, 1, 3);
  o1.name = "alice";
  RpcAgent rank1(o1);
  absl::Status s0;
  std::thread t([&] { s0 = rank0.Start(); });
  absl::Status s1 = rank1.Start();
  t.join();
  auto refused = StatusIs(absl::StatusCode::kAlreadyExists,
                          HasSubstr("name 'alice' is already taken by rank"));
  EXPECT_TRUE(::testing::Matches(refused)(s0) ||
              ::testing::Matches(refused)(s1))
      << s0 << " / " << s1;
}

// --reflection turns gRPC's reflection service on (for tools like
// grpcurl): a reflection request is answered.
TEST(ReflectionTest, OnWhenAsked) {
  AgentOptions o = JoinerOptions("", 0, 1);
  o.reflection = true;
  RpcAgent agent(o);
  ASSERT_OK(agent.Start());
  ::ferry::testing::RawClient raw(agent.address());
  // A ServerReflectionRequest asking to list the services (field 7).
  const std::string list_services("\x3a\x00", 2);
  ::ferry::testing::RawReply r = raw.Stream(
      "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
      {list_services});
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_NE(r.bytes.find("ferry.proto.Worker"), std::string::npos);
  agent.Stop();
}

// A call that reaches a worker before its job formed waits for the job
// (the worker needs the directory to read it), then runs.
TEST(RendezvousTest, CallsBeforeTheJobFormsWaitForIt) {
  RpcAgent rank0(JoinerOptions("", 0, 2));
  ASSERT_OK(rank0.registry().Register("seven", [] { return Value(7); }));
  ASSERT_OK_AND_ASSIGN(std::string master, rank0.Listen());
  ::ferry::testing::RawClient raw(master);
  ::ferry::testing::RawReply early;
  std::thread call([&] {
    early = raw.Unary(::ferry::testing::kCallMethod,
                      ::ferry::testing::wire::CallRequest("seven", {}));
  });
  // It arrived, and waits for the job to form.
  ASSERT_TRUE(AwaitTrue([&] { return rank0.Status().prejoin_calls() == 1; },
                        absl::Seconds(30)));
  RpcAgent rank1(JoinerOptions(master, 1, 2));
  absl::Status s1;
  std::thread join([&] { s1 = rank1.Start(); });
  EXPECT_OK(rank0.Start());
  join.join();
  EXPECT_OK(s1);
  call.join();
  ASSERT_TRUE(early.status.ok()) << early.status.error_message();
  ASSERT_OK_AND_ASSIGN(proto::Value result,
                       ::ferry::testing::ParseResult(early.bytes));
  EXPECT_EQ(result.int_value(), 7);
}

// ...and a worker that stops before its job formed answers the waiting
// calls.
TEST(RendezvousTest, CallsWaitingForAJobThatNeverFormedAreAnswered) {
  RpcAgent rank0(JoinerOptions("", 0, 2));
  ASSERT_OK_AND_ASSIGN(std::string master, rank0.Listen());
  ::ferry::testing::RawClient raw(master);
  ::ferry::testing::RawReply early;
  std::thread call([&] {
    early = raw.Unary(::ferry::testing::kCallMethod,
                      ::ferry::testing::wire::CallRequest("echo", {}));
  });
  // It arrived, and waits for the job to form.
  ASSERT_TRUE(AwaitTrue([&] { return rank0.Status().prejoin_calls() == 1; },
                        absl::Seconds(30)));
  rank0.Stop();
  call.join();
  EXPECT_EQ(early.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << early.status.error_message();
}

// A shutdown asked of workers still joining (`ferryctl down` racing the
// last `ferryd` of an etcd job) is not lost: they shut down once joined.
TEST(RendezvousTest, ShutdownAskedWhileJoiningRunsOnceJoined) {
  RpcAgent rank0(JoinerOptions("", 0, 2));
  ASSERT_OK_AND_ASSIGN(std::string master, rank0.Listen());
  RpcAgent rank1(JoinerOptions(master, 1, 2));
  ASSERT_OK(rank1.Listen());
  rank0.RequestShutdown(absl::Seconds(10));
  rank1.RequestShutdown(absl::Seconds(10));
  EXPECT_FALSE(rank0.stopped());
  absl::Status s1;
  std::thread join([&] { s1 = rank1.Start(); });
  EXPECT_OK(rank0.Start());
  join.join();
  EXPECT_OK(s1);
  EXPECT_TRUE(rank0.WaitStopped(absl::Seconds(30)));
  EXPECT_TRUE(rank1.WaitStopped(absl::Seconds(30)));
  EXPECT_OK(rank0.exit_status());
}

TEST(RendezvousTest, UnreachableMasterIsBounded) {
  // A port nobody listens on: rank 0 of a job that is gone.
  RpcAgent probe(JoinerOptions("", 0, 1));
  ASSERT_OK_AND_ASSIGN(std::string gone, probe.Listen());
  probe.Stop();
  AgentOptions o = JoinerOptions(gone, 1, 2);
  o.startup_timeout = absl::Milliseconds(800);
  RpcAgent lost(o);
  EXPECT_THAT(lost.Start(),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       HasSubstr(absl::StrCat("the master at ", gone))));
}

// ---- Security ----

// The test certificates; keys and tokens as private copies (secret files
// readable by others are refused).
std::string TestData(const std::string& name) {
  std::string path =
      absl::StrCat(getenv("TEST_SRCDIR"), "/ferry/tests/testdata/tls/", name);
  if (absl::EndsWith(name, ".key") || absl::EndsWith(name, ".txt")) {
    return ::ferry::testing::PrivateCopy(path);
  }
  return path;
}

TEST_F(AgentTest, TokenIsRequiredWhenConfigured) {
  ASSERT_OK_AND_ASSIGN(auto security,
                       Security::Load({.token_file = TestData("token.txt")}));
  StartJob(
      2, {.configure = [security](WorkerConfig& o) { o.security = security; }});
  EXPECT_OK(agent(0).RpcSync("worker1", "echo", {1}));
  RpcClientOptions no_token;
  no_token.connect_timeout = absl::Seconds(2);
  EXPECT_THAT(job_->Connect(no_token),
              StatusIs(absl::StatusCode::kUnauthenticated));
  ASSERT_OK_AND_ASSIGN(
      auto wrong, Security::Load({.token_file = TestData("wrong_token.txt")}));
  RpcClientOptions bad;
  bad.security = wrong;
  bad.connect_timeout = absl::Seconds(2);
  EXPECT_THAT(job_->Connect(bad), StatusIs(absl::StatusCode::kUnauthenticated));
  RpcClientOptions good;
  good.security = security;
  ASSERT_OK_AND_ASSIGN(auto client, job_->Connect(good));
  EXPECT_OK(client->rpc().RpcSync("worker1", "echo", {1}));
}

// ---- Replacements (embedded master) ----

// Until every survivor counts `rank` as gone (the master declared it so).
void AwaitGone(LocalJob& job, int rank) {
  for (int r = 0; r < job.size(); ++r) {
    if (r == rank) continue;
    ASSERT_TRUE(
        AwaitGone(job.worker(r).rpc().events(), rank, absl::Seconds(30)))
        << "worker" << r << " still sees " << rank << " alive";
  }
}

// In a job with a token (so every call carries its node's credential),
// worker2 dies; a new process for rank 2 rejoins as a new incarnation with
// a fresh credential: once its Start returned, every survivor calls it and
// it calls them (its credential admitted, the old one's not).
TEST_F(AgentTest, AReplacementRejoinsTheEmbeddedMaster) {
  ASSERT_OK_AND_ASSIGN(auto security,
                       Security::Load({.token_file = TestData("token.txt")}));
  StartJob(
      3, {.configure = [security](WorkerConfig& o) { o.security = security; }});
  const std::string old_address = agent(2).address();
  job_->worker(2).Stop();
  AwaitGone(*job_, 2);
  EXPECT_THAT(agent(0).RpcSync("worker2", "echo", {1}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("worker2")));
  ASSERT_OK(job_->Replace(2));
  EXPECT_NE(agent(2).address(), old_address);
  for (int r : {0, 1}) {
    EXPECT_FALSE(agent(r).membership().DownReason(2).has_value());
    EXPECT_EQ(agent(r).directory().at(2).address, agent(2).address());
    EXPECT_EQ(agent(r).directory().at(2).generation, 1u);
    ASSERT_OK_AND_ASSIGN(Value name,
                         agent(r).RpcSync("worker2", "worker_name", {}));
    EXPECT_EQ(name, Value("worker2"));
    ASSERT_OK_AND_ASSIGN(name,
                         agent(2).RpcSync(absl::StrCat(r), "worker_name", {}));
    EXPECT_EQ(name, Value(absl::StrCat("worker", r)));
  }
  // A client that connects now finds the new incarnation.
  RpcClientOptions options;
  options.security = security;
  ASSERT_OK_AND_ASSIGN(auto client, job_->Connect(options));
  EXPECT_OK(client->rpc().RpcSync("worker2", "echo", {1}));
}

// A rank whose holder is alive is never taken over.
TEST_F(AgentTest, ALiveRankIsNotTakenOver) {
  StartJob(2);
  EXPECT_THAT(job_->Replace(1),
              StatusIs(absl::StatusCode::kAlreadyExists,
                       AllOf(HasSubstr("rank 1 is already taken by worker1"),
                             HasSubstr("which is alive"))));
  // The holder serves on.
  EXPECT_OK(agent(0).RpcSync("worker1", "echo", {1}));
  EXPECT_FALSE(agent(0).membership().DownReason(1).has_value());
}

TEST_F(AgentTest, MutualTlsJobWorksAndRejectsForeignCertificates) {
  ASSERT_OK_AND_ASSIGN(auto tls,
                       Security::Load({.tls_cert_file = TestData("node.pem"),
                                       .tls_key_file = TestData("node.key"),
                                       .tls_ca_file = TestData("ca.pem")}));
  StartJob(2, {.configure = [tls](WorkerConfig& o) { o.security = tls; }});
  ASSERT_OK_AND_ASSIGN(Value v, agent(0).RpcSync("worker1", "add", {1, 2}));
  EXPECT_EQ(v, Value(3));
  ASSERT_OK_AND_ASSIGN(auto foreign,
                       Security::Load({.tls_cert_file = TestData("other.pem"),
                                       .tls_key_file = TestData("other.key"),
                                       .tls_ca_file = TestData("ca.pem")}));
  RpcClientOptions o;
  o.security = foreign;
  o.connect_timeout = absl::Seconds(2);
  EXPECT_THAT(job_->Connect(o), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(
      Security::Load({.tls_cert_file = TestData("node.pem")}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--tls_key")));
}

}  // namespace
}  // namespace ferry
