#include "collectives/op/collective_context.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/transport/op_key.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {
constexpr size_t kJoinedMemory = 1 << 16;
// How often stale messages are looked for, at most (and at least a few
// times per time-to-live, so they go soon after it).
constexpr absl::Duration kMaxSweepInterval = absl::Seconds(1);
constexpr absl::Duration kMinSweepInterval = absl::Milliseconds(10);
}  // namespace

std::shared_ptr<CollectiveContext> CollectiveContext::ForWorker(
    RpcAgent* agent, CollectiveConfig config) {
  auto context = std::make_shared<CollectiveContext>(agent, config);
  agent->SetGenericService(context->exchange_.get());
  agent->AddExtension(context.get());
  std::weak_ptr<CollectiveContext> weak = context;
  agent->membership().AddListener(
      [weak](uint64_t node, const absl::Status& reason) {
        if (auto c = weak.lock()) c->OnNodeDown(node, reason);
      });
  // Lets a rank that timed out ask who joined an op.
  absl::Status s = agent->registry().Register(
      "ferry.collective_joined",
      [weak](const std::string& key) {
        auto c = weak.lock();
        return c != nullptr && c->Joined(key);
      },
      {.params = {"op"},
       .doc = "whether this worker began collective op `op`",
       .run_inline = true});
  (void)s;  // A fixed, valid, unique name.
  // ... and which op: a program calling collectives in a different order
  // here is named, not only timed out.
  s = agent->registry().Register(
      "ferry.collective_op",
      [weak](const std::string& key) {
        auto c = weak.lock();
        return c == nullptr ? std::string() : c->OpAt(key);
      },
      {.params = {"op_key"},
       .doc = "the collective this worker began as op `op_key` (\"\": none)",
       .run_inline = true});
  (void)s;
  s = agent->registry().Register(
      "ferry.flight_recorder",
      [weak]() {
        auto c = weak.lock();
        return c == nullptr ? Value() : c->FlightDump("on demand");
      },
      {.doc = "this worker's flight recorder: its recent collectives, as "
              "torch's flight recorder dumps them (ferryctl dump)"});
  (void)s;
  if (!config.dump_dir.empty()) {
    context->dumps_ = std::make_shared<FlightDumps>(
        config.dump_dir, agent->rank(), &agent->executor(),
        [weak](const std::string& reason) {
          auto c = weak.lock();
          return c == nullptr ? Value() : c->FlightDump(reason);
        });
  }
  context->ScheduleSweep();
  return context;
}

CollectiveContext::CollectiveContext(RpcAgent* agent, CollectiveConfig config)
    : agent_(agent),
      config_(config),
      clock_(agent->timers().clock()),
      mailbox_(agent->limits(), clock_),
      exchange_(std::make_unique<Exchange>(
          agent->rank(), &agent->directory(), &agent->channels(),
          &agent->membership(), &mailbox_, &agent->timers(),
          Exchange::Options{.chunk_bytes = config.chunk_bytes,
                            .standing_bytes = config.standing_bytes,
                            .world_size = agent->world_size(),
                            .ttl_ms = agent->limits().mailbox_ttl_ms,
                            .authenticator = &agent->authenticator(),
                            .open_streams = agent->open_streams()})),
      recorder_({.capacity = config.flight_recorder_entries, .clock = clock_}),
      votes_(std::make_unique<VoteBook>(
          &agent->timers(), agent->world_size(),
          [agent](int rank, uint64_t generation) {
            // Gone, or replaced since the group knew it.
            return agent->membership()
                       .DownReason(WorkerNode(rank))
                       .has_value() ||
                   agent->directory().at(rank).generation != generation;
          })) {}

CollectiveContext::~CollectiveContext() { Stop(); }

ProcessGroup& CollectiveContext::world() {
  absl::MutexLock lock(&mu_);
  if (world_ == nullptr) {
    std::vector<int> all(agent_->world_size());
    for (int r = 0; r < agent_->world_size(); ++r) all[r] = r;
    world_ = std::make_shared<ProcessGroup>(this, WorldGroupName(),
                                            std::move(all), agent_->rank());
  }
  return *world_;
}

uint64_t CollectiveContext::Epoch(const std::vector<int>& members) const {
  const Directory& directory = agent_->directory();
  uint64_t epoch = 0;
  for (int r : members) epoch += directory.at(r).generation;
  return epoch;
}

