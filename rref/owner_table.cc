#include "rref/owner_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/value/payload_bytes.h"

namespace ferry {

OwnerTable::OwnerTable(uint64_t self_node, Clock* clock, OwnerOptions options,
                       NodeNamer namer)
    : self_(self_node),
      clock_(clock),
      options_(options),
      namer_(std::move(namer)),
      values_(PeerBudget::Options{
          .max_bytes = options_.max_value_bytes,
          .max_bytes_per_peer = options_.max_value_bytes_per_creator,
          .what = "values kept as rrefs",
          .peer_flag = options_.per_creator_flag,
          .total_flag = options_.total_flag}) {}

std::string OwnerTable::Name(uint64_t node) const {
  return namer_ ? namer_(node) : absl::StrCat("node ", node);
}

void OwnerTable::Run(Deferred& later) {
  for (auto& f : later) std::move(f)();
  later.clear();
}

absl::Status OwnerTable::GoneError(GlobalId rref) const {
  return absl::NotFoundError(absl::StrCat(
      "rref ", GlobalIdString(rref), " was already released on its owner"));
}

OwnerTable::Holder& OwnerTable::HolderLocked(uint64_t holder) {
  auto [it, inserted] = holders_.try_emplace(holder);
  if (inserted) it->second.lease_expiry = clock_->Now() + options_.lease;
  return it->second;
}

void OwnerTable::RememberDeleteLocked(GlobalId rref, GlobalId fork) {
  if (options_.max_early_deletes <= 0) return;
  if (!early_deletes_.insert({rref, fork}).second) return;
  early_delete_order_.emplace_back(clock_->Now() + options_.early_delete_ttl,
                                   ForkKey{rref, fork});
  // Bounded: a flood of deletes for ids that never come forgets the oldest.
  while (static_cast<int64_t>(early_delete_order_.size()) >
         options_.max_early_deletes) {
    early_deletes_.erase(early_delete_order_.front().second);
    early_delete_order_.pop_front();
  }
}

absl::Status OwnerTable::RegisterForkLocked(GlobalId rref, Entry& entry,
                                            GlobalId fork, uint64_t holder,
                                            bool confirmed) {
  if (entry.forks.contains(fork)) return absl::OkStatus();  // Idempotent.
  // Its delete overtook it (e.g. a creator's release overtook remote()'s
  // call): the fork is already gone. The entry stays without it and is
  // freed when it resolves.
  if (early_deletes_.erase({rref, fork}) > 0) return absl::OkStatus();
  absl::flat_hash_set<ForkKey>& held = by_holder_[holder];
  if (static_cast<int64_t>(held.size()) >= options_.max_forks_per_holder) {
    const size_t count = held.size();
    if (held.empty()) by_holder_.erase(holder);
    return absl::ResourceExhaustedError(absl::StrCat(
        Name(holder), " already holds ", count, " rrefs here (limit ",
        options_.max_forks_per_holder, "); release some first"));
  }
  held.insert({rref, fork});
  if (!confirmed) unconfirmed_.insert({rref, fork});
  Fork f;
  f.holder = holder;
  f.confirmed = confirmed;
  f.vouched = clock_->Now();
  entry.forks.emplace(fork, f);
  // A holder's lease starts with its first fork.
  if (holder != self_) HolderLocked(holder);
  return absl::OkStatus();
}

void OwnerTable::RemoveForkLocked(GlobalId rref, Entry& entry, GlobalId fork,
                                  Deferred* later) {
  auto it = entry.forks.find(fork);
  if (it == entry.forks.end()) return;
  const ForkKey key{rref, fork};
  auto held = by_holder_.find(it->second.holder);
  if (held != by_holder_.end()) {
    held->second.erase(key);
    if (held->second.empty()) by_holder_.erase(held);
  }
  unconfirmed_.erase(key);
  entry.forks.erase(it);
  MaybeFreeLocked(rref, later);
}

void OwnerTable::ConfirmLocked(const ForkKey& key, Fork& fork) {
  fork.confirmed = true;
  unconfirmed_.erase(key);
}

OwnerTable::Fork* OwnerTable::FindForkLocked(const ForkKey& key) {
  auto it = entries_.find(key.first);
  if (it == entries_.end()) return nullptr;
  auto f = it->second.forks.find(key.second);
  return f == it->second.forks.end() ? nullptr : &f->second;
}

void OwnerTable::MaybeFreeLocked(GlobalId rref, Deferred* later) {
  auto it = entries_.find(rref);
  if (it == entries_.end() || !it->second.forks.empty()) return;
  // A value still being computed is freed when it resolves.
  if (it->second.state == State::kPending) return;
  // The value is destroyed outside the lock (it may be large).
  later->push_back(
      [v = std::move(it->second.value)]() mutable { v = Value(); });
  if (it->second.charged > 0) {
    values_.Give(it->second.charged_to, it->second.charged);
  }
  entries_.erase(it);
  tombstones_[rref] = clock_->Now() + options_.tombstone_ttl;
}

absl::Status OwnerTable::Create(GlobalId rref, GlobalId fork,
                                uint64_t creator) {
  Deferred later;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    if (tombstones_.contains(rref)) return GoneError(rref);
    auto [it, inserted] = entries_.try_emplace(rref);
    if (inserted) {
      it->second.creator = creator;
      it->second.created = clock_->Now();
    }
    status = RegisterForkLocked(rref, it->second, fork, creator, true);
    // The creator just spoke to us: alive.
    if (status.ok() && creator != self_) {
      HolderLocked(creator).lease_expiry = clock_->Now() + options_.lease;
    }
    if (!status.ok() && inserted) entries_.erase(it);
    if (status.ok()) UnparkLocked(rref, &later);
  }
  Run(later);
  return status;
}

