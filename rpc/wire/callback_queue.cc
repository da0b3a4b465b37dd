#include "rpc/wire/callback_queue.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <mutex>

#include "absl/synchronization/notification.h"
#include "proto/worker.grpc.pb.h"

namespace ferry {
namespace {

// The channel whose reference on the queue lasts until exit. A global, so
// LeakSanitizer sees it is still reachable rather than leaked.
std::shared_ptr<grpc::Channel>* held_channel = nullptr;

}  // namespace

void HoldGrpcCallbackQueue() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Never destroyed: its reference on the queue lasts until exit. The
    // call goes to a unix socket nobody listens on, so it fails at once
    // and sends nothing anywhere.
    held_channel = new std::shared_ptr<grpc::Channel>(
        grpc::CreateChannel("unix:/nonexistent/ferry-callback-queue-holder",
                            grpc::InsecureChannelCredentials()));
    auto stub = proto::Worker::NewStub(*held_channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    proto::StatusRequest request;
    proto::WorkerStatus response;
    absl::Notification done;
    stub->async()->GetStatus(&context, &request, &response,
                             [&done](grpc::Status) { done.Notify(); });
    done.WaitForNotification();
  });
}

}  // namespace ferry
