#include "rpc/membership/etcd_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/authenticator.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/rendezvous_url.h"
#include "rpc/value/value.h"

namespace ferry {

namespace {

// Revoking the lease on a failed join or a leave is a courtesy (the lease
// expires anyway): it gets this long at most.
constexpr absl::Duration kRevokeTimeout = absl::Seconds(2);

std::string Serialize(const google::protobuf::Message& m) {
  std::string out;
  m.SerializeToString(&out);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdBackend>> EtcdBackend::Connect(
    EtcdBackendOptions options) {
  if (!IsValidJobName(options.job)) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd job name \"", options.job, "\" is not valid"));
  }
  if (options.ttl <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd lease TTL must be positive");
  }
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> etcd,
                         EtcdClient::Connect(options.etcd));
  return std::unique_ptr<EtcdBackend>(
      new EtcdBackend(std::move(options), std::move(etcd)));
}

EtcdBackend::EtcdBackend(EtcdBackendOptions options,
                         std::unique_ptr<EtcdClient> etcd)
    : options_(std::move(options)),
      keys_(options_.job),
      etcd_(std::move(etcd)),
      credential_(NewCredential()) {}

EtcdBackend::~EtcdBackend() { Stop(); }

std::string EtcdBackend::description() const {
  return absl::StrCat("job ", options_.job, " on etcd ",
                      absl::StrJoin(etcd_->endpoints(), ","));
}

int64_t EtcdBackend::lease_id() const {
  absl::MutexLock lock(&mu_);
  return lease_;
}

absl::Time EtcdBackend::Now() const { return options_.etcd.clock->Now(); }

absl::Duration EtcdBackend::Left(absl::Time deadline) const {
  return std::max(deadline - Now(), absl::ZeroDuration());
}

template <typename T>
absl::StatusOr<T> EtcdBackend::Await(const Future<T>& f,
                                     absl::Time deadline) const {
  return f.Wait(Left(deadline));
}

// ---- Joining ----

absl::Status EtcdBackend::StartLease(absl::Time deadline) {
  FERRY_ASSIGN_OR_RETURN(EtcdLease lease,
                         Await(etcd_->GrantLease(options_.ttl), deadline));
  // Renewals run on the node's timers (options.etcd.timers). Losing the
  // lease is this node's death as the others see it: it is fenced.
  std::unique_ptr<EtcdKeepAlive> keepalive =
      etcd_->KeepAlive(lease, [this](const absl::Status& why) {
        Fence(absl::UnavailableError(
            absl::StrCat("its etcd lease was lost: ", why.message())));
      });
  absl::MutexLock lock(&mu_);
  lease_ = lease.id;
  keepalive_ = std::move(keepalive);
  return absl::OkStatus();
}

void EtcdBackend::EndLease(absl::Time deadline) {
  std::unique_ptr<EtcdKeepAlive> keepalive;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    keepalive = std::move(keepalive_);
    lease = lease_;
  }
  if (keepalive != nullptr) keepalive->Stop();
  if (lease == 0) return;
  Await(etcd_->RevokeLease(lease), std::min(deadline, Now() + kRevokeTimeout))
      .IgnoreError();
}

absl::StatusOr<JobSnapshot> EtcdBackend::Read(absl::Time deadline) const {
  FERRY_ASSIGN_OR_RETURN(EtcdRange range,
                         Await(etcd_->GetPrefix(keys_.prefix()), deadline));
  return ReadSnapshot(keys_, range);
}

bool EtcdBackend::WaitForChange(int64_t revision, absl::Time deadline) const {
  struct Seen {
    absl::Mutex mu;
    bool changed ABSL_GUARDED_BY(mu) = false;
  };
  auto seen = std::make_shared<Seen>();
  auto mark = [seen] {
    absl::MutexLock lock(&seen->mu);
    seen->changed = true;
  };
  std::unique_ptr<EtcdWatch> watch = etcd_->WatchPrefix(
      keys_.prefix(), revision + 1,
      {.on_events = [mark](std::vector<EtcdEvent>) { mark(); },
       .on_end = [mark](const absl::Status&) { mark(); }});
  bool changed;
  {
    absl::MutexLock lock(&seen->mu);
    changed = seen->mu.AwaitWithTimeout(absl::Condition(&seen->changed),
                                        Left(deadline));
  }
  watch->Stop();
  return changed;
}

