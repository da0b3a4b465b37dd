#include "tools/runtime/worker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "tools/runtime/rendezvous.h"
#include "tools/runtime/worker_impl.h"

namespace ferry {

namespace {

// The facade's options are a user's; the layers' configuration holds more
// (and the loaded Security, whose errors Start() reports).
WorkerConfig ToConfig(WorkerOptions o, absl::Status* security_error) {
  WorkerConfig c;
  c.name = std::move(o.name);
  c.rank = o.rank;
  c.world_size = o.world_size;
  c.master = std::move(o.master);
  c.listen = std::move(o.listen);
  c.default_timeout = o.default_timeout;
  c.startup_timeout = o.startup_timeout;
  c.shutdown_timeout = o.shutdown_timeout;
  c.heartbeat_timeout = o.heartbeat_timeout;
  c.executor_threads = o.executor_threads;
  c.limits = o.limits;
  c.channels.max_message_bytes = static_cast<int>(
      std::min<int64_t>(o.limits.max_message_bytes, INT32_MAX));
  c.local_socket = o.local_socket;
  c.channels.use_shared_memory = o.shared_memory;
  c.on_event = std::move(o.on_event);
  c.rref.lease = o.rref_lease;
  c.rref.max_live_rrefs = o.max_rrefs;
  c.collectives = o.collectives;
  c.telemetry = o.telemetry;
  absl::StatusOr<std::shared_ptr<const Security>> security =
      Security::Load(o.security);
  if (security.ok()) {
    c.security = *std::move(security);
  } else {
    *security_error = security.status();
  }
  absl::StatusOr<BackendFactory> backend =
      BackendFactoryFor({.url = o.rendezvous,
                         .etcd_ca_file = o.etcd_ca_file,
                         .etcd_cert_file = o.etcd_cert_file,
                         .etcd_key_file = o.etcd_key_file,
                         .etcd_user = o.etcd_user,
                         .etcd_password_file = o.etcd_password_file,
                         .ttl = o.heartbeat_timeout,
                         .connect_timeout = o.startup_timeout});
  if (backend.ok()) {
    c.membership_backend = *std::move(backend);
  } else if (security_error->ok()) {
    *security_error = backend.status();
  }
  return c;
}

}  // namespace

WorkerImpl& Impl(Worker& worker) { return *worker.impl_; }

Worker::Worker(WorkerOptions options) {
  absl::Status security_error;
  impl_ = std::make_unique<WorkerImpl>(
      ToConfig(std::move(options), &security_error));
  impl_->set_config_error(std::move(security_error));
}

Worker::~Worker() = default;

Registry& Worker::registry() { return impl_->registry(); }

absl::Status Worker::RegisterAsync(std::string name, AsyncFunction fn,
                                   std::string signature,
                                   FunctionOptions options) {
  return registry().RegisterAsync(std::move(name), std::move(fn),
                                  std::move(signature), std::move(options));
}

absl::Status Worker::Start() { return impl_->Start(); }
absl::StatusOr<std::string> Worker::Listen() { return impl_->Listen(); }

const std::string& Worker::name() const { return impl_->name(); }
int Worker::rank() const { return impl_->rank(); }
int Worker::world_size() const { return impl_->rpc().world_size(); }
const std::string& Worker::address() const { return impl_->rpc().address(); }
const std::string& Worker::master_address() const {
  return impl_->rpc().master_address();
}
std::vector<std::string> Worker::workers() const {
  return WorkerNames(impl_->rpc().directory());
}

Future<Value> Worker::RpcAsync(const std::string& to, const std::string& fn,
                               std::vector<Value> args,
                               std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcAsync(to, fn, std::move(args), {.timeout = timeout});
}

absl::StatusOr<Value> Worker::RpcSync(const std::string& to,
                                      const std::string& fn,
                                      std::vector<Value> args,
                                      std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcSync(to, fn, std::move(args), {.timeout = timeout});
}

absl::StatusOr<RRef> Worker::Remote(const std::string& to,
                                    const std::string& fn,
                                    std::vector<Value> args,
                                    std::optional<absl::Duration> timeout) {
  return impl_->rrefs().Remote(to, fn, std::move(args), timeout);
}

Future<Value> Worker::RpcAsync(const std::string& to, const std::string& fn,
                               std::vector<Value> args, Value::Map kwargs,
                               std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcAsync(
      to, fn, std::move(args),
      {.timeout = timeout, .kwargs = std::move(kwargs)});
}

absl::StatusOr<Value> Worker::RpcSync(const std::string& to,
                                      const std::string& fn,
                                      std::vector<Value> args,
                                      Value::Map kwargs,
                                      std::optional<absl::Duration> timeout) {
  return impl_->rpc().RpcSync(
      to, fn, std::move(args),
      {.timeout = timeout, .kwargs = std::move(kwargs)});
}

absl::StatusOr<RRef> Worker::Remote(const std::string& to,
                                    const std::string& fn,
                                    std::vector<Value> args, Value::Map kwargs,
                                    std::optional<absl::Duration> timeout) {
  return impl_->rrefs().Remote(to, fn, std::move(args), timeout,
                               std::move(kwargs));
}

absl::StatusOr<RRef> Worker::Wrap(Value value) {
  return impl_->rrefs().Wrap(std::move(value));
}

ProcessGroup& Worker::world() { return impl_->collectives().world(); }

absl::StatusOr<std::shared_ptr<ProcessGroup>> Worker::NewGroup(
    std::vector<int> ranks) {
  return impl_->collectives().NewGroup(std::move(ranks));
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> Worker::InstanceGroup(
    std::vector<int> ranks, uint64_t instance) {
  // Numbers from 2^62 up: above NewGroup's counts and Shrink's agreement
  // numbers (2^40 to 2^41), so no other group shares the name.
  constexpr uint64_t kBase = uint64_t{1} << 62;
  if (instance >= kBase) {
    return absl::InvalidArgumentError(absl::StrCat(
        "group instance ", instance, " out of range (0 to 2^62 - 1)"));
  }
  return impl_->collectives().NamedGroup(std::move(ranks), kBase + instance,
                                         /*pinned=*/true);
}

WorkerStatus Worker::status() const {
  return WorkerStatusFromProto(impl_->rpc().Status());
}

int64_t Worker::OnMembershipChange(
    std::function<void(const MembershipEvent&)> fn) {
  return impl_->rpc().events().Subscribe(std::move(fn));
}

void Worker::RemoveMembershipListener(int64_t id) {
  impl_->rpc().events().Unsubscribe(id);
}

absl::Status Worker::Shutdown(std::optional<absl::Duration> timeout) {
  return impl_->Shutdown(timeout);
}
absl::Status Worker::Leave() { return impl_->Leave(); }
void Worker::Stop() { impl_->Stop(); }
bool Worker::WaitStopped(absl::Duration timeout) {
  return impl_->rpc().WaitStopped(timeout);
}

}  // namespace ferry
