#include "rref/rref_context.h"

#include <algorithm>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "rpc/base/peer_text.h"
#include "rpc/base/status_util.h"
#include "rpc/value/rref_base.h"
#include "rref/fork_codec.h"
#include "rref/lease_chunks.h"
#include "rref/owner_client.h"
#include "rref/owner_requests.h"
#include "rref/rref_service.h"

namespace ferry {

namespace {

// The shortest owner lease we follow (renewing every quarter of it).
constexpr int64_t kMinLearnedLeaseMs = 100;

}  // namespace

namespace {

// Where a context's local ids start: random in [1, 2^62). A worker's node
// id is its rank, so a replacement of a rank names its RRefs and copies
// with the same node as the incarnation before it, while owners still
// keep that one's tombstones and forks (up to a minute): counting from 1
// again, its first ids would be refused as freed, or taken for the old
// one's. From a random start, two incarnations' ranges meet with odds of
// about (ids used) / 2^62; no wire change, and 2^62 ids before it wraps.
uint64_t RandomIdBase() {
  absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen, 1, uint64_t{1} << 62);
}

}  // namespace

RRefContext::RRefContext(Host host, RRefOptions options)
    : host_(std::move(host)), options_(options), counter_(RandomIdBase()) {
  owners_ = host_.owners != nullptr ? host_.owners
                                    : std::make_shared<OwnerClient>(
                                          host_.channels, host_.membership,
                                          host_.timers, host_.directory);
}

RRefContext::~RRefContext() { Stop(); }

std::shared_ptr<RRefContext> RRefContext::ForWorker(RpcAgent* agent,
                                                    RRefOptions options) {
  Host h;
  h.node = WorkerNode(agent->rank());
  h.rank = agent->rank();
  h.name = agent->name();
  h.directory = &agent->directory();
  h.channels = &agent->channels();
  h.membership = &agent->membership();
  h.timers = &agent->timers();
  h.caller = &agent->caller();
  h.registry = &agent->registry();
  h.authenticator = &agent->authenticator();
  h.limits = agent->limits();
  h.default_timeout = agent->default_timeout();
  h.log = [agent](absl::string_view e, absl::string_view d) {
    agent->ReportEvent(e, d);
  };
  std::shared_ptr<RRefContext> context = ForOwner(std::move(h), options);
  agent->AddService(context->bounded_service());
  agent->AddExtension(context.get());
  agent->SetCodecs(context.get());
  agent->SetRemoteHandler(context.get());
  absl::Status s = context->RegisterBuiltins(&agent->registry());
  (void)s;  // Fixed, valid, unique names.
  return context;
}

std::shared_ptr<RRefContext> RRefContext::ForOwner(Host host,
                                                   RRefOptions options) {
  auto context = std::make_shared<RRefContext>(std::move(host), options);
  OwnerOptions owner;
  owner.lease = options.lease;
  owner.max_forks_per_holder = options.max_live_rrefs;
  // Late requests for a freed id come within a lease or two.
  owner.tombstone_ttl = 2 * options.lease;
  owner.early_delete_ttl = 2 * options.lease;
  owner.max_value_bytes_per_creator =
      context->host_.limits.max_rref_bytes_per_peer;
  owner.max_value_bytes = context->host_.limits.max_rref_bytes;
  std::weak_ptr<RRefContext> weak = context;
  context->owner_table_ = std::make_unique<OwnerTable>(
      context->host_.node, context->clock(), owner, [weak](uint64_t node) {
        auto c = weak.lock();
        return c ? c->NodeName(node) : absl::StrCat("node ", node);
      });
  context->service_ = std::make_unique<RRefService>(context.get());
  context->Attach();
  return context;
}

std::shared_ptr<RRefContext> RRefContext::ForClient(RpcClient* client,
                                                    RRefOptions options) {
  Host h;
  h.node = client->node();
  h.name = client->name();
  h.directory = &client->directory();
  h.channels = &client->channels();
  h.membership = &client->membership();
  h.timers = &client->timers();
  h.caller = &client->caller();
  h.default_timeout = client->default_timeout();
  std::shared_ptr<RRefContext> context = ForUser(std::move(h), options);
  client->caller().SetCodecs(context.get());
  return context;
}