absl::StatusOr<bool> EtcdBackend::TryTake(int rank, const std::string& value,
                                          absl::Time deadline) {
  const int64_t lease = lease_id();
  const std::string key = keys_.rank(rank);
  EtcdTxn take;
  take.compares = {EtcdCompare::Absent(key)};
  take.success = {EtcdOp::Put(key, value, lease)};
  absl::StatusOr<EtcdTxnResult> result = Await(etcd_->Txn(take), deadline);
  if (result.ok()) return result->succeeded;
  if (result.status().code() != absl::StatusCode::kUnavailable) {
    return result.status();
  }
  // The transaction may have been applied before the endpoint failed:
  // the key says whether it was ours.
  FERRY_ASSIGN_OR_RETURN(EtcdRange now, Await(etcd_->Get(key), deadline));
  return !now.kvs.empty() && now.kvs[0].lease == lease;
}

absl::Status EtcdBackend::RankTaken(int rank, absl::Time deadline) const {
  std::string holder = "a live process";
  absl::StatusOr<EtcdRange> now = Await(etcd_->Get(keys_.rank(rank)), deadline);
  if (now.ok() && !now->kvs.empty()) {
    if (auto record = ParseRankRecord(now->kvs[0], rank)) {
      holder = absl::StrCat(record->worker().name(), " (pid ",
                            record->worker().pid(), " on ",
                            record->worker().host(), ")");
    }
  }
  return absl::AlreadyExistsError(absl::StrCat(
      "rank ", rank, " of job ", options_.job, " is held by ", holder,
      ", which is alive: a rank is taken over only "
      "once its holder's lease expired"));
}

absl::StatusOr<int> EtcdBackend::TakeRank(const JoinSpec& spec,
                                          absl::Time deadline) {
  FERRY_ASSIGN_OR_RETURN(JobSnapshot snapshot, Read(deadline));
  absl::StatusOr<int> agreed = AgreedWorldSize(snapshot);
  if (agreed.ok() && *agreed != spec.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("job ", options_.job,
                                                   " has world_size ", *agreed,
                                                   ", not ", spec.world_size));
  }
  std::vector<int> wanted = {spec.self.rank};
  if (spec.self.rank < 0) wanted = MissingRanks(snapshot, spec.world_size);
  for (int rank : wanted) {
    proto::RankRecord record;
    *record.mutable_worker() = WorkerInfoToProto(spec.self);
    record.mutable_worker()->set_rank(rank);
    if (spec.self.rank < 0) {
      record.mutable_worker()->set_name(absl::StrCat("worker", rank));
    }
    record.mutable_worker()->set_credential_digest(
        CredentialDigest(credential_));
    record.set_incarnation(spec.incarnation);
    record.set_world_size(spec.world_size);
    FERRY_ASSIGN_OR_RETURN(bool mine,
                           TryTake(rank, Serialize(record), deadline));
    if (!mine) continue;  // Taken meanwhile: try the next free one.
    absl::MutexLock lock(&mu_);
    self_rank_ = rank;
    self_record_ = record;
    world_size_ = spec.world_size;
    return rank;
  }
  if (spec.self.rank >= 0) return RankTaken(spec.self.rank, deadline);
  return absl::AlreadyExistsError(
      absl::StrCat("every rank of job ", options_.job, " (world_size ",
                   spec.world_size, ") is held by a live worker"));
}

absl::StatusOr<JobSnapshot> EtcdBackend::WaitFormed(
    int world_size, absl::Time deadline, absl::Duration timeout) const {
  while (true) {
    FERRY_ASSIGN_OR_RETURN(JobSnapshot snapshot, Read(deadline));
    absl::StatusOr<int> agreed = AgreedWorldSize(snapshot);
    if (!agreed.ok() && agreed.status().code() != absl::StatusCode::kNotFound)
      return agreed.status();
    if (agreed.ok() && world_size > 0 && *agreed != world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", options_.job, " has world_size ", *agreed,
                       ", not ", world_size));
    }
    const int size = agreed.ok() ? *agreed : world_size;
    std::vector<int> missing = MissingRanks(snapshot, size);
    if (agreed.ok() && missing.empty()) return snapshot;
    if (!WaitForChange(snapshot.revision, deadline)) {
      std::string who = agreed.ok() || size > 0
                            ? absl::StrCat("ranks ", RankList(missing), " of ",
                                           size, " did not join")
                            : std::string("no worker joined");
      return absl::DeadlineExceededError(
          absl::StrCat(description(), ": ", who, " within ",
                       absl::ToInt64Milliseconds(timeout), " ms"));
    }
  }
}