absl::Status OwnerTable::Resolve(GlobalId rref, absl::StatusOr<Value> result) {
  // Sized before the lock: a value may be a long list.
  const int64_t bytes = result.ok() ? PayloadBytes(*result) : 0;
  absl::Status answer = result.status();
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(rref);
    if (it == entries_.end() || it->second.state != State::kPending) {
      return answer;
    }
    Entry& e = it->second;
    if (result.ok() && e.creator != self_) {
      // Charged to the node that made this worker keep it; one over its
      // share (or the table's) is not kept.
      std::string creator = Name(e.creator);
      absl::Status held = values_.Take(creator, bytes);
      if (held.ok()) {
        e.charged = bytes;
        e.charged_to = std::move(creator);
      } else {
        answer =
            Annotate(held, absl::StrCat("keeping rref ", GlobalIdString(rref),
                                        " of ", creator));
        later.push_back([v = *std::move(result)]() mutable { v = Value(); });
        result = answer;
      }
    }
    if (result.ok()) {
      e.state = State::kReady;
      e.value = *std::move(result);
    } else {
      e.state = State::kError;
      e.error = result.status();
    }
    std::vector<WaitId> fetchers;
    fetchers.swap(e.fetchers);
    for (WaitId id : fetchers) {
      auto w = waits_.find(id);
      if (w == waits_.end()) continue;
      FinishFetchLocked(w->second, e, &later);
      waits_.erase(w);
    }
    MaybeFreeLocked(rref, &later);  // Abandoned meanwhile: freed now.
  }
  Run(later);
  return answer;
}

absl::Status OwnerTable::AddLocal(GlobalId rref, GlobalId fork, Value value) {
  Deferred later;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = entries_.try_emplace(rref);
    if (!inserted) {
      return absl::AlreadyExistsError(
          absl::StrCat("rref ", GlobalIdString(rref), " already exists"));
    }
    it->second.state = State::kReady;
    it->second.value = std::move(value);
    it->second.creator = self_;
    it->second.created = clock_->Now();
    status = RegisterForkLocked(rref, it->second, fork, self_, true);
    if (!status.ok()) {
      later.push_back(
          [v = std::move(it->second.value)]() mutable { v = Value(); });
      entries_.erase(it);
    } else {
      // Its fork's delete came first (lease_rounds_fuzz found the value
      // kept forever): nobody holds it, so it goes now.
      MaybeFreeLocked(rref, &later);
    }
  }
  Run(later);
  return status;
}