std::shared_ptr<RRefContext> RRefContext::ForUser(Host host,
                                                  RRefOptions options) {
  auto context = std::make_shared<RRefContext>(std::move(host), options);
  context->Attach();
  return context;
}

grpc::Service* RRefContext::service() { return service_.get(); }
BoundedServiceBase* RRefContext::bounded_service() { return service_.get(); }

void RRefContext::Attach() {
  std::weak_ptr<RRefContext> weak = weak_from_this();
  host_.membership->AddListener([weak](uint64_t node, const absl::Status&) {
    if (auto c = weak.lock()) c->OnNodeDown(node);
  });
  absl::MutexLock lock(&mu_);
  lease_timer_ = host_.timers->RunAfter(RenewPeriod(), [weak] {
    if (auto c = weak.lock()) c->RenewLeases();
  });
  if (owner_table_ != nullptr) {
    sweep_timer_ = host_.timers->RunAfter(options_.lease / 8, [weak] {
      if (auto c = weak.lock()) c->SweepOwned();
    });
  }
}

void RRefContext::OnNodeDown(uint64_t node) {
  // A gone holder's copies go at once; calls to a gone owner fail now.
  if (owner_table_ != nullptr) owner_table_->DropHolder(node);
  owners_->FailNode(
      node, absl::UnavailableError(absl::StrCat(NodeName(node), " is gone")));
  if (IsWorkerNode(node)) ForgetOwner(static_cast<int>(node));
}

void RRefContext::ForgetOwner(int owner) {
  // Its values are gone with it: nothing to renew, release or vouch for
  // there any more, and a replacement numbers its epochs afresh.
  absl::MutexLock lock(&mu_);
  absl::erase_if(held_,
                 [owner](const auto& e) { return e.second.owner == owner; });
  absl::erase_if(in_transit_,
                 [owner](const auto& e) { return e.second.owner == owner; });
  owner_epoch_.erase(owner);
}

std::string RRefContext::NodeName(uint64_t node) const {
  if (IsWorkerNode(node) &&
      static_cast<int>(node) < host_.directory->world_size()) {
    return host_.directory->at(static_cast<int>(node)).name;
  }
  return absl::StrCat("client", node - kFirstClientNode);
}

absl::Status RRefContext::CheckHandle(const proto::RRefHandle& h) const {
  const int world = host_.directory->world_size();
  const std::string id = GlobalIdString({h.rref_creator(), h.rref_local()});
  if (h.owner_rank() < 0 || h.owner_rank() >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rref ", id, ": owner rank ", h.owner_rank(),
                     " is not a worker of this job (world size ", world, ")"));
  }
  const std::string& owner = host_.directory->at(h.owner_rank()).name;
  if (h.owner() != owner) {
    return absl::InvalidArgumentError(
        absl::StrCat("rref ", id, ": owner '", h.owner(), "' is not rank ",
                     h.owner_rank(), " (", owner, ")"));
  }
  for (uint64_t node : {h.rref_creator(), h.fork_creator()}) {
    if (IsWorkerNode(node) && node >= static_cast<uint64_t>(world)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rref ", id, ": created by node ", node,
                       ", which is neither a worker of this job nor a client"));
    }
  }
  return absl::OkStatus();
}

absl::Duration RRefContext::Timeout(std::optional<absl::Duration> t) const {
  absl::Duration d = t.value_or(host_.default_timeout);
  return d == absl::ZeroDuration() ? absl::InfiniteDuration() : d;
}

// ---- Copies held here ----