void EtcdBackend::Remember(const JobSnapshot& snapshot) {
  absl::MutexLock lock(&mu_);
  revision_ = snapshot.revision;
  holders_.clear();
  for (const auto& [rank, record] : snapshot.ranks) {
    holders_[rank] = {record.incarnation(), record.worker().name(),
                      record.leaving()};
  }
  for (uint64_t node : snapshot.clients) clients_[node] = false;
  client_digests_ = snapshot.client_digests;
  if (world_size_ == 0) world_size_ = AgreedWorldSize(snapshot).value_or(0);
}

absl::StatusOr<Directory> EtcdBackend::Join(const JoinSpec& spec,
                                            absl::Duration timeout) {
  if (spec.world_size < 1 || spec.world_size > kMaxEtcdWorldSize ||
      spec.self.rank < -1 || spec.self.rank >= spec.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", spec.self.rank, " is out of range for world_size ",
        spec.world_size, " (at most ", kMaxEtcdWorldSize, ")"));
  }
  const absl::Time deadline = Now() + timeout;
  FERRY_RETURN_IF_ERROR(StartLease(deadline));
  absl::StatusOr<int> rank = TakeRank(spec, deadline);
  absl::StatusOr<JobSnapshot> formed =
      rank.ok() ? WaitFormed(spec.world_size, deadline, timeout)
                : rank.status();
  if (!formed.ok()) {
    // Free the rank at once rather than after the TTL.
    EndLease(deadline);
    return formed.status();
  }
  Remember(*formed);
  return DirectoryOf(*formed, spec.world_size);
}

absl::StatusOr<ClientRegistration> EtcdBackend::RegisterClient(
    const std::string& description, absl::Duration timeout) {
  const absl::Time deadline = Now() + timeout;
  FERRY_RETURN_IF_ERROR(StartLease(deadline));
  absl::StatusOr<uint64_t> node = PublishClient(description, deadline);
  absl::StatusOr<JobSnapshot> formed =
      node.ok() ? WaitFormed(0, deadline, timeout) : node.status();
  if (!formed.ok()) {
    EndLease(deadline);
    return formed.status();
  }
  {
    absl::MutexLock lock(&mu_);
    self_node_ = *node;
  }
  Remember(*formed);
  const int world_size = AgreedWorldSize(*formed).value_or(0);
  return ClientRegistration{*node, DirectoryOf(*formed, world_size), false};
}

absl::StatusOr<uint64_t> EtcdBackend::PublishClient(
    const std::string& description, absl::Time deadline) {
  // The store's revision is unique and grows: a client id is never reused.
  FERRY_ASSIGN_OR_RETURN(int64_t seq,
                         Await(etcd_->Put(keys_.client_seq(), ""), deadline));
  const uint64_t node = kEtcdClientBase + static_cast<uint64_t>(seq);
  proto::ClientRecord record;
  record.set_description(description);
  record.set_credential_digest(CredentialDigest(credential_));
  FERRY_RETURN_IF_ERROR(
      Await(etcd_->Put(keys_.client(node), Serialize(record), lease_id()),
            deadline)
          .status());
  return node;
}

// ---- Following ----

void EtcdBackend::Follow(Membership* membership, FollowCallbacks callbacks) {
  std::optional<absl::Status> fenced;
  int64_t from;
  std::map<uint64_t, std::string> clients;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    membership_ = membership;
    fenced = fenced_;
    callbacks_ = callbacks;
    from = revision_ + 1;
    clients.swap(client_digests_);
  }
  // The lease was lost between joining and now.
  if (fenced.has_value()) {
    if (callbacks.on_fenced) callbacks.on_fenced(*fenced);
    return;
  }
  // Clients registered before the snapshot Join read; later ones come with
  // the watch, which starts after it.
  if (callbacks.on_credential) {
    for (const auto& [node, digest] : clients) {
      callbacks.on_credential(node, digest);
    }
  }
  std::unique_ptr<EtcdWatch> watch = etcd_->WatchPrefix(
      keys_.prefix(), from,
      {.on_events =
           [this](std::vector<EtcdEvent> e) { OnEvents(std::move(e)); },
       .on_end = [this](const absl::Status& why) { OnWatchEnd(why); }});
  absl::MutexLock lock(&mu_);
  watch_ = std::move(watch);
}

absl::Status EtcdBackend::GoneStatus(const Holder& holder) const {
  return absl::UnavailableError(
      holder.leaving
          ? absl::StrCat(holder.name, " left the job")
          : absl::StrCat(holder.name,
                         " died (its etcd lease expired: no "
                         "contact for ",
                         absl::ToInt64Milliseconds(options_.ttl), " ms)"));
}

