#include "rpc/membership/etcd_backend.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/status_util.h"
#include "rpc/base/timed_wait.h"
#include "rpc/membership/rendezvous_url.h"
#include "rpc/value/value.h"
#include "rpc/wire/bounded_parse.h"

namespace ferry {

namespace {

// Revoking the lease on a failed join or a leave is a courtesy (the lease
// expires anyway): it gets this long at most.
constexpr absl::Duration kRevokeTimeout = absl::Seconds(2);
// Reads and transactions to take a rank when its history moved meanwhile
// (another process took it and gave it up again): a few are plenty.
constexpr int kTakeAttempts = 8;
// How long past its TTL a dead holder's lease may take to be expired by
// etcd (its leader checks leases about every 500 ms).
constexpr absl::Duration kLeaseSlack = absl::Seconds(1);
// Between repeats of a call that may be made twice.
constexpr absl::Duration kRepeatPause = absl::Milliseconds(50);

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
      etcd_(std::move(etcd)) {}

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

template <typename T>
absl::StatusOr<T> EtcdBackend::AwaitRepeating(
    const std::function<Future<T>()>& call, absl::Time deadline) const {
  while (true) {
    absl::StatusOr<T> result = Await(call(), deadline);
    const bool transient = absl::IsUnavailable(result.status()) ||
                           absl::IsDeadlineExceeded(result.status());
    if (result.ok() || !transient || Now() + kRepeatPause >= deadline) {
      return result;
    }
    // etcd's client already waited its backoff; this only keeps a call
    // that fails at once from spinning. Stopped timers: give up.
    if (options_.etcd.timers != nullptr &&
        !SleepOn(*options_.etcd.timers, kRepeatPause)) {
      return result;
    }
  }
}

// ---- Joining ----

absl::Status EtcdBackend::StartLease(absl::Time deadline) {
  // A lease granted by a try whose answer was lost is never renewed: it
  // expires on its own.
  FERRY_ASSIGN_OR_RETURN(
      EtcdLease lease,
      AwaitRepeating<EtcdLease>(
          [this] { return etcd_->GrantLease(options_.ttl); }, deadline));
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

std::optional<absl::Time> EtcdBackend::lease_expires_at() const {
  // The keeper's lock is taken under mu_: it never calls back under its own.
  absl::MutexLock lock(&mu_);
  if (keepalive_ == nullptr) return std::nullopt;
  return keepalive_->expires_at();
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
  FERRY_ASSIGN_OR_RETURN(
      EtcdRange range,
      AwaitRepeating<EtcdRange>(
          [this] { return etcd_->GetPrefix(keys_.prefix()); }, deadline));
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

absl::StatusOr<EtcdBackend::Take> EtcdBackend::TryTake(
    int rank, const proto::RankRecord& record, int64_t history_rev,
    absl::Time deadline) {
  const int64_t lease = lease_id();
  const std::string key = keys_.rank(rank);
  const std::string value = Serialize(record);
  // The history must be the one the record's generation was counted from,
  // so no two incarnations of a rank share a generation.
  EtcdTxn take;
  take.compares = {
      EtcdCompare::Absent(key),
      EtcdCompare::ModRevisionIs(keys_.history(rank),
                                 EtcdCompare::Result::kEqual, history_rev)};
  take.success = {EtcdOp::Put(key, value, lease),
                  EtcdOp::Put(keys_.history(rank), value)};
  take.failure = {EtcdOp::Get(key)};
  absl::StatusOr<EtcdTxnResult> result = Await(etcd_->Txn(take), deadline);
  if (result.ok()) {
    if (result->succeeded) return Take::kTaken;
    const bool held =
        !result->results.empty() && !result->results[0].kvs.empty();
    return held ? Take::kHeld : Take::kRaced;
  }
  if (!absl::IsUnavailable(result.status()) &&
      !absl::IsDeadlineExceeded(result.status())) {
    return result.status();
  }
  // The transaction may have been applied before the endpoint failed or
  // the answer came (an election, say): the key says whether it was ours.
  FERRY_ASSIGN_OR_RETURN(
      EtcdRange now, AwaitRepeating<EtcdRange>(
                         [this, &key] { return etcd_->Get(key); }, deadline));
  if (now.kvs.empty()) return Take::kRaced;
  return now.kvs[0].lease == lease ? Take::kTaken : Take::kHeld;
}

proto::RankRecord EtcdBackend::RecordFor(const JoinSpec& spec, int rank,
                                         const JobSnapshot& snapshot) const {
  proto::RankRecord record;
  *record.mutable_worker() = WorkerInfoToProto(spec.self);
  record.mutable_worker()->set_rank(rank);
  if (spec.self.rank < 0) {
    record.mutable_worker()->set_name(absl::StrCat("worker", rank));
  }
  auto last = snapshot.history.find(rank);
  record.mutable_worker()->set_generation(
      last == snapshot.history.end() ? 0
                                     : last->second.worker().generation() + 1);
  record.set_incarnation(spec.incarnation);
  record.set_world_size(spec.world_size);
  // A joiner of a formed job is a replacement: it waits for nobody.
  record.set_formed(Formed(snapshot));
  return record;
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
      ", which is alive (its lease did not expire within its TTL of ",
      absl::FormatDuration(options_.ttl),
      "): a rank is taken over only once its holder's lease expired"));
}

absl::StatusOr<int> EtcdBackend::TakeRank(const JoinSpec& spec,
                                          absl::Time deadline) {
  // A named rank held by a holder that just died (a supervisor restarting
  // it at once) frees when the holder's lease runs out: wait that long —
  // at most one TTL — rather than fail while it is only not expired yet.
  // A holder that is alive renews its lease, so the key stays and the
  // join fails naming it, as before, once a TTL went by.
  const absl::Time patience =
      std::min(deadline, Now() + options_.ttl + kLeaseSlack);
  while (true) {
    int64_t revision = 0;
    FERRY_ASSIGN_OR_RETURN(std::optional<int> rank,
                           TakeRankOnce(spec, deadline, &revision));
    if (rank.has_value()) return *rank;
    if (spec.self.rank < 0) {
      return absl::AlreadyExistsError(
          absl::StrCat("every rank of job ", options_.job, " (world_size ",
                       spec.world_size, ") is held by a live worker"));
    }
    if (!WaitForChange(revision, patience)) {
      return RankTaken(spec.self.rank, deadline);
    }
  }
}

absl::StatusOr<std::optional<int>> EtcdBackend::TakeRankOnce(
    const JoinSpec& spec, absl::Time deadline, int64_t* revision) {
  for (int attempt = 0; attempt < kTakeAttempts; ++attempt) {
    FERRY_ASSIGN_OR_RETURN(JobSnapshot snapshot, Read(deadline));
    *revision = snapshot.revision;
    absl::StatusOr<int> agreed = AgreedWorldSize(snapshot);
    if (agreed.ok() && *agreed != spec.world_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", options_.job, " has world_size ", *agreed,
                       ", not ", spec.world_size));
    }
    FERRY_RETURN_IF_ERROR(CheckName(spec, snapshot));
    std::vector<int> wanted = {spec.self.rank};
    if (spec.self.rank < 0) wanted = FreeRanks(snapshot, spec.world_size);
    bool raced = false;
    for (int rank : wanted) {
      const proto::RankRecord record = RecordFor(spec, rank, snapshot);
      auto rev = snapshot.history_revisions.find(rank);
      FERRY_ASSIGN_OR_RETURN(
          Take took,
          TryTake(rank, record,
                  rev == snapshot.history_revisions.end() ? 0 : rev->second,
                  deadline));
      raced = raced || took == Take::kRaced;
      if (took != Take::kTaken) continue;  // Try the next free one.
      absl::MutexLock lock(&mu_);
      self_rank_ = rank;
      self_record_ = record;
      world_size_ = spec.world_size;
      return rank;
    }
    if (!raced) break;  // Every one held: reading again changes nothing.
  }
  return std::nullopt;
}