OwnerTable::WaitId OwnerTable::ParkLocked(Wait wait) {
  WaitId id = next_wait_++;
  GlobalId rref = wait.rref;
  bool fetch = wait.fetch;
  waits_.emplace(id, std::move(wait));
  auto e = entries_.find(rref);
  if (fetch && e != entries_.end()) {
    e->second.fetchers.push_back(id);  // Waiting for the value.
  } else {
    parked_[rref].push_back(id);  // Waiting for the entry.
  }
  return id;
}

OwnerTable::WaitId OwnerTable::AddFork(GlobalId rref, GlobalId fork,
                                       uint64_t holder, absl::Time deadline,
                                       Done done) {
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(rref);
    if (it != entries_.end()) {
      status = RegisterForkLocked(rref, it->second, fork, holder, false);
    } else if (tombstones_.contains(rref)) {
      status = GoneError(rref);
    } else if (stopped_.has_value()) {
      status = *stopped_;  // Nobody would answer the wait.
    } else {
      Wait w;
      w.rref = rref;
      w.fork = fork;
      w.holder = holder;
      w.deadline = deadline;
      w.done = std::move(done);
      return ParkLocked(std::move(w));
    }
  }
  std::move(done)(status);
  return 0;
}

absl::Status OwnerTable::ConfirmFork(GlobalId rref, GlobalId fork,
                                     uint64_t holder, uint64_t round) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(rref);
  if (it == entries_.end()) return GoneError(rref);
  auto f = it->second.forks.find(fork);
  if (f == it->second.forks.end() || f->second.holder != holder) {
    return absl::NotFoundError(
        absl::StrCat("rref ", GlobalIdString(rref), ": copy ",
                     GlobalIdString(fork), " is not registered for ",
                     Name(holder), " (it expired before it was confirmed)"));
  }
  // The holder has it: an abandon that came first is void (the sender's
  // call failed, but only after the fork reached its holder).
  ConfirmLocked({rref, fork}, f->second);
  f->second.abandoned = false;
  if (round > 0 &&
      (f->second.confirm_round == 0 || round < f->second.confirm_round)) {
    f->second.confirm_round = round;
  }
  if (holder != self_) {
    HolderLocked(holder).lease_expiry = clock_->Now() + options_.lease;
  }
  return absl::OkStatus();
}

void OwnerTable::DeleteFork(GlobalId rref, GlobalId fork,
                            bool only_unconfirmed) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    if (tombstones_.contains(rref)) return;  // Freed: nothing to do.
    auto it = entries_.find(rref);
    if (it == entries_.end() || !it->second.forks.contains(fork)) {
      // Not registered yet (or dropped already): whatever registers it
      // later (a late creation, a parked AddFork) must not.
      RememberDeleteLocked(rref, fork);
      return;
    }
    Fork& fk = it->second.forks.at(fork);
    if (only_unconfirmed && fk.confirmed) return;
    if (only_unconfirmed && fk.holder != self_) {
      // The holder may have it and its confirm still be on the way: wait
      // for its word (a confirm, or a round after this epoch).
      if (!fk.abandoned) {
        fk.abandoned = true;
        fk.abandoned_at = clock_->Now();
        fk.abandon_epoch = ++epoch_;
      }
      return;
    }
    RemoveForkLocked(rref, it->second, fork, &later);
  }
  Run(later);
}

void OwnerTable::FinishFetchLocked(Wait& wait, const Entry& entry,
                                   Deferred* later) {
  absl::StatusOr<Value> result = entry.state == State::kReady
                                     ? absl::StatusOr<Value>(entry.value)
                                     : absl::StatusOr<Value>(entry.error);
  later->push_back([done = std::move(wait.fetch_done),
                    result = std::move(result)]() mutable {
    std::move(done)(std::move(result));
  });
}