void EtcdBackend::ApplyRankPut(int rank, const EtcdKeyValue& kv,
                               std::vector<Change>* changes) {
  std::optional<proto::RankRecord> record = ParseRankRecord(kv, rank);
  if (!record.has_value()) return;
  const Holder now{record->incarnation(), record->worker().name(),
                   record->leaving()};
  auto it = holders_.find(rank);
  const bool known = it != holders_.end();
  const bool same = known && it->second.incarnation == now.incarnation;
  const bool other = rank != self_rank_ && rank < world_size_;
  if (known && !same && other) {
    // A new incarnation without the old one's deletion seen (a resync):
    // the old one is gone all the same.
    changes->push_back({WorkerNode(rank), GoneStatus(it->second)});
  }
  if (!same && other) {
    changes->push_back({WorkerNode(rank), std::nullopt,
                        WorkerInfoFromProto(record->worker()),
                        record->incarnation()});
  }
  holders_[rank] = now;
}

void EtcdBackend::Apply(const EtcdEvent& e, std::vector<Change>* changes) {
  const EtcdJobKeys::Parsed key = keys_.Parse(e.kv.key);
  const bool put = e.type == EtcdEvent::Type::kPut;
  if (key.kind == EtcdJobKeys::Parsed::Kind::kRank) {
    if (put) {
      ApplyRankPut(key.rank, e.kv, changes);
      return;
    }
    auto it = holders_.find(key.rank);
    if (it == holders_.end()) return;
    const Holder holder = it->second;
    holders_.erase(it);
    if (key.rank == self_rank_ || key.rank >= world_size_) return;
    changes->push_back({WorkerNode(key.rank), GoneStatus(holder)});
    return;
  }
  if (key.kind != EtcdJobKeys::Parsed::Kind::kClient) return;
  if (put) {
    proto::ClientRecord record;
    const bool parsed = record.ParseFromString(e.kv.value);
    const bool known = clients_.count(key.node) > 0;
    clients_[key.node] = parsed && record.leaving();
    // A client node is registered once (its id is a store revision): only
    // the first record's digest names it.
    if (!known && key.node != self_node_ && parsed &&
        !record.credential_digest().empty()) {
      changes->push_back(
          {.node = key.node, .digest = record.credential_digest()});
    }
    return;
  }
  auto it = clients_.find(key.node);
  const bool leaving = it != clients_.end() && it->second;
  if (it != clients_.end()) clients_.erase(it);
  if (key.node == self_node_) return;
  const std::string name = absl::StrCat("client", key.node - kFirstClientNode);
  changes->push_back(
      {key.node,
       absl::UnavailableError(leaving ? absl::StrCat(name, " left the job")
                                      : absl::StrCat(name,
                                                     " died (its etcd lease "
                                                     "expired)"))});
}

void EtcdBackend::OnEvents(std::vector<EtcdEvent> events) {
  std::vector<Change> changes;
  std::optional<absl::Status> fence;
  Membership* membership;
  RejoinedCallback on_rejoined;
  CredentialCallback on_credential;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    membership = membership_;
    on_rejoined = callbacks_.on_rejoined;
    on_credential = callbacks_.on_credential;
    const std::string own =
        self_rank_ >= 0 ? keys_.rank(self_rank_) : keys_.client(self_node_);
    for (const EtcdEvent& e : events) {
      if (e.type == EtcdEvent::Type::kDelete && e.kv.key == own && !leaving_) {
        fence = absl::UnavailableError(
            absl::StrCat("its key ", e.kv.key, " was deleted from etcd"));
      }
      Apply(e, &changes);
    }
  }
  // Listeners and callbacks run outside the lock (they fail calls, drop
  // RRefs, update the directory). A replacement's entry is in the
  // directory before its rank counts as alive again.
  for (Change& c : changes) {
    if (!c.digest.empty() && on_credential) on_credential(c.node, c.digest);
    if (c.gone.has_value()) membership->MarkDown(c.node, *c.gone);
    if (c.rejoined.has_value()) {
      if (on_rejoined) on_rejoined(*c.rejoined, c.incarnation);
      membership->Revive(c.node);
    }
  }
  if (fence.has_value()) Fence(*fence);
}