absl::StatusOr<std::shared_ptr<const RRefState>> RRefContext::Adopt(
    RRefDescriptor descriptor, Future<Done> created) {
  if (!owns(descriptor.owner_rank)) {
    absl::MutexLock lock(&mu_);
    if (static_cast<int64_t>(held_.size()) >= options_.max_live_rrefs) {
      return absl::ResourceExhaustedError(
          absl::StrCat(host_.name, " holds ", held_.size(), " rrefs (limit ",
                       options_.max_live_rrefs, "); release some first"));
    }
    held_[descriptor.fork_id] = Held{descriptor.rref_id, descriptor.owner_rank};
  }
  // The owner's incarnation now: a replacement of it never has the value.
  const uint64_t generation =
      host_.directory->at(descriptor.owner_rank).generation;
  return std::make_shared<const RRefState>(
      std::move(descriptor), weak_from_this(), std::move(created), generation);
}

std::optional<absl::Status> RRefContext::OwnerGone(
    const RRefState& rref) const {
  const RRefDescriptor& d = rref.descriptor();
  if (auto down = host_.membership->DownReason(WorkerNode(d.owner_rank))) {
    return absl::UnavailableError(
        absl::StrCat("owner ", d.owner, " died (", down->message(), ")"));
  }
  // Only the value's own incarnation had it (the owner-died rule).
  if (host_.directory->at(d.owner_rank).generation != rref.owner_generation()) {
    return absl::UnavailableError(absl::StrCat(
        "owner ", d.owner, " died (a new incarnation holds its rank now)"));
  }
  return std::nullopt;
}

void RRefContext::Released(const RRefDescriptor& d) {
  if (owns(d.owner_rank)) {
    owner_table_->DeleteFork(d.rref_id, d.fork_id, /*only_unconfirmed=*/false);
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    // Not held any more: its owner died, and took the value with it.
    if (held_.erase(d.fork_id) == 0) return;
    if (stopped_) return;
  }
  owners_->Delete(d.owner_rank,
                  ForkRequestFor(d.rref_id, d.fork_id, host_.node));
}

uint64_t RRefContext::NextLeaseRound() const {
  absl::MutexLock lock(&mu_);
  return lease_round_ + 1;
}

void RRefContext::BeginTransit(GlobalId rref, GlobalId fork, int owner) {
  absl::MutexLock lock(&mu_);
  in_transit_[fork] = Held{rref, owner};
}

void RRefContext::EndTransit(GlobalId fork) {
  absl::MutexLock lock(&mu_);
  in_transit_.erase(fork);
}

void RRefContext::SetOwnerHookForTesting(OwnerHook hook) {
  absl::MutexLock lock(&mu_);
  owner_hook_ = std::move(hook);
}

RRefContext::OwnerHook RRefContext::owner_hook() const {
  absl::MutexLock lock(&mu_);
  return owner_hook_;
}

bool RRefContext::IsOwner(const RRefState& rref) const {
  return owns(rref.descriptor().owner_rank);
}

RRefContext::LeaseSnapshot RRefContext::SnapshotLeases() {
  // One snapshot, one round: a copy adopted before it is listed in it (see
  // NextLeaseRound).
  LeaseSnapshot snap;
  absl::MutexLock lock(&mu_);
  if (stopped_) return snap;
  snap.round = ++lease_round_;
  for (const auto& [fork, held] : held_) {
    snap.by_owner[held.owner].held.emplace_back(held.rref, fork);
  }
  for (const auto& [fork, sent] : in_transit_) {
    if (owns(sent.owner)) {
      snap.own_sends.emplace_back(sent.rref, fork);
    } else {
      snap.by_owner[sent.owner].in_transit.emplace_back(sent.rref, fork);
    }
  }
  for (auto& [owner, listing] : snap.by_owner) {
    auto e = owner_epoch_.find(owner);
    if (e != owner_epoch_.end()) listing.epoch = e->second;
  }
  return snap;
}