OwnerTable::WaitId OwnerTable::Fetch(GlobalId rref, GlobalId fork,
                                     absl::Time deadline, FetchDone done) {
  Deferred later;
  WaitId id = 0;
  absl::StatusOr<Value> immediate = absl::UnknownError("");
  bool answered = true;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(rref);
    if (it == entries_.end() && tombstones_.contains(rref)) {
      immediate = GoneError(rref);
    } else if (it != entries_.end() && fork != GlobalId{} &&
               !it->second.forks.contains(fork)) {
      immediate = absl::NotFoundError(absl::StrCat(
          "rref ", GlobalIdString(rref), ": copy ", GlobalIdString(fork),
          " is not registered on the owner"));
    } else if (it != entries_.end() && it->second.state != State::kPending) {
      Wait w;
      w.fetch_done = std::move(done);
      FinishFetchLocked(w, it->second, &later);
    } else if (stopped_.has_value()) {
      immediate = *stopped_;  // Nobody would answer the wait.
    } else {
      Wait w;
      w.fetch = true;
      w.rref = rref;
      w.fork = fork;
      w.deadline = deadline;
      w.fetch_done = std::move(done);
      id = ParkLocked(std::move(w));
      answered = false;
    }
  }
  if (answered && later.empty()) std::move(done)(std::move(immediate));
  Run(later);
  return id;
}

void OwnerTable::UnparkLocked(GlobalId rref, Deferred* later) {
  auto p = parked_.find(rref);
  if (p == parked_.end()) return;
  std::vector<WaitId> ids = std::move(p->second);
  parked_.erase(p);
  Entry& entry = entries_.at(rref);
  for (WaitId id : ids) {
    auto w = waits_.find(id);
    if (w == waits_.end()) continue;
    if (w->second.fetch) {
      if (entry.state == State::kPending) {
        entry.fetchers.push_back(id);
        continue;
      }
      FinishFetchLocked(w->second, entry, later);
    } else {
      absl::Status s = RegisterForkLocked(rref, entry, w->second.fork,
                                          w->second.holder, false);
      later->push_back([done = std::move(w->second.done), s]() mutable {
        std::move(done)(s);
      });
    }
    waits_.erase(w);
  }
}

void OwnerTable::FailWaitLocked(WaitId id, absl::Status status,
                                Deferred* later) {
  auto w = waits_.find(id);
  if (w == waits_.end()) return;
  Wait wait = std::move(w->second);
  waits_.erase(w);
  auto drop = [id](std::vector<WaitId>& v) {
    v.erase(std::remove(v.begin(), v.end(), id), v.end());
  };
  auto p = parked_.find(wait.rref);
  if (p != parked_.end()) {
    drop(p->second);
    if (p->second.empty()) parked_.erase(p);
  }
  auto e = entries_.find(wait.rref);
  if (e != entries_.end()) drop(e->second.fetchers);
  if (wait.fetch) {
    later->push_back([done = std::move(wait.fetch_done), status]() mutable {
      std::move(done)(status);
    });
  } else {
    later->push_back([done = std::move(wait.done), status]() mutable {
      std::move(done)(status);
    });
  }
}

bool OwnerTable::CancelWait(WaitId id) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    FailWaitLocked(id, absl::CancelledError("request cancelled"), &later);
  }
  bool was_parked = !later.empty();
  later.clear();  // Nobody is listening: drop the callbacks unrun.
  return was_parked;
}

absl::StatusOr<uint64_t> OwnerTable::RenewLease(uint64_t holder,
                                                const LeaseListing& listing) {
  if (listing.round > 0 &&
      (listing.chunks == 0 || listing.chunks > kMaxLeaseChunks ||
       listing.chunk >= listing.chunks)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "renew lease from ", Name(holder), ": chunk ", listing.chunk, " of ",
        listing.chunks, " (at most ", kMaxLeaseChunks, " chunks)"));
  }
  Deferred later;
  uint64_t epoch;
  {
    absl::MutexLock lock(&mu_);
    if (ApplyListingLocked(holder, listing)) {
      ReconcileLocked(holder, listing.round, listing.epoch, &later);
    }
    epoch = epoch_;
  }
  Run(later);
  return epoch;
}