absl::Status EtcdBackend::CheckName(const JoinSpec& spec,
                                    const JobSnapshot& snapshot) const {
  if (spec.self.rank < 0 || !Formed(snapshot)) return absl::OkStatus();
  auto last = snapshot.history.find(spec.self.rank);
  if (last == snapshot.history.end() ||
      last->second.worker().name() == spec.self.name) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "a replacement for rank ", spec.self.rank, " must be named ",
      last->second.worker().name(),
      " (names are fixed when the job forms), not ", spec.self.name));
}

absl::StatusOr<int> EtcdBackend::ReserveRank(const JoinSpec& spec,
                                             absl::Duration timeout) {
  if (spec.world_size < 1 || spec.world_size > kMaxEtcdWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("world_size ", spec.world_size, " is out of range [1, ",
                     kMaxEtcdWorldSize, "]"));
  }
  if (lease_id() != 0) {
    return absl::FailedPreconditionError(
        "this node already joined or reserved a rank");
  }
  const absl::Time deadline = Now() + timeout;
  FERRY_RETURN_IF_ERROR(StartLease(deadline));
  JoinSpec reserve = spec;
  reserve.self.rank = -1;
  reserve.self.address.clear();  // Not serving yet: a reservation.
  reserve.self.local_address.clear();
  absl::StatusOr<int> rank = TakeRank(reserve, deadline);
  if (!rank.ok()) {
    EndLease(deadline);
    return rank.status();
  }
  absl::MutexLock lock(&mu_);
  reserved_ = true;
  return *rank;
}

