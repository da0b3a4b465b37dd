#include "collectives/collective_context.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {
constexpr size_t kJoinedMemory = 1 << 16;
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
  return context;
}

CollectiveContext::CollectiveContext(RpcAgent* agent, CollectiveConfig config)
    : agent_(agent),
      config_(config),
      mailbox_(config.max_buffer_bytes),
      exchange_(std::make_unique<Exchange>(
          agent->rank(), &agent->directory(), &agent->channels(),
          &agent->membership(), &mailbox_, &agent->timers(),
          Exchange::Options{config.chunk_bytes})),
      executor_(std::make_unique<Executor>(config.threads)) {}

CollectiveContext::~CollectiveContext() { Stop(); }

ProcessGroup& CollectiveContext::world() {
  absl::MutexLock lock(&mu_);
  if (world_ == nullptr) {
    std::vector<int> all(agent_->world_size());
    for (int r = 0; r < agent_->world_size(); ++r) all[r] = r;
    world_ = std::make_shared<ProcessGroup>(this, "world", std::move(all),
                                            agent_->rank());
  }
  return *world_;
}

absl::StatusOr<int> CollectiveContext::IndexIn(
    const std::vector<int>& ranks) const {
  const int world = agent_->world_size();
  int mine = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= world) {
      return absl::InvalidArgumentError(absl::StrCat(
          "group rank ", ranks[i], " is out of range [0, ", world, ")"));
    }
    if (std::find(ranks.begin(), ranks.begin() + i, ranks[i]) !=
        ranks.begin() + i) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", ranks[i], " appears twice in the group"));
    }
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
  std::string base = absl::StrCat("g", absl::StrJoin(ranks, ","));
  int n;
  {
    absl::MutexLock lock(&mu_);
    n = groups_made_[base]++;
  }
  return std::make_shared<ProcessGroup>(this, absl::StrCat(base, "#", n),
                                        std::move(ranks), mine);
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> CollectiveContext::NamedGroup(
    std::vector<int> ranks, std::string name) {
  FERRY_ASSIGN_OR_RETURN(int mine, IndexIn(ranks));
  return std::make_shared<ProcessGroup>(this, std::move(name), std::move(ranks),
                                        mine);
}

void CollectiveContext::Began(const std::string& key, std::string label,
                              std::vector<int> members) {
  bool stopping;
  {
    absl::MutexLock lock(&mu_);
    stopping = stopping_;
    running_[key] = Running{label, members};
    if (joined_.insert(key).second) {
      joined_order_.push_back(key);
      if (joined_order_.size() > kJoinedMemory) {
        joined_.erase(joined_order_.front());
        joined_order_.pop_front();
      }
    }
  }
  if (stopping) {
    mailbox_.Abort(key, Stopping()).IgnoreError();
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
    break;
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
}

void CollectiveContext::Stop() {
  std::vector<std::string> running;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;  // Ops that begin from now on fail at once.
    for (const auto& [key, op] : running_) running.push_back(key);
  }
  // Ops still waiting end now instead of at their deadline.
  for (const std::string& key : running)
    mailbox_.Abort(key, Stopping()).IgnoreError();
  exchange_->Stop();
  executor_->Stop(absl::Now() + absl::Seconds(2));
}

void CollectiveContext::FillStatus(proto::WorkerStatus* status) const {
  {
    absl::MutexLock lock(&mu_);
    status->set_collectives_inflight(static_cast<int64_t>(running_.size()));
  }
  status->set_mailbox_bytes(mailbox_.held_bytes());
}

}  // namespace ferry