void RRefContext::SendRenewal(int owner, uint64_t round,
                              const OwnerListing& listing) {
  // A missed renewal is retried at the next period, well within the lease;
  // a round with a missed chunk just does not reconcile. Owners may have
  // shorter leases than ours: learn theirs.
  std::weak_ptr<RRefContext> weak = weak_from_this();
  for (proto::LeaseRequest& request :
       ChunkLease(host_.node, round, listing.epoch, listing.held,
                  listing.in_transit, options_.lease_chunk_handles)) {
    owners_->RenewLease(owner, std::move(request), RenewPeriod())
        .Then([weak, owner](const absl::StatusOr<LeaseAnswer>& answer) {
          auto c = weak.lock();
          if (!c || !answer.ok()) return;
          if (answer->lease > absl::ZeroDuration())
            c->LearnLease(answer->lease);
          c->LearnEpoch(owner, answer->epoch);
        });
  }
}

void RRefContext::RenewLeases() {
  LeaseSnapshot snap = SnapshotLeases();
  if (snap.round == 0) return;  // Stopped.
  if (owner_table_ != nullptr && !snap.own_sends.empty()) {
    owner_table_->KeepInTransit(snap.own_sends);
  }
  for (const auto& [owner, listing] : snap.by_owner) {
    SendRenewal(owner, snap.round, listing);
  }
  std::weak_ptr<RRefContext> weak = weak_from_this();
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  lease_timer_ = host_.timers->RunAfter(RenewPeriod(), [weak] {
    if (auto c = weak.lock()) c->RenewLeases();
  });
}

void RRefContext::LearnEpoch(int owner, uint64_t epoch) {
  // Answers may come out of order: the epoch only grows.
  absl::MutexLock lock(&mu_);
  uint64_t& known = owner_epoch_[owner];
  known = std::max(known, epoch);
}

absl::Duration RRefContext::RenewPeriod() const {
  // Until an owner told us its lease, renew early enough for a short one.
  absl::Duration lease = absl::Milliseconds(learned_lease_ms_.load());
  if (lease <= absl::ZeroDuration()) {
    return std::min(options_.lease / 4, absl::Milliseconds(250));
  }
  return std::min(options_.lease, lease) / 4;
}

void RRefContext::LearnLease(absl::Duration lease) {
  // An owner's number sets our renewal period: bounded below, so a bad one
  // cannot make us renew in a tight loop.
  int64_t ms =
      std::max<int64_t>(absl::ToInt64Milliseconds(lease), kMinLearnedLeaseMs);
  int64_t known = learned_lease_ms_.load();
  while ((known <= 0 || ms < known) &&
         !learned_lease_ms_.compare_exchange_weak(known, ms)) {
  }
}

void RRefContext::SweepOwned() {
  owner_table_->Sweep();
  std::weak_ptr<RRefContext> weak = weak_from_this();
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  sweep_timer_ = host_.timers->RunAfter(options_.lease / 8, [weak] {
    if (auto c = weak.lock()) c->SweepOwned();
  });
}

// ---- Creating and using RRefs ----

absl::StatusOr<RRef> RRefContext::Remote(const std::string& to,
                                         const std::string& fn,
                                         std::vector<Value> args,
                                         std::optional<absl::Duration> timeout,
                                         Value::Map kwargs) {
  FERRY_ASSIGN_OR_RETURN(const WorkerInfo* owner, host_.directory->Resolve(to));
  RRefDescriptor d{NewId(), NewId(), owner->name, owner->rank};
  Promise<Done> created;
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<const RRefState> state,
                         Adopt(d, created.future()));
  host_.caller
      ->Send(*owner, fn, std::move(args), std::move(kwargs), Timeout(timeout),
             DescriptorToProto(d))
      .Then([created](const absl::StatusOr<Value>& r) {
        created.Set(r.ok() ? absl::StatusOr<Done>(Done()) : r.status());
      });
  return RRef(std::move(state));
}