std::vector<uint64_t> CollectiveContext::Generations(
    const std::vector<int>& members) const {
  const Directory& directory = agent_->directory();
  std::vector<uint64_t> out;
  out.reserve(members.size());
  for (int r : members) out.push_back(directory.at(r).generation);
  return out;
}

absl::StatusOr<int> CollectiveContext::IndexIn(
    const std::vector<int>& ranks) const {
  const int world = agent_->world_size();
  int mine = -1;
  std::vector<bool> seen(world, false);  // Linear, however many ranks.
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group rank ", ranks[i], " is out of range [0, ", world, ")"));
    }
    if (seen[ranks[i]]) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", ranks[i], " appears twice in the group"));
    }
    seen[ranks[i]] = true;
    if (ranks[i] == rank()) mine = static_cast<int>(i);
  }
  if (mine < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(agent_->name(), " is not a member of group [",
                     absl::StrJoin(ranks, ", "), "]"));
  }
  return mine;
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> CollectiveContext::NewGroup(
    std::vector<int> ranks) {
  FERRY_ASSIGN_OR_RETURN(int mine, IndexIn(ranks));
  std::string base = absl::StrJoin(ranks, ",");
  int n;
  {
    absl::MutexLock lock(&mu_);
    n = groups_made_[base]++;
  }
  return std::make_shared<ProcessGroup>(this, NewGroupName(ranks, n),
                                        std::move(ranks), mine);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> CollectiveContext::NamedGroup(
    std::vector<int> ranks, uint64_t n, bool pinned, std::vector<int> origin) {
  FERRY_ASSIGN_OR_RETURN(int mine, IndexIn(ranks));
  std::string name = NewGroupName(ranks, n);
  return std::make_shared<ProcessGroup>(this, std::move(name), std::move(ranks),
                                        mine, pinned, std::move(origin));
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> CollectiveContext::ClientGroup(
    std::vector<int> ranks) {
  FERRY_ASSIGN_OR_RETURN(int mine, IndexIn(ranks));
  return std::make_shared<ProcessGroup>(this, ClientGroupName(ranks),
                                        std::move(ranks), mine);
}

void CollectiveContext::Began(const std::string& key, std::string label,
                              std::vector<int> members, const RunningOp* op) {
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
    running_[key] = Running{label, members, op, clock_->Now()};
    if (joined_.emplace(key, op != nullptr ? op->op_name() : label).second) {
      joined_order_.push_back(key);
      if (joined_order_.size() > kJoinedMemory) {
        joined_.erase(joined_order_.front());
        joined_order_.pop_front();
      }
    }
  }
  // Its messages, early or late, wait for it from now on (no TTL).
  mailbox_.Begin(key);
  if (stopping) {
    mailbox_.Abort(key, Stopping()).IgnoreError();
    return;
  }
  if (std::optional<absl::Status> revoked = RevokedFor(key)) {
    mailbox_.Abort(key, *revoked).IgnoreError();
    return;
  }
  // A member already known dead fails the op at once, as a death during
  // the op does, instead of at its deadline. Checked after the op is in
  // running_: a death reported meanwhile is caught here or by OnNodeDown.
  for (size_t i = 0; i < members.size(); ++i) {
    std::optional<absl::Status> down =
        agent_->membership().DownReason(WorkerNode(members[i]));
    if (!down.has_value()) continue;
    mailbox_.Abort(key, Died(label, static_cast<int>(i), members[i], *down))
        .IgnoreError();
    return;
  }
  // Named before a replacement this worker has seen since: the members
  // (the newcomer at least) run the next op under the new epoch's name, so
  // nobody would come. (Checked after the deaths: a replacement is in the
  // directory before its rank counts alive again.)
  std::optional<uint64_t> epoch = EpochOfOp(key);
  if (epoch.has_value() && *epoch != Epoch(members)) {
    mailbox_
        .Abort(key, absl::UnavailableError(absl::StrCat(
                        label,
                        ": a member of its group was replaced while it "
                        "began (epoch ",
                        *epoch, ", now ", Epoch(members), "); run it again")))
        .IgnoreError();
  }
}

absl::Status CollectiveContext::Stopping() const {
  return absl::UnavailableError(absl::StrCat(agent_->name(), " is stopping"));
}

absl::Status CollectiveContext::Died(const std::string& label, int group_rank,
                                     int dead, const absl::Status& reason) {
  return absl::UnavailableError(absl::StrCat(
      label, ": rank ", group_rank, " (", agent_->directory().at(dead).name,
      ") died (", reason.message(), ")"));
}

void CollectiveContext::Ended(const std::string& key) {
  absl::MutexLock lock(&mu_);
  running_.erase(key);
}

bool CollectiveContext::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool CollectiveContext::Joined(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  return joined_.contains(key);
}

std::string CollectiveContext::OpAt(const std::string& key) const {
  absl::MutexLock lock(&mu_);
  auto it = joined_.find(key);
  return it == joined_.end() ? std::string() : it->second;
}

void CollectiveContext::OpEnded(uint64_t id, const absl::Status& status) {
  recorder_.Ended(id, status);
  // A worker stopping fails what runs: that is no finding to dump.
  if (status.ok() || dumps_ == nullptr || stopping()) return;
  dumps_->Request(std::string(status.message()));
}

Value CollectiveContext::FlightDump(const std::string& reason) const {
  return DumpValue(recorder_.Snapshot(), recorder_.Progress(),
                   {.worker = agent_->name(),
                    .rank = agent_->rank(),
                    .world_size = agent_->world_size(),
                    .pid = static_cast<int64_t>(getpid()),
                    .reason = reason,
                    .wall_now = absl::Now(),
                    .capacity = recorder_.capacity(),
                    .recorded = recorder_.recorded()});
}

void CollectiveContext::OnNodeDown(uint64_t node, const absl::Status& reason) {
  if (!IsWorkerNode(node)) return;
  const int dead = static_cast<int>(node);
  std::vector<std::pair<std::string, absl::Status>> aborts;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, op] : running_) {
      auto it = std::find(op.members.begin(), op.members.end(), dead);
      if (it == op.members.end()) continue;
      aborts.emplace_back(
          key, Died(op.label, static_cast<int>(it - op.members.begin()), dead,
                    reason));
    }
  }
  exchange_->FailNode(node, reason);
  for (const auto& [key, status] : aborts)
    mailbox_.Abort(key, status).IgnoreError();
  votes_->Recheck();
}

