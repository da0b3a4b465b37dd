#include "tools/runtime/worker.h"

#include <utility>

#include "rpc/status_util.h"

namespace ferry {

Worker::Worker(WorkerOptions options) : agent_(std::move(options)) {}

Worker::~Worker() { agent_.Stop(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(ClientOptions options) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> rpc,
                         RpcClient::Connect(std::move(options)));
  return std::unique_ptr<Client>(new Client(std::move(rpc)));
}

Client::Client(std::unique_ptr<RpcClient> rpc) : rpc_(std::move(rpc)) {}

Client::~Client() { rpc_->Close(); }

}  // namespace ferry