absl::StatusOr<RRef> RRefContext::Wrap(Value value) {
  if (owner_table_ == nullptr) {
    return absl::FailedPreconditionError(
        "only workers own values; clients cannot");
  }
  RRefDescriptor d{NewId(), NewId(), host_.name, host_.rank};
  FERRY_RETURN_IF_ERROR(
      owner_table_->AddLocal(d.rref_id, d.fork_id, std::move(value)));
  FERRY_ASSIGN_OR_RETURN(std::shared_ptr<const RRefState> state,
                         Adopt(d, Future<Done>::Ready(Done())));
  return RRef(std::move(state));
}

Future<Value> RRefContext::ToHere(const std::shared_ptr<const RRefState>& rref,
                                  std::optional<absl::Duration> timeout) {
  const RRefDescriptor& d = rref->descriptor();
  const absl::Duration t = Timeout(timeout);
  // A dead owner is the answer, whatever else went wrong on the way.
  if (auto gone = OwnerGone(*rref)) return Future<Value>::Ready(*gone);
  Promise<Value> result;
  if (owns(d.owner_rank)) {
    auto self = shared_from_this();
    rref->created().Then(
        [self, rref, t, result](const absl::StatusOr<Done>& c) {
          if (!c.ok()) {
            result.Set(c.status());
            return;
          }
          const RRefDescriptor& d = rref->descriptor();
          self->owner_table_->Fetch(
              d.rref_id, d.fork_id, self->clock()->Now() + t,
              [result](absl::StatusOr<Value> v) { result.Set(std::move(v)); });
        });
    return result.future();
  }
  Future<Value> fetched = owners_->Fetch(
      d.owner_rank, ForkRequestFor(d.rref_id, d.fork_id, host_.node), t,
      std::shared_ptr<RRefCodec>(ForPeer(WorkerNode(d.owner_rank))));
  // The creation's own failure (e.g. its timeout) explains a failed fetch.
  Future<Done> created = rref->created();
  created.Then([result](const absl::StatusOr<Done>& c) {
    if (!c.ok()) result.Set(c.status());
  });
  // The copy must outlive the fetch: its release would overtake it.
  fetched.Then([result, created, rref](const absl::StatusOr<Value>& v) {
    if (v.ok()) {
      rref->MarkFetched();
      result.Set(v);
      return;
    }
    created.Then([result, v](const absl::StatusOr<Done>& c) {
      result.Set(c.ok() ? v.status() : c.status());
    });
  });
  return result.future();
}

absl::StatusOr<Value> RRefContext::LocalValue(const RRefState& rref) {
  const RRefDescriptor& d = rref.descriptor();
  if (!owns(d.owner_rank)) {
    return absl::FailedPreconditionError(
        absl::StrCat("LocalValue() works on the owner only: rref ",
                     GlobalIdString(d.rref_id), " is owned by ", d.owner,
                     ", this is ", host_.name));
  }
  Promise<Value> value;
  owner_table_->Fetch(
      d.rref_id, d.fork_id, clock()->Now() + host_.default_timeout,
      [value](absl::StatusOr<Value> v) { value.Set(std::move(v)); });
  return value.future().Wait(host_.default_timeout + absl::Seconds(1));
}

Future<Value> RRefContext::CallOnOwner(
    const std::shared_ptr<const RRefState>& rref, const std::string& fn,
    std::vector<Value> args, std::optional<absl::Duration> timeout) {
  const int owner_rank = rref->descriptor().owner_rank;
  if (owner_rank < 0 || owner_rank >= host_.directory->world_size()) {
    return Future<Value>::Ready(absl::InvalidArgumentError(
        absl::StrCat("rref owner rank ", owner_rank, " is not a worker")));
  }
  if (auto gone = OwnerGone(*rref)) return Future<Value>::Ready(*gone);
  const WorkerInfo& owner = host_.directory->at(owner_rank);
  return host_.caller->Send(owner, "ferry.rref_call",
                            {Value(Value::RRefPtr(rref)), Value(fn),
                             Value(Value::List(std::move(args)))},
                            {}, Timeout(timeout), std::nullopt);
}

