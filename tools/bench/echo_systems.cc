#include "tools/bench/echo_systems.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/server_builder.h"
#include "proto/bench.grpc.pb.h"
#include "rpc/base/status_util.h"
#include "rpc/value/tensor_builder.h"
#include "tools/bench/unobserved.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace bench {

namespace {

class FerryEcho final : public EchoSystem {
 public:
  explicit FerryEcho(std::unique_ptr<LocalJob> job) : job_(std::move(job)) {}
  ~FerryEcho() override { job_->ShutdownAll().IgnoreError(); }

  void SetPayload(size_t bytes) override {
    TensorBuilder b =
        *TensorBuilder::Create(DType::kUInt8, {static_cast<int64_t>(bytes)});
    for (size_t i = 0; i < bytes; ++i) b.data()[i] = static_cast<char>(i);
    payload_ = Value(std::move(b).Build());
  }

  void Echo(std::function<void(bool)> done) override {
    job_->worker(0)
        .rpc()
        .RpcAsync("worker1", "echo", {payload_})
        .Then([done = std::move(done)](const absl::StatusOr<Value>& r) {
          done(r.ok());
        });
  }

 private:
  std::unique_ptr<LocalJob> job_;
  Value payload_;
};

class BareEchoService final : public proto::BareEcho::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const proto::EchoMessage* request,
                                 proto::EchoMessage* response) override {
    response->set_payload(request->payload());
    auto* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

class BareEcho final : public EchoSystem {
 public:
  BareEcho(std::unique_ptr<grpc::Server> server,
           std::unique_ptr<BareEchoService> service,
           std::shared_ptr<grpc::Channel> channel)
      : service_(std::move(service)),
        server_(std::move(server)),
        stub_(proto::BareEcho::NewStub(channel)) {}
  ~BareEcho() override { server_->Shutdown(); }

  void SetPayload(size_t bytes) override {
    std::string p(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>(i);
    request_.set_payload(std::move(p));
  }

  void Echo(std::function<void(bool)> done) override {
    struct Call {
      grpc::ClientContext context;
      proto::EchoMessage response;
    };
    auto call = std::make_shared<Call>();
    stub_->async()->Echo(
        &call->context, &request_, &call->response,
        [call, done = std::move(done)](grpc::Status s) { done(s.ok()); });
  }

 private:
  std::unique_ptr<BareEchoService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::BareEcho::Stub> stub_;
  proto::EchoMessage request_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EchoSystem>> StartFerryEcho(bool local_socket,
                                                           bool observed,
                                                           bool shared_memory) {
  LocalJob::Options options;
  options.configure = [local_socket, observed, shared_memory](WorkerConfig& o) {
    o.local_socket = local_socket;
    o.channels.use_shared_memory = shared_memory;
    // ferryd's default, not LocalJob's 2 s for tests (see collective_bench).
    o.heartbeat_timeout = absl::Seconds(30);
    if (!observed) Unobserved(o);
  };
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<LocalJob> job,
                         LocalJob::Start(2, options));
  return std::unique_ptr<EchoSystem>(new FerryEcho(std::move(job)));
}

absl::StatusOr<std::unique_ptr<EchoSystem>> StartBareEcho(bool uds) {
  auto service = std::make_unique<BareEchoService>();
  grpc::ServerBuilder builder;
  int port = 0;
  std::string target;
  if (uds) {
    target = absl::StrCat("unix-abstract:ferry-bench-", getpid());
    builder.AddListeningPort(target, grpc::InsecureServerCredentials());
  } else {
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
  }
  builder.SetMaxReceiveMessageSize(-1);
  builder.SetMaxSendMessageSize(-1);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (!uds && port == 0)) {
    return absl::UnavailableError("bare echo server did not start");
  }
  if (!uds) target = absl::StrCat("127.0.0.1:", port);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  return std::unique_ptr<EchoSystem>(
      new BareEcho(std::move(server), std::move(service), std::move(channel)));
}

}  // namespace bench
}  // namespace ferry