void EtcdBackend::OnWatchEnd(const absl::Status& why) {
  // The history the watch needed was compacted away (or it may not read
  // the prefix): what changed meanwhile is unknown, so read the job again
  // and publish every holder that is no longer there.
  etcd_->GetPrefix(keys_.prefix())
      .Then([this, why](const absl::StatusOr<EtcdRange>& range) {
        if (!range.ok()) {
          Fence(absl::UnavailableError(
              absl::StrCat("its etcd watch ended (", why.message(),
                           ") and the job could not be read again: ",
                           range.status().message())));
          return;
        }
        const JobSnapshot snapshot = ReadSnapshot(keys_, *range);
        // Replayed as events: holders gone are deletions, the ranks held now
        // are puts (a new incarnation among them is a replacement).
        std::vector<EtcdEvent> replay;
        {
          absl::MutexLock lock(&mu_);
          if (stopped_) return;
          for (const auto& [rank, holder] : holders_) {
            if (snapshot.ranks.count(rank) == 0) {
              replay.push_back({EtcdEvent::Type::kDelete, {keys_.rank(rank)}});
            }
          }
          revision_ = snapshot.revision;
        }
        for (const EtcdKeyValue& kv : range->kvs) {
          // Clients too: one that registered meanwhile is admitted.
          const EtcdJobKeys::Parsed::Kind kind = keys_.Parse(kv.key).kind;
          if (kind == EtcdJobKeys::Parsed::Kind::kRank ||
              kind == EtcdJobKeys::Parsed::Kind::kClient) {
            replay.push_back({EtcdEvent::Type::kPut, kv});
          }
        }
        OnEvents(std::move(replay));
        std::unique_ptr<EtcdWatch> watch = etcd_->WatchPrefix(
            keys_.prefix(), snapshot.revision + 1,
            {.on_events =
                 [this](std::vector<EtcdEvent> e) { OnEvents(std::move(e)); },
             .on_end = [this](const absl::Status& w) { OnWatchEnd(w); }});
        absl::MutexLock lock(&mu_);
        // The ended watch stays until Stop(): it may be the caller of this.
        if (stopped_) return;
        retired_.push_back(std::move(watch_));
        watch_ = std::move(watch);
      });
}

void EtcdBackend::Fence(const absl::Status& why) {
  FencedCallback callback;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || leaving_ || fenced_.has_value()) return;
    fenced_ = why;
    callback = std::move(callbacks_.on_fenced);
    callbacks_.on_fenced = nullptr;
  }
  if (callback) callback(why);
}

// ---- Barriers and leaving ----

absl::Status EtcdBackend::Barrier(const std::string& name,
                                  absl::Duration timeout) {
  const absl::Time deadline = Now() + timeout;
  int rank;
  {
    absl::MutexLock lock(&mu_);
    rank = self_rank_;
  }
  if (rank < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("barrier ", name, ": only workers take part"));
  }
  FERRY_RETURN_IF_ERROR(
      Await(etcd_->Put(keys_.barrier(name, rank), "", lease_id()), deadline)
          .status());
  while (true) {
    FERRY_ASSIGN_OR_RETURN(JobSnapshot snapshot, Read(deadline));
    const std::set<int>& arrived = snapshot.barriers[name];
    std::vector<int> missing;
    for (const auto& [r, record] : snapshot.ranks) {
      if (!record.leaving() && arrived.count(r) == 0) missing.push_back(r);
    }
    if (missing.empty()) return absl::OkStatus();
    if (!WaitForChange(snapshot.revision, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrCat("barrier ", name, ": ranks ", RankList(missing),
                       " did not arrive within ",
                       absl::ToInt64Milliseconds(timeout), " ms"));
    }
  }
}

absl::Status EtcdBackend::Leave(absl::Duration timeout) {
  const absl::Time deadline = Now() + timeout;
  std::string key, value;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || lease_ == 0) return absl::OkStatus();
    leaving_ = true;
    lease = lease_;
    if (self_rank_ >= 0) {
      self_record_.set_leaving(true);
      key = keys_.rank(self_rank_);
      value = Serialize(self_record_);
    } else {
      proto::ClientRecord record;
      record.set_leaving(true);
      record.set_credential_digest(CredentialDigest(credential_));
      key = keys_.client(self_node_);
      value = Serialize(record);
    }
  }
  // Marked first, so the others read the deletion as a departure.
  absl::Status status = Await(etcd_->Put(key, value, lease), deadline).status();
  EndLease(deadline);
  Stop();
  return status;
}

void EtcdBackend::Stop() {
  std::unique_ptr<EtcdKeepAlive> keepalive;
  std::unique_ptr<EtcdWatch> watch;
  std::vector<std::unique_ptr<EtcdWatch>> retired;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    keepalive = std::move(keepalive_);
    watch = std::move(watch_);
    retired = std::move(retired_);
  }
  if (keepalive != nullptr) keepalive->Stop();
  if (watch != nullptr) watch->Stop();
  for (auto& w : retired) {
    if (w != nullptr) w->Stop();
  }
  etcd_->Stop();
}

}  // namespace ferry