absl::StatusOr<Value> RRefContext::RemoteOnOwner(
    const std::shared_ptr<const RRefState>& rref, const std::string& fn,
    std::vector<Value> args, std::optional<absl::Duration> timeout) {
  if (auto gone = OwnerGone(*rref)) return *gone;
  FERRY_ASSIGN_OR_RETURN(RRef r,
                         Remote(rref->descriptor().owner, "ferry.rref_call",
                                {Value(Value::RRefPtr(rref)), Value(fn),
                                 Value(Value::List(std::move(args)))},
                                timeout));
  return r.AsValue();
}

Future<std::vector<proto::OwnedRRef>> RRefContext::ListOwned(
    int worker, absl::Duration timeout) {
  return owners_->ListOwned(worker, timeout);
}

std::unique_ptr<RRefCodec> RRefContext::ForPeer(uint64_t peer) {
  return std::make_unique<ForkCodec>(shared_from_this(), peer);
}

// ---- remote() on this owner ----

absl::Status RRefContext::Begin(const proto::RRefHandle& rref,
                                uint64_t caller) {
  FERRY_RETURN_IF_ERROR(Annotate(CheckHandle(rref), "create_rref"));
  // `caller` is the call's proven caller_node: a node names only RRefs and
  // copies of its own making, so none can pre-create another's id.
  if (rref.rref_creator() != caller || rref.fork_creator() != caller) {
    return absl::PermissionDeniedError(absl::StrCat(
        "create_rref: ids ", rref.rref_creator(), ".", rref.rref_local(),
        " (copy ", rref.fork_creator(), ".", rref.fork_local(),
        ") are not the caller's own (node ", caller, ")"));
  }
  if (!owns(rref.owner_rank())) {
    return absl::InvalidArgumentError(
        absl::StrCat("create_rref: the rref would be owned by ", rref.owner(),
                     ", not ", host_.name));
  }
  return owner_table_->Create({rref.rref_creator(), rref.rref_local()},
                              {rref.fork_creator(), rref.fork_local()}, caller);
}

absl::Status RRefContext::Finish(const proto::RRefHandle& rref,
                                 absl::StatusOr<Value> result) {
  return owner_table_->Resolve({rref.rref_creator(), rref.rref_local()},
                               std::move(result));
}

void RRefContext::Abandon(const proto::RRefHandle& rref) {
  owner_table_->DeleteFork({rref.rref_creator(), rref.rref_local()},
                           {rref.fork_creator(), rref.fork_local()}, false);
}

// ---- Built-ins ----

absl::Status RRefContext::RegisterBuiltins(Registry* registry) {
  std::weak_ptr<RRefContext> weak = weak_from_this();
  FERRY_RETURN_IF_ERROR(registry->RegisterAsync(
      "to_here",
      [weak](const CallContext& ctx, std::vector<Value> args) -> Future<Value> {
        auto self = weak.lock();
        if (!self)
          return Future<Value>::Ready(absl::UnavailableError("stopping"));
        if (args.size() != 1) {
          return Future<Value>::Ready(absl::InvalidArgumentError(
              absl::StrCat("expected 1 argument, got ", args.size())));
        }
        absl::StatusOr<RRef> rref = RRef::FromValue(args[0]);
        if (!rref.ok())
          return Future<Value>::Ready(Annotate(rref.status(), "args[0]"));
        return rref->ToHereAsync(
            std::min(TimeLeft(*self->clock(), ctx.deadline),
                     self->host_.default_timeout));
      },
      "to_here(rref: rref) -> value",
      {.doc = "a copy of the value the rref refers to"}));
  return registry->RegisterAsync(
      "ferry.rref_call",
      [weak](const CallContext& ctx, std::vector<Value> args) -> Future<Value> {
        auto self = weak.lock();
        if (!self)
          return Future<Value>::Ready(absl::UnavailableError("stopping"));
        return self->InvokeOnValue(ctx, std::move(args));
      },
      "ferry.rref_call(rref: rref, fn: string, args: list) -> value",
      {.doc = "runs fn(value of rref, args...) on the rref's owner (proxies)"});
}