absl::Status EtcdBackend::Publish(const JoinSpec& spec, absl::Time deadline) {
  proto::RankRecord record;
  int rank;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    record = self_record_;
    rank = self_rank_;
    lease = lease_;
  }
  // The reservation's generation and flags; the worker's entry now.
  const uint64_t generation = record.worker().generation();
  *record.mutable_worker() = WorkerInfoToProto(spec.self);
  record.mutable_worker()->set_generation(generation);
  record.set_incarnation(spec.incarnation);
  const std::string key = keys_.rank(rank);
  const std::string value = Serialize(record);
  EtcdTxn publish;
  publish.compares = {
      EtcdCompare::LeaseIs(key, EtcdCompare::Result::kEqual, lease)};
  publish.success = {EtcdOp::Put(key, value, lease),
                     EtcdOp::Put(keys_.history(rank), value)};
  // Repeating it changes nothing: the same puts, under the same guard.
  FERRY_ASSIGN_OR_RETURN(
      EtcdTxnResult published,
      AwaitRepeating<EtcdTxnResult>(
          [this, &publish] { return etcd_->Txn(publish); }, deadline));
  if (!published.succeeded) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", rank, " of job ", options_.job,
        " was reserved, but the reservation was lost (its etcd lease "
        "expired) before this worker served"));
  }
  absl::MutexLock lock(&mu_);
  self_record_ = record;
  reserved_ = false;
  return absl::OkStatus();
}

void EtcdBackend::MarkFormed(absl::Time deadline) {
  std::string key, value;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    if (self_record_.formed()) return;
    self_record_.set_formed(true);
    key = keys_.rank(self_rank_);
    value = Serialize(self_record_);
    lease = lease_;
  }
  // Under this node's lease: if it is lost, the put fails and changes
  // nothing. Best effort: a joiner that misses it waits for every rank,
  // as at a job's start.
  Await(etcd_->Put(key, value, lease), deadline).IgnoreError();
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
    // Formed once: the ranks nobody serves are dead, not late.
    if (agreed.ok() && (missing.empty() || Formed(snapshot))) return snapshot;
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
    holders_[rank] = HolderOf(record);
  }
  for (uint64_t node : snapshot.clients) clients_[node] = false;
  client_keys_ = snapshot.client_keys;
  if (world_size_ == 0) world_size_ = AgreedWorldSize(snapshot).value_or(0);
}