absl::StatusOr<KeyValueStore*> CollectiveContext::Arbiter() {
  {
    absl::MutexLock lock(&mu_);
    if (arbiter_ != nullptr) return arbiter_.get();
  }
  // Not under mu_: opening etcd's connects. Racing first uses each open
  // one; the first kept wins.
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<KeyValueStore> store,
                         agent_->membership_backend().OpenStore());
  absl::MutexLock lock(&mu_);
  if (arbiter_ == nullptr) arbiter_ = std::move(store);
  return arbiter_.get();
}

bool CollectiveContext::Revoke(const std::string& group, uint64_t epoch,
                               absl::Status why) {
  std::vector<std::string> running;
  {
    absl::MutexLock lock(&mu_);
    auto [it, fresh] = revoked_.try_emplace(group, Revocation{epoch, why});
    if (!fresh) {
      if (it->second.epoch >= epoch) return false;
      it->second = Revocation{epoch, why};
    } else {
      revoked_order_.push_back(group);
      if (revoked_order_.size() > kMaxRevoked) {
        revoked_.erase(revoked_order_.front());
        revoked_order_.pop_front();
      }
    }
    for (const auto& [key, op] : running_) {
      if (GroupOfOp(key) == group) running.push_back(key);
    }
  }
  // Only the running ops of that epoch or an earlier one: a revoke that
  // arrives late (a relay, after the group grew back) leaves the grown
  // group's ops alone.
  for (const std::string& key : running) {
    if (OpEpoch(key).value_or(epoch) > epoch) continue;
    mailbox_.Abort(key, why).IgnoreError();
  }
  agent_->events().Record({.kind = "revoked",
                           .group = group,
                           .detail = std::string(why.message())});
  return true;
}

std::optional<absl::Status> CollectiveContext::Revoked(
    const std::string& group) const {
  absl::MutexLock lock(&mu_);
  auto it = revoked_.find(group);
  if (it == revoked_.end()) return std::nullopt;
  return it->second.why;
}

