// The composition layer behind the facade (tools/runtime/worker.h,
// client.h): a full worker is an RpcAgent with every layer above RPC
// plugged in; a full client is an RpcClient likewise. Inside the project
// only (ferryd, ferryctl, ferry_bench and tests reach the layers through
// it); users get ferry::Worker and ferry::Client.
//
//   WorkerImpl w(config);
//   FERRY_RETURN_IF_ERROR(w.Start());
//   absl::StatusOr<Value> r = w.rpc().RpcSync("worker0", "add", {1, 2});
//   absl::StatusOr<RRef> ref = w.rrefs().Remote("worker0", "ones", {{2}});
//   absl::StatusOr<Tensor> sum = AllReduce(w.collectives().world(), grad);
#ifndef FERRY_TOOLS_RUNTIME_WORKER_IMPL_H_
#define FERRY_TOOLS_RUNTIME_WORKER_IMPL_H_

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/op/collective_context.h"
#include "rpc/agent.h"
#include "rpc/client.h"
#include "rpc/membership/store_service.h"
#include "rref/rref_context.h"
#include "tools/runtime/status.h"

namespace ferry {

// Everything a worker is configured with: the RPC agent's options plus
// those of each layer above it.
struct WorkerConfig : AgentOptions {
  RRefOptions rref;
  CollectiveConfig collectives;
};

struct ClientLayers {
  RRefOptions rref;
};

class WorkerImpl {
 public:
  explicit WorkerImpl(WorkerConfig options);
  ~WorkerImpl();

  WorkerImpl(const WorkerImpl&) = delete;
  WorkerImpl& operator=(const WorkerImpl&) = delete;

  Registry& registry() { return agent_.registry(); }
  RpcAgent& rpc() { return agent_; }
  RRefContext& rrefs() { return *rrefs_; }
  // Process groups and the collectives' transport (collectives/collectives.h).
  CollectiveContext& collectives() { return *collectives_; }
  const std::string& name() const { return agent_.name(); }
  int rank() const { return agent_.rank(); }

  // An error found while configuring (e.g. unreadable security files) that
  // Listen() and Start() report instead of starting.
  void set_config_error(absl::Status error) {
    config_error_ = std::move(error);
  }
  absl::StatusOr<std::string> Listen() {
    if (!config_error_.ok()) return config_error_;
    return agent_.Listen();
  }
  absl::Status Start() {
    if (!config_error_.ok()) return config_error_;
    return agent_.Start();
  }
  absl::Status Shutdown(std::optional<absl::Duration> timeout = std::nullopt) {
    return agent_.Shutdown(timeout);
  }
  absl::Status Leave() { return agent_.Leave(); }
  void Stop() { agent_.Stop(); }

 private:
  // Declared first, destroyed last: the layers plug into the agent.
  RpcAgent agent_;
  std::shared_ptr<RRefContext> rrefs_;
  std::shared_ptr<CollectiveContext> collectives_;
  // The job's key-value store (torch's Store): on the embedded master only.
  std::unique_ptr<StoreService> store_;
  std::unique_ptr<AgentExtension> store_stopper_;
  absl::Status config_error_;
};

class ClientImpl {
 public:
  static absl::StatusOr<std::unique_ptr<ClientImpl>> Connect(
      RpcClientOptions options, ClientLayers layers = {});
  ~ClientImpl();

  ClientImpl(const ClientImpl&) = delete;
  ClientImpl& operator=(const ClientImpl&) = delete;

  RpcClient& rpc() { return *rpc_; }
  RRefContext& rrefs() { return *rrefs_; }
  // Releases this client's RRefs, then leaves the job (see RpcClient).
  void Close(bool leave = true);

 private:
  ClientImpl(std::unique_ptr<RpcClient> rpc, ClientLayers layers);
  std::unique_ptr<RpcClient> rpc_;
  std::shared_ptr<RRefContext> rrefs_;
};

// The facade's way in, for code inside the project (defined with the
// facade: tools/runtime/worker.cc, client.cc).
class Worker;
class Client;
WorkerImpl& Impl(Worker& worker);
ClientImpl& Impl(Client& client);

// The workers' names, by rank.
std::vector<std::string> WorkerNames(const Directory& directory);
WorkerStatus WorkerStatusFromProto(const proto::WorkerStatus& status);

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_WORKER_IMPL_H_
