// The composition layer: a full ferry worker and client, as ferryd,
// ferryctl, ferry_bench and library users get them. A Worker is an RpcAgent
// with every layer above RPC plugged in; a Client is an RpcClient likewise.
//
//   ferry::Worker w({.rank = 1, .world_size = 2, .master = "10.0.0.1:29500"});
//   w.registry().Register("scale", …);
//   FERRY_RETURN_IF_ERROR(w.Start());
//   absl::StatusOr<Value> r = w.rpc().RpcSync("worker0", "add", {1, 2});
//   absl::StatusOr<RRef> ref = w.rrefs().Remote("worker0", "ones", {{2}});
//   absl::StatusOr<Tensor> sum = AllReduce(w.collectives().world(), grad);
//   w.Shutdown();
#ifndef FERRY_TOOLS_RUNTIME_WORKER_H_
#define FERRY_TOOLS_RUNTIME_WORKER_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "collectives/collective_context.h"
#include "rpc/agent.h"
#include "rpc/client.h"
#include "rref/rref_context.h"

namespace ferry {

// Everything a worker is configured with: the RPC agent's options plus
// those of each layer above it.
struct WorkerOptions : AgentOptions {
  RRefOptions rref;
  CollectiveConfig collectives;
};

struct ClientLayerOptions {
  RRefOptions rref;
};

class Worker {
 public:
  explicit Worker(WorkerOptions options);
  ~Worker();

  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  Registry& registry() { return agent_.registry(); }
  RpcAgent& rpc() { return agent_; }
  RRefContext& rrefs() { return *rrefs_; }
  // Process groups and the collectives' transport (collectives/collectives.h).
  CollectiveContext& collectives() { return *collectives_; }
  const std::string& name() const { return agent_.name(); }
  int rank() const { return agent_.rank(); }

  absl::StatusOr<std::string> Listen() { return agent_.Listen(); }
  absl::Status Start() { return agent_.Start(); }
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
};

class Client {
 public:
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      ClientOptions options, ClientLayerOptions layers = {});
  ~Client();

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  RpcClient& rpc() { return *rpc_; }
  RRefContext& rrefs() { return *rrefs_; }
  // Releases this client's RRefs, then leaves the job (see RpcClient).
  void Close(bool leave = true);

 private:
  Client(std::unique_ptr<RpcClient> rpc, ClientLayerOptions layers);
  std::unique_ptr<RpcClient> rpc_;
  std::shared_ptr<RRefContext> rrefs_;
};

}  // namespace ferry

#endif  // FERRY_TOOLS_RUNTIME_WORKER_H_