std::optional<absl::Status> CollectiveContext::RevokedFor(
    const std::string& key) const {
  std::optional<Revocation> revocation;
  {
    absl::MutexLock lock(&mu_);
    auto it = revoked_.find(GroupOfOp(key));
    if (it == revoked_.end()) return std::nullopt;
    revocation = it->second;
  }
  if (OpEpoch(key).value_or(revocation->epoch) > revocation->epoch) {
    return std::nullopt;
  }
  return revocation->why;
}

std::optional<uint64_t> CollectiveContext::OpEpoch(
    const std::string& key) const {
  if (std::optional<uint64_t> e = EpochOfOp(key)) return e;
  // A tagged or point-to-point op belongs to its group's epoch now.
  absl::StatusOr<std::vector<int>> all = MembersOfOp(key, agent_->world_size());
  if (!all.ok()) return std::nullopt;
  return Epoch(*all);
}

void CollectiveContext::ExpireStale() {
  mailbox_.ExpireStale();
  exchange_->ExpireStale();
}

void CollectiveContext::ScheduleSweep() {
  const absl::Duration interval =
      std::clamp(absl::Milliseconds(agent_->limits().mailbox_ttl_ms) / 4,
                 kMinSweepInterval, kMaxSweepInterval);
  std::weak_ptr<CollectiveContext> weak = weak_from_this();
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  sweep_ = agent_->timers().RunAfter(interval, [weak] {
    if (auto c = weak.lock()) {
      c->ExpireStale();
      c->ScheduleSweep();
    }
  });
}

void CollectiveContext::Stop() {
  std::vector<std::string> running;
  Timers::TimerId sweep;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;  // Ops that begin from now on fail at once.
    for (const auto& [key, op] : running_) running.push_back(key);
    sweep = sweep_;
    sweep_ = 0;
  }
  if (sweep != 0) agent_->timers().Cancel(sweep);
  votes_->Stop();
  // Ops still waiting end now instead of at their deadline.
  for (const std::string& key : running)
    mailbox_.Abort(key, Stopping()).IgnoreError();
  exchange_->Stop();
}

void CollectiveContext::FillStatus(proto::WorkerStatus* status) const {
  absl::flat_hash_map<std::string, proto::GroupProgress*> groups;
  for (const GroupProgress& g : recorder_.Progress()) {
    proto::GroupProgress* p = status->add_groups();
    p->set_group(g.group);
    p->set_last_scheduled_seq(g.last_scheduled);
    p->set_last_scheduled_op(g.last_scheduled_op);
    p->set_last_completed_seq(g.last_completed);
    p->set_last_completed_op(g.last_completed_op);
    p->set_last_failed(g.last_failed);
    groups[g.group] = p;
  }
  FillWaits(groups, status);
  status->set_mailbox_bytes(mailbox_.held_bytes());
}

void CollectiveContext::FillWaits(
    const absl::flat_hash_map<std::string, proto::GroupProgress*>& groups,
    proto::WorkerStatus* status) const {
  absl::MutexLock lock(&mu_);
  status->set_collectives_inflight(static_cast<int64_t>(running_.size()));
  const absl::Time now = clock_->Now();
  for (const auto& [key, op] : running_) {
    const std::string group = key.substr(0, key.find('/'));
    auto it = groups.find(group);
    if (it == groups.end()) continue;  // Tagged-only groups: not tracked.
    proto::GroupProgress* p = it->second;
    p->set_running(p->running() + 1);
    const int64_t seq = SequenceOfOp(key).value_or(-1);
    const bool older = p->waiting().op().empty() || seq < p->waiting().seq();
    if (!older || op.op == nullptr) continue;
    proto::WaitingIn* w = p->mutable_waiting();
    w->Clear();
    w->set_op(op.op->op_name());
    w->set_key(key);
    w->set_seq(seq);
    w->set_waiting_ms(absl::ToInt64Milliseconds(now - op.began));
    // The op stays valid while it is in running_ (Ended needs mu_).
    for (int r : op.op->WaitingFor()) {
      const int global = op.members[r];
      w->add_waiting_for_ranks(global);
      w->add_waiting_for(agent_->directory().at(global).name);
    }
  }
}

}  // namespace ferry
