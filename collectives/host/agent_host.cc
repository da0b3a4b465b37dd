#include "collectives/host/agent_host.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/op/collective_host.h"
#include "collectives/recorder/flight_dumps.h"
#include "collectives/transport/exchange.h"

namespace ferry {
namespace {

// Also the agent's extension for the collectives: stops them with the
// agent and reports them in its status. The context owns its host, so the
// host's pointer to the context never dangles; the agent keeps the
// extension as it kept the context before, for as long as the worker holds
// the context (worker_impl.h).
class AgentHost final : public CollectiveHost, public AgentExtension {
 public:
  explicit AgentHost(RpcAgent* agent) : agent_(agent) {}

  void Serve(CollectiveContext* context) {
    context_ = context;
    agent_->AddExtension(this);
  }
  void Stop() override { context_->Stop(); }
  void FillStatus(proto::WorkerStatus* status) const override {
    context_->FillStatus(status);
  }

  const std::string& name() const override { return agent_->name(); }
  int rank() const override { return agent_->rank(); }
  int world_size() const override { return agent_->world_size(); }
  const Directory& directory() const override { return agent_->directory(); }
  std::optional<absl::Status> DownReason(int rank) const override {
    return agent_->membership().DownReason(WorkerNode(rank));
  }
  Timers& timers() override { return agent_->timers(); }
  absl::Status Submit(Executor::Task task) override {
    return agent_->executor().TrySubmit(std::move(task));
  }
  const Limits& limits() const override { return agent_->limits(); }
  absl::Duration default_timeout() const override {
    return agent_->default_timeout();
  }
  Metrics* metrics() override { return agent_->metrics(); }
  bool tracing() const override { return agent_->tracing(); }
  Tracer* tracer() override { return agent_->tracer(); }
  void Record(MembershipEvent event) override {
    agent_->events().Record(std::move(event));
  }
  Future<Value> Call(int rank, const std::string& function,
                     std::vector<Value> args,
                     std::optional<absl::Duration> timeout) override {
    return agent_->RpcAsync(absl::StrCat(rank), function, std::move(args),
                            {.timeout = timeout});
  }
  Registry& registry() override { return agent_->registry(); }
  absl::StatusOr<std::unique_ptr<KeyValueStore>> OpenStore() override {
    return agent_->membership_backend().OpenStore();
  }
  std::unique_ptr<CollectiveTransport> OpenTransport(
      Mailbox* mailbox, const CollectiveConfig& config) override {
    auto exchange = std::make_unique<Exchange>(
        agent_->rank(), &agent_->directory(), &agent_->channels(),
        &agent_->membership(), mailbox, &agent_->timers(),
        Exchange::Options{.chunk_bytes = config.chunk_bytes,
                          .standing_bytes = config.standing_bytes,
                          .world_size = agent_->world_size(),
                          .ttl_ms = agent_->limits().mailbox_ttl_ms,
                          .authenticator = &agent_->authenticator(),
                          .open_streams = agent_->open_streams()});
    agent_->SetGenericService(exchange.get());
    return exchange;
  }

 private:
  RpcAgent* const agent_;
  CollectiveContext* context_ = nullptr;  // Set by Serve, before Start.
};

}  // namespace

std::shared_ptr<CollectiveContext> CollectivesForAgent(
    RpcAgent* agent, CollectiveConfig config) {
  auto owned = std::make_unique<AgentHost>(agent);
  AgentHost* host = owned.get();
  std::shared_ptr<CollectiveContext> context =
      CollectiveContext::Create(std::move(owned), config);
  host->Serve(context.get());
  std::weak_ptr<CollectiveContext> weak = context;
  agent->membership().AddListener(
      [weak](uint64_t node, const absl::Status& reason) {
        if (auto c = weak.lock()) c->NodeDown(node, reason);
      });
  // Fixed, valid names, registered once per worker.
  context->RegisterFunctions().IgnoreError();
  if (!config.dump_dir.empty()) {
    context->WriteDumpsWith(std::make_shared<FlightDumps>(
        config.dump_dir, agent->rank(), &agent->executor(),
        [weak](const std::string& reason) {
          auto c = weak.lock();
          return c == nullptr ? Value() : c->FlightDump(reason);
        }));
  }
  return context;
}

}  // namespace ferry