EtcdBackend::Holder EtcdBackend::HolderOf(const proto::RankRecord& record) {
  return Holder{record.incarnation(), record.worker().name(), record.leaving(),
                Serving(record)};
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
  int reserved = -1;
  {
    absl::MutexLock lock(&mu_);
    if (reserved_) reserved = self_rank_;
  }
  absl::Status taken;
  if (reserved >= 0 && reserved != spec.self.rank) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this node reserved rank ", reserved, ", not rank ", spec.self.rank));
  } else if (reserved >= 0) {
    taken = Publish(spec, deadline);
  } else {
    FERRY_RETURN_IF_ERROR(StartLease(deadline));
    taken = TakeRank(spec, deadline).status();
  }
  absl::StatusOr<JobSnapshot> formed =
      taken.ok() ? WaitFormed(spec.world_size, deadline, timeout) : taken;
  if (!formed.ok()) {
    // Free the rank at once rather than after the TTL.
    EndLease(deadline);
    return formed.status();
  }
  MarkFormed(deadline);
  Remember(*formed);
  RememberGone(*formed, spec.world_size);
  return DirectoryOf(*formed, spec.world_size);
}

void EtcdBackend::RememberGone(const JobSnapshot& snapshot, int world_size) {
  absl::MutexLock lock(&mu_);
  gone_.clear();
  for (int rank : MissingRanks(snapshot, world_size)) {
    if (rank == self_rank_) continue;
    Holder last{0, absl::StrCat("worker", rank)};
    if (auto it = snapshot.history.find(rank); it != snapshot.history.end()) {
      last = HolderOf(it->second);
    }
    gone_.emplace_back(WorkerNode(rank), GoneStatus(last));
  }
}

absl::StatusOr<ClientRegistration> EtcdBackend::RegisterClient(
    const std::string& description, const std::string& public_key,
    absl::Duration timeout) {
  const absl::Time deadline = Now() + timeout;
  FERRY_RETURN_IF_ERROR(StartLease(deadline));
  {
    absl::MutexLock lock(&mu_);
    self_key_ = public_key;
  }
  absl::StatusOr<uint64_t> node =
      PublishClient(description, public_key, deadline);
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
  RememberGone(*formed, world_size);
  return ClientRegistration{*node, DirectoryOf(*formed, world_size), false};
}

absl::StatusOr<uint64_t> EtcdBackend::PublishClient(
    const std::string& description, const std::string& public_key,
    absl::Time deadline) {
  // The store's revision is unique and grows: a client id is never reused
  // (a lost answer only skips one).
  FERRY_ASSIGN_OR_RETURN(
      int64_t seq,
      AwaitRepeating<int64_t>(
          [this] { return etcd_->Put(keys_.client_seq(), ""); }, deadline));
  const uint64_t node = kEtcdClientBase + static_cast<uint64_t>(seq);
  proto::ClientRecord record;
  record.set_description(description);
  record.set_public_key(public_key);
  const std::string key = keys_.client(node);
  const std::string value = Serialize(record);
  const int64_t lease = lease_id();
  FERRY_RETURN_IF_ERROR(
      AwaitRepeating<int64_t>(
          [this, &key, &value, lease] { return etcd_->Put(key, value, lease); },
          deadline)
          .status());
  return node;
}

// ---- Following ----