bool OwnerTable::ApplyListingLocked(uint64_t holder,
                                    const LeaseListing& listing) {
  const absl::Time now = clock_->Now();
  Holder& h = HolderLocked(holder);
  h.lease_expiry = now + options_.lease;
  for (const auto& [rref, fork] : listing.forks) {
    auto it = entries_.find(rref);
    if (it == entries_.end()) continue;
    auto f = it->second.forks.find(fork);
    if (f == it->second.forks.end() || f->second.holder != holder) continue;
    ConfirmLocked({rref, fork}, f->second);
    f->second.abandoned = false;
    f->second.listed_round = std::max(f->second.listed_round, listing.round);
  }
  for (const auto& [rref, fork] : listing.in_transit) {
    // A holder vouches only for copies it sent: it made their ids. Another
    // node's unconfirmed fork is on its own sender's clock.
    if (fork.node != holder) continue;
    auto it = entries_.find(rref);
    if (it == entries_.end()) continue;
    auto f = it->second.forks.find(fork);
    if (f != it->second.forks.end() && !f->second.confirmed) {
      f->second.vouched = now;
    }
  }
  if (listing.round == 0 || listing.round < h.round) return false;
  if (listing.round > h.round) {  // A new round starts.
    h.round = listing.round;
    h.chunks = listing.chunks;
    h.got.clear();
  }
  // Chunks of one round disagreeing on their count: never complete it.
  if (listing.chunks != h.chunks) return false;
  h.got.insert(listing.chunk);
  if (h.got.size() < h.chunks) return false;
  h.chunks = 0;  // Complete: later duplicates do not complete it again.
  h.got.clear();
  return true;
}

void OwnerTable::ReconcileLocked(uint64_t holder, uint64_t round,
                                 uint64_t epoch, Deferred* later) {
  if (holder == self_) return;
  auto held = by_holder_.find(holder);
  if (held == by_holder_.end()) return;
  // The holder's own forks only: a round costs what the holder has here.
  forks_walked_ += static_cast<int64_t>(held->second.size());
  std::vector<ForkKey> victims;
  for (const ForkKey& key : held->second) {
    const Fork* f = FindForkLocked(key);
    if (f == nullptr || f->listed_round >= round) continue;
    // A confirmed fork the holder listed before, or confirmed as part of
    // an earlier round, and not now: released, its delete lost or late.
    bool released =
        f->confirmed && (f->listed_round > 0 ||
                         (f->confirm_round > 0 && f->confirm_round <= round));
    // Abandoned before the holder took this round's snapshot, and not in
    // it: the holder never got it.
    bool never_arrived =
        !f->confirmed && f->abandoned && f->abandon_epoch <= epoch;
    if (released || never_arrived) victims.push_back(key);
  }
  RemoveForksLocked(victims, later);
}

void OwnerTable::RemoveForksLocked(const std::vector<ForkKey>& victims,
                                   Deferred* later) {
  for (const auto& [rref, fork] : victims) {
    auto it = entries_.find(rref);
    if (it != entries_.end()) RemoveForkLocked(rref, it->second, fork, later);
  }
}

void OwnerTable::KeepInTransit(
    const std::vector<std::pair<GlobalId, GlobalId>>& forks) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  for (const auto& [rref, fork] : forks) {
    auto it = entries_.find(rref);
    if (it == entries_.end()) continue;
    auto f = it->second.forks.find(fork);
    if (f != it->second.forks.end() && !f->second.confirmed) {
      f->second.vouched = now;
    }
  }
}

void OwnerTable::DropHolder(uint64_t holder) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    auto held = by_holder_.find(holder);
    if (held != by_holder_.end()) {
      const std::vector<ForkKey> victims(held->second.begin(),
                                         held->second.end());
      forks_walked_ += static_cast<int64_t>(victims.size());
      RemoveForksLocked(victims, &later);
    }
    holders_.erase(holder);
  }
  Run(later);
}

