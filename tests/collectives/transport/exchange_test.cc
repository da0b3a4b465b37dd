// Exchange (collectives/transport/exchange.h) sending to a peer that takes
// a message and answers nothing: a process that received its last message
// and exited before answering, as its sender sees it. The send completes
// if the receiver's process is gone (as gloo's completes once written), and
// fails with the stream's end if it lives; on the standing stream and on a
// message's own stream.
#include "collectives/transport/exchange.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "collectives/transport/mailbox.h"
#include "gmock/gmock.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "rpc/auth/security.h"
#include "rpc/base/clock.h"
#include "rpc/base/limits.h"
#include "rpc/base/timers.h"
#include "rpc/channels.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/listener_probe.h"
#include "rpc/membership/membership.h"
#include "tests/testing/status_matchers.h"

namespace ferry {
namespace {

using ::ferry::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr absl::Duration kBound = absl::Seconds(20);

// Reads every frame of every stream and answers none. With
// `break_after_frame`, ends each stream after its first frame
// (UNAVAILABLE, as a broken connection does); otherwise its streams end
// when the server shuts down.
class SilentReceiver final : public grpc::CallbackGenericService {
 public:
  explicit SilentReceiver(bool break_after_frame)
      : break_after_frame_(break_after_frame) {}

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* /*context*/) override {
    return new Reader(this);
  }

  // Whether a frame came within the bound.
  bool FrameCame() {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](int* n) { return *n > 0; }, &frames_),
                                kBound);
  }

 private:
  class Reader final : public grpc::ServerGenericBidiReactor {
   public:
    explicit Reader(SilentReceiver* receiver) : receiver_(receiver) {
      StartRead(&frame_);
    }
    void OnReadDone(bool ok) override {
      if (!ok) return Finish(grpc::Status::OK);
      {
        absl::MutexLock lock(&receiver_->mu_);
        ++receiver_->frames_;
      }
      if (receiver_->break_after_frame_) {
        return Finish(
            grpc::Status(grpc::StatusCode::UNAVAILABLE, "Socket closed"));
      }
      StartRead(&frame_);
    }
    void OnDone() override { delete this; }

   private:
    SilentReceiver* const receiver_;
    grpc::ByteBuffer frame_;
  };

  const bool break_after_frame_;
  absl::Mutex mu_;
  int frames_ ABSL_GUARDED_BY(mu_) = 0;
};

// Answers what the test says, and records who was asked about.
class FakeProbe final : public ListenerProbe {
 public:
  explicit FakeProbe(Listener answer) : answer_(answer) {}
  void Probe(const std::string& address, Done done) override {
    {
      absl::MutexLock lock(&mu_);
      asked_.push_back(address);
    }
    std::move(done)(answer_);
  }
  std::vector<std::string> asked() {
    absl::MutexLock lock(&mu_);
    return asked_;
  }

 private:
  const Listener answer_;
  absl::Mutex mu_;
  std::vector<std::string> asked_ ABSL_GUARDED_BY(mu_);
};

class ExchangeTest : public ::testing::Test {
 protected:
  // Serves the silent receiver as rank 1; rank 0 (this test) sends to it.
  void Serve(bool break_after_frame) {
    receiver_ = std::make_unique<SilentReceiver>(break_after_frame);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterCallbackGenericService(receiver_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
    directory_ =
        Directory({{.name = "worker0", .rank = 0},
                   {.name = "worker1", .rank = 1, .address = address_}});
  }

  // Sends one small message to rank 1 (on the standing stream unless
  // `own_stream`), probing with `probe` (null: the real one).
  std::unique_ptr<Exchange> MakeExchange(ListenerProbe* probe,
                                         bool own_stream) {
    Exchange::Options options;
    options.world_size = 2;
    if (own_stream) options.standing_bytes = 0;
    options.probe = probe;
    return std::make_unique<Exchange>(0, &directory_, &channels_, &membership_,
                                      &mailbox_, &timers_, options);
  }

  absl::StatusOr<Done> SendOne(Exchange& exchange) {
    return exchange
        .Send(1, {"world/t", 0, 0}, Value(int64_t{7}),
              timers_.clock()->Now() + kBound, TraceContext())
        .Wait(kBound + absl::Seconds(5));
  }

  ThreadTimers timers_;
  Membership membership_;
  Mailbox mailbox_{Limits(), Clock::Real()};
  ChannelPool channels_{Security::Insecure(), ChannelOptions()};
  Directory directory_;
  std::unique_ptr<SilentReceiver> receiver_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

TEST_F(ExchangeTest, AWrittenMessageIsSentIfItsReceiversProcessIsGone) {
  for (bool own_stream : {false, true}) {
    SCOPED_TRACE(own_stream ? "own stream" : "standing stream");
    Serve(/*break_after_frame=*/true);
    FakeProbe gone(Listener::kRefused);
    std::unique_ptr<Exchange> exchange = MakeExchange(&gone, own_stream);
    EXPECT_OK(SendOne(*exchange));
    EXPECT_THAT(gone.asked(), ElementsAre(address_));
    exchange.reset();
    server_->Shutdown();
  }
}

TEST_F(ExchangeTest, AWrittenMessageFailsIfItsReceiverLives) {
  for (Listener answer : {Listener::kListening, Listener::kUnknown}) {
    for (bool own_stream : {false, true}) {
      SCOPED_TRACE(own_stream ? "own stream" : "standing stream");
      Serve(/*break_after_frame=*/true);
      FakeProbe lives(answer);
      std::unique_ptr<Exchange> exchange = MakeExchange(&lives, own_stream);
      EXPECT_THAT(
          SendOne(*exchange).status(),
          StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Socket closed")));
      EXPECT_THAT(lives.asked(), ElementsAre(address_));
      exchange.reset();
      server_->Shutdown();
    }
  }
}

// With the real probe: the receiver took the frame and its server went
// away (its port closed, as when its process exits): the send completes.
TEST_F(ExchangeTest, AReceiverThatTookTheMessageAndLeftIsAsked) {
  Serve(/*break_after_frame=*/false);
  std::unique_ptr<Exchange> exchange =
      MakeExchange(/*probe=*/nullptr, /*own_stream=*/false);
  Future<Done> sent =
      exchange->Send(1, {"world/t", 0, 0}, Value(int64_t{7}),
                     timers_.clock()->Now() + kBound, TraceContext());
  ASSERT_TRUE(receiver_->FrameCame());
  // Now: its stream is cancelled, not waited for.
  server_->Shutdown(std::chrono::system_clock::now());
  server_.reset();
  EXPECT_OK(sent.Wait(kBound + absl::Seconds(5)));
}

}  // namespace
}  // namespace ferry
