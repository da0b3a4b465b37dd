#include "tools/runtime/worker.h"

#include <utility>

#include "absl/time/clock.h"
#include "collectives/service.h"
#include "rpc/base/status_util.h"

namespace ferry {

Worker::Worker(WorkerOptions options)
    : agent_(static_cast<const AgentOptions&>(options)),
      rrefs_(RRefContext::ForWorker(&agent_, options.rref)),
      collectives_(CollectiveContext::ForWorker(&agent_, options.collectives)) {
  // A fixed, valid name that nothing else registers.
  RegisterCollectiveFunctions(collectives_).IgnoreError();
}

// The agent stops first, so no layer is called while being destroyed.
Worker::~Worker() { agent_.Stop(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    ClientOptions options, ClientLayerOptions layers) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> rpc,
                         RpcClient::Connect(std::move(options)));
  return std::unique_ptr<Client>(new Client(std::move(rpc), layers));
}

Client::Client(std::unique_ptr<RpcClient> rpc, ClientLayerOptions layers)
    : rpc_(std::move(rpc)),
      rrefs_(RRefContext::ForClient(rpc_.get(), layers.rref)) {}

Client::~Client() { Close(); }

void Client::Close(bool leave) {
  // Deliver the releases of RRefs already dropped before leaving.
  rrefs_->Drain(absl::Now() + absl::Seconds(2)).IgnoreError();
  rrefs_->Stop();
  rpc_->Close(leave);
}

}  // namespace ferry