void EtcdBackend::Follow(Membership* membership, FollowCallbacks callbacks) {
  std::optional<absl::Status> fenced;
  int64_t from;
  std::vector<std::pair<uint64_t, absl::Status>> gone;
  std::map<uint64_t, std::string> clients;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    membership_ = membership;
    fenced = fenced_;
    callbacks_ = callbacks;
    from = revision_ + 1;
    gone = std::move(gone_);
    clients.swap(client_keys_);
  }
  // Dead before this node joined: the watch will not say so.
  for (const auto& [node, why] : gone) membership->MarkDown(node, why);
  // The lease was lost between joining and now.
  if (fenced.has_value()) {
    if (callbacks.on_fenced) callbacks.on_fenced(*fenced);
    return;
  }
  // Clients registered before the snapshot Join read; later ones come with
  // the watch, which starts after it.
  if (callbacks.on_client) {
    for (const auto& [node, key] : clients) callbacks.on_client(node, key);
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
  const Holder now = HolderOf(*record);
  auto it = holders_.find(rank);
  const bool known = it != holders_.end();
  const bool same = known && it->second.incarnation == now.incarnation;
  const bool other = rank != self_rank_ && rank < world_size_;
  if (known && !same && other && it->second.serving) {
    // A new incarnation without the old one's deletion seen (a resync):
    // the old one is gone all the same.
    changes->push_back({WorkerNode(rank), GoneStatus(it->second)});
  }
  // It arrives when it serves (a reservation is not there yet).
  const bool arrives = now.serving && (!same || !it->second.serving);
  if (arrives && other) {
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
    if (!holder.serving) return;  // A reservation let go: never arrived.
    changes->push_back({WorkerNode(key.rank), GoneStatus(holder)});
    return;
  }
  if (key.kind != EtcdJobKeys::Parsed::Kind::kClient) return;
  if (put) {
    proto::ClientRecord record;
    const bool parsed =
        BoundedParse(e.kv.value, DefaultLimits(), "", &record).ok();
    const bool known = clients_.count(key.node) > 0;
    clients_[key.node] = parsed && record.leaving();
    // A client node is registered once (its id is a store revision): only
    // the first record's key names it.
    if (!known && key.node != self_node_ && parsed &&
        !record.public_key().empty()) {
      changes->push_back({.node = key.node, .public_key = record.public_key()});
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
  ClientCallback on_client;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    membership = membership_;
    on_rejoined = callbacks_.on_rejoined;
    on_client = callbacks_.on_client;
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
    if (!c.public_key.empty() && on_client) on_client(c.node, c.public_key);
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
  const std::string key = keys_.barrier(name, rank);
  const int64_t lease = lease_id();
  FERRY_RETURN_IF_ERROR(
      AwaitRepeating<int64_t>(
          [this, &key, lease] { return etcd_->Put(key, "", lease); }, deadline)
          .status());
  while (true) {
    FERRY_ASSIGN_OR_RETURN(JobSnapshot snapshot, Read(deadline));
    const std::set<int>& arrived = snapshot.barriers[name];
    std::vector<int> missing;
    for (const auto& [r, record] : snapshot.ranks) {
      if (Serving(record) && !record.leaving() && arrived.count(r) == 0) {
        missing.push_back(r);
      }
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
  std::string key, value, history;
  int64_t lease;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_ || lease_ == 0) return absl::OkStatus();
    leaving_ = true;
    lease = lease_;
    if (self_rank_ >= 0) {
      self_record_.set_leaving(true);
      key = keys_.rank(self_rank_);
      history = keys_.history(self_rank_);
      value = Serialize(self_record_);
    } else {
      proto::ClientRecord record;
      record.set_leaving(true);
      record.set_public_key(self_key_);
      key = keys_.client(self_node_);
      value = Serialize(record);
    }
  }
  // Marked first, so the others read the deletion as a departure (and
  // later joiners, from the history).
  EtcdTxn mark;
  mark.success = {EtcdOp::Put(key, value, lease)};
  if (!history.empty()) mark.success.push_back(EtcdOp::Put(history, value));
  absl::Status status = Await(etcd_->Txn(mark), deadline).status();
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

absl::StatusOr<std::unique_ptr<KeyValueStore>> EtcdBackend::OpenStore() {
  return ConnectEtcdStore(options_.etcd, options_.job);
}

}  // namespace ferry
