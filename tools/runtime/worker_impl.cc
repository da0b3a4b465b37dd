#include "tools/runtime/worker_impl.h"

#include <utility>

#include "absl/time/clock.h"
#include "collectives/client/service.h"
#include "collectives/elastic/elastic.h"
#include "collectives/host/agent_host.h"
#include "rpc/auth/authenticator.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/store_budget.h"

namespace ferry {

namespace {

// Ends the store's waits as the agent stops, before its server does.
class StopsStore final : public AgentExtension {
 public:
  explicit StopsStore(StoreService* store) : store_(store) {}
  void Stop() override { store_->Stop(); }

 private:
  StoreService* const store_;
};

}  // namespace

WorkerImpl::WorkerImpl(WorkerConfig options)
    : agent_(static_cast<const AgentOptions&>(options)),
      rrefs_(RRefContext::ForWorker(&agent_, options.rref)),
      collectives_(CollectivesForAgent(&agent_, options.collectives)) {
  // A fixed, valid name that nothing else registers.
  RegisterCollectiveFunctions(collectives_).IgnoreError();
  RegisterElasticFunctions(collectives_).IgnoreError();
  if (options.rank == 0 && !options.membership_backend) {
    StoreLimits limits;
    limits.shares.job.waits = options.limits.max_held_calls;
    const Authenticator* authenticator = &agent_.authenticator();
    // Each call is charged to the node its credential proves.
    store_ = std::make_unique<StoreService>(
        limits, &agent_.timers(), options.limits,
        [authenticator](const grpc::ServerContextBase& call) {
          std::optional<uint64_t> node = authenticator->NodeOf(call);
          return StoreCaller{node, node.has_value() && IsWorkerNode(*node)};
        });
    store_stopper_ = std::make_unique<StopsStore>(store_.get());
    agent_.AddService(store_.get());
    agent_.AddExtension(store_stopper_.get());
  }
}

// The agent stops first, so no layer is called while being destroyed.
WorkerImpl::~WorkerImpl() { agent_.Stop(); }

absl::StatusOr<std::unique_ptr<ClientImpl>> ClientImpl::Connect(
    RpcClientOptions options, ClientLayers layers) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<RpcClient> rpc,
                         RpcClient::Connect(std::move(options)));
  return std::unique_ptr<ClientImpl>(new ClientImpl(std::move(rpc), layers));
}

ClientImpl::ClientImpl(std::unique_ptr<RpcClient> rpc, ClientLayers layers)
    : rpc_(std::move(rpc)),
      rrefs_(RRefContext::ForClient(rpc_.get(), layers.rref)) {}

ClientImpl::~ClientImpl() { Close(); }

void ClientImpl::Close(bool leave) {
  // Deliver the releases of RRefs already dropped before leaving.
  rrefs_->Drain(rrefs_->clock()->Now() + absl::Seconds(2)).IgnoreError();
  rrefs_->Stop();
  rpc_->Close(leave);
}

std::vector<std::string> WorkerNames(const Directory& directory) {
  std::vector<std::string> names;
  for (const WorkerInfo& w : directory.workers()) names.push_back(w.name);
  return names;
}

WorkerStatus WorkerStatusFromProto(const proto::WorkerStatus& p) {
  WorkerStatus s;
  s.name = p.name();
  s.rank = p.rank();
  s.address = p.address();
  s.pid = p.pid();
  s.state = p.state();
  s.uptime_ms = p.uptime_ms();
  s.inflight_incoming = p.inflight_incoming();
  s.inflight_outgoing = p.inflight_outgoing();
  s.calls_served = p.calls_served();
  s.functions = p.functions();
  s.dead_peers.assign(p.dead_peers().begin(), p.dead_peers().end());
  s.owned_rrefs = p.owned_rrefs();
  s.user_rrefs = p.user_rrefs();
  s.pending_forks = p.pending_forks();
  s.pending_deletes = p.pending_deletes();
  s.parked_requests = p.parked_requests();
  s.collectives_inflight = p.collectives_inflight();
  s.mailbox_bytes = p.mailbox_bytes();
  s.heap_bytes = p.heap_bytes();
  s.membership_lease_ms = p.membership_lease_ms();
  s.limits.insert(p.limits().begin(), p.limits().end());
  return s;
}

}  // namespace ferry