void OwnerTable::Sweep() {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    std::vector<ForkKey> victims;
    // A holder's lease covers the forks it confirmed: those of holders
    // whose lease ran out go (walking only those holders' forks).
    for (const auto& [holder, held] : by_holder_) {
      if (holder == self_) continue;
      auto lease = holders_.find(holder);
      if (lease != holders_.end() && lease->second.lease_expiry >= now) {
        continue;
      }
      forks_walked_ += static_cast<int64_t>(held.size());
      for (const ForkKey& key : held) {
        const Fork* f = FindForkLocked(key);
        if (f != nullptr && f->confirmed) victims.push_back(key);
      }
    }
    forks_walked_ += static_cast<int64_t>(unconfirmed_.size());
    // An unconfirmed fork is on its sender's clock (vouched for while its
    // call is in flight), an abandoned one waits one lease for its
    // holder's word.
    for (const ForkKey& key : unconfirmed_) {
      const Fork* f = FindForkLocked(key);
      if (f == nullptr || f->holder == self_) continue;
      bool never_confirmed = !f->abandoned && f->vouched + options_.lease < now;
      bool abandoned = f->abandoned && f->abandoned_at + options_.lease < now;
      if (never_confirmed || abandoned) victims.push_back(key);
    }
    RemoveForksLocked(victims, &later);
    for (auto it = holders_.begin(); it != holders_.end();) {
      auto next = std::next(it);
      if (it->second.lease_expiry < now && !by_holder_.contains(it->first)) {
        holders_.erase(it);
      }
      it = next;
    }
    std::vector<WaitId> expired;
    for (const auto& [id, w] : waits_) {
      if (w.deadline < now) expired.push_back(id);
    }
    for (WaitId id : expired) {
      const Wait& w = waits_.at(id);
      FailWaitLocked(id,
                     absl::DeadlineExceededError(absl::StrCat(
                         "rref ", GlobalIdString(w.rref),
                         w.fetch ? ": value not ready" : ": not created",
                         " before the deadline")),
                     &later);
    }
    for (auto it = tombstones_.begin(); it != tombstones_.end();) {
      auto next = std::next(it);
      if (it->second < now) tombstones_.erase(it);
      it = next;
    }
    while (!early_delete_order_.empty() &&
           early_delete_order_.front().first < now) {
      early_deletes_.erase(early_delete_order_.front().second);
      early_delete_order_.pop_front();
    }
  }
  Run(later);
}

void OwnerTable::FailWaits(const absl::Status& status) {
  Deferred later;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = status;
    std::vector<WaitId> ids;
    for (const auto& [id, w] : waits_) ids.push_back(id);
    for (WaitId id : ids) FailWaitLocked(id, status, &later);
  }
  Run(later);
}

OwnerStats OwnerTable::stats() const {
  absl::MutexLock lock(&mu_);
  OwnerStats s;
  s.owned = static_cast<int64_t>(entries_.size());
  for (const auto& [rref, e] : entries_) {
    s.forks += static_cast<int64_t>(e.forks.size());
    for (const auto& [fork, f] : e.forks) {
      s.unconfirmed += f.confirmed ? 0 : 1;
      s.abandoned += f.abandoned ? 1 : 0;
    }
  }
  s.parked = static_cast<int64_t>(waits_.size());
  s.early_deletes = static_cast<int64_t>(early_deletes_.size());
  s.forks_walked = forks_walked_;
  s.value_bytes = values_.used();
  return s;
}

int64_t OwnerTable::value_bytes_of(uint64_t creator) const {
  return values_.used_by(Name(creator));
}

std::vector<proto::OwnedRRef> OwnerTable::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<proto::OwnedRRef> out;
  const absl::Time now = clock_->Now();
  for (const auto& [rref, e] : entries_) {
    proto::OwnedRRef r;
    r.set_id(GlobalIdString(rref));
    r.set_creator(Name(e.creator));
    r.set_state(e.state == State::kPending ? "pending"
                : e.state == State::kReady ? "ready"
                                           : "error");
    r.set_age_ms(absl::ToInt64Milliseconds(now - e.created));
    for (const auto& [fork, f] : e.forks) {
      proto::OwnedFork* of = r.add_forks();
      of->set_fork(GlobalIdString(fork));
      of->set_holder(f.holder);
      of->set_holder_name(Name(f.holder));
      of->set_confirmed(f.confirmed);
    }
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.id() < b.id(); });
  return out;
}

OwnerTable::ForkOwnership OwnerTable::Ownership(GlobalId rref,
                                                GlobalId fork) const {
  absl::MutexLock lock(&mu_);
  ForkOwnership out;
  out.gone = tombstones_.contains(rref);
  auto it = entries_.find(rref);
  if (it == entries_.end()) return out;
  out.known = true;
  auto f = it->second.forks.find(fork);
  if (f != it->second.forks.end()) out.holder = f->second.holder;
  return out;
}

bool OwnerTable::HoldsCopy(GlobalId rref, uint64_t node) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(rref);
  if (it == entries_.end()) return false;
  for (const auto& [fork, f] : it->second.forks) {
    if (f.holder == node) return true;
  }
  return false;
}

}  // namespace ferry