Future<Value> RRefContext::InvokeOnValue(const CallContext& ctx,
                                         std::vector<Value> args) {
  if (args.size() != 3 || !args[1].is_string() || !args[2].is_list()) {
    return Future<Value>::Ready(absl::InvalidArgumentError(
        "expected (rref, function name, argument list)"));
  }
  absl::StatusOr<RRef> rref = RRef::FromValue(args[0]);
  if (!rref.ok())
    return Future<Value>::Ready(Annotate(rref.status(), "args[0]"));
  if (!rref->IsOwner()) {
    return Future<Value>::Ready(absl::FailedPreconditionError(
        absl::StrCat("rref ", GlobalIdString(rref->id()), " is owned by ",
                     rref->owner_name(), ", not ", host_.name)));
  }
  std::shared_ptr<const RegisteredFunction> fn =
      host_.registry->Find(args[1].as_string());
  if (fn == nullptr) {
    return Future<Value>::Ready(absl::NotFoundError(
        absl::StrCat(EchoPeerText(args[1].as_string()), ": no such function")));
  }
  Promise<Value> result;
  std::string name = args[1].as_string();
  Value::List extra = std::move(args[2].as_list());
  CallContext inner = ctx;
  inner.function = name;
  rref->ToHereAsync(
          std::min(TimeLeft(*clock(), ctx.deadline), host_.default_timeout))
      .Then([result, fn, inner, extra,
             name](const absl::StatusOr<Value>& v) mutable {
        if (!v.ok()) {
          result.Set(v.status());
          return;
        }
        std::vector<Value> call_args;
        call_args.push_back(*v);
        for (Value& e : extra) call_args.push_back(std::move(e));
        InvokeFunction(*fn, inner, std::move(call_args))
            .Then([result, name](const absl::StatusOr<Value>& r) {
              result.Set(r.ok() ? r : Annotate(r.status(), name));
            });
      });
  return result.future();
}

// ---- Lifecycle ----

absl::Status RRefContext::Drain(absl::Time deadline) {
  absl::Status status;
  if (!owners_->WaitIdle(deadline)) {
    status = absl::DeadlineExceededError(
        absl::StrCat(owners_->pending(), " rref message(s) not delivered"));
  }
  if (owner_table_ != nullptr && host_.log) {
    OwnerStats s = owner_table_->stats();
    if (s.owned > 0) {
      std::string ids;
      for (const proto::OwnedRRef& r : owner_table_->List()) {
        absl::StrAppend(&ids, ids.empty() ? "" : " ", r.id(), "(",
                        r.forks_size(), " holder(s))");
      }
      host_.log("rref_leak_report",
                absl::StrCat(s.owned, " rref(s) still owned: ", ids));
    }
  }
  return status;
}

void RRefContext::Stop() {
  Timers::TimerId lease, sweep;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    lease = lease_timer_;
    sweep = sweep_timer_;
  }
  host_.timers->Cancel(lease);
  host_.timers->Cancel(sweep);
  owners_->Stop();
  if (owner_table_ != nullptr) {
    owner_table_->FailWaits(
        absl::UnavailableError(absl::StrCat(host_.name, " is stopping")));
  }
}

OwnerStats RRefContext::owner_stats() const {
  return owner_table_ != nullptr ? owner_table_->stats() : OwnerStats{};
}

int64_t RRefContext::live_user_rrefs() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size());
}

int64_t RRefContext::pending_messages() const { return owners_->pending(); }

void RRefContext::FillStatus(proto::WorkerStatus* status) const {
  OwnerStats s = owner_stats();
  status->set_owned_rrefs(s.owned);
  status->set_user_rrefs(live_user_rrefs());
  status->set_pending_forks(s.unconfirmed);
  status->set_pending_deletes(pending_messages());
  status->set_parked_requests(s.parked);
  status->set_rref_forks_walked(s.forks_walked);
  status->set_rref_value_bytes(s.value_bytes);
}

}  // namespace ferry
