#include "collectives/op/vote_book.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/transport/op_key.h"

namespace ferry {

VoteBook::VoteBook(Timers* timers, int world_size,
                   std::function<bool(int, uint64_t)> is_gone)
    : timers_(timers), world_size_(world_size), is_gone_(std::move(is_gone)) {}

VoteBook::~VoteBook() { Stop(); }

std::vector<int> VoteBook::Missing(const Entry& entry) const {
  std::vector<int> missing;
  for (size_t i = 0; i < entry.members.size(); ++i) {
    const int r = entry.members[i];
    if (entry.votes.count(r) == 0 && !is_gone_(r, entry.generations[i])) {
      missing.push_back(static_cast<int>(i));
    }
  }
  return missing;
}

std::optional<std::pair<Promise<VoteBook::Votes>, VoteBook::Votes>>
VoteBook::TakeIfComplete(const std::string& key) {
  auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.done.has_value()) return std::nullopt;
  if (!Missing(it->second).empty()) return std::nullopt;
  // The members' votes only: the key's group (what Vote checked) is the
  // members' for every real caller, but the result must not depend on it.
  Votes votes;
  for (int r : it->second.members) {
    auto v = it->second.votes.find(r);
    if (v != it->second.votes.end()) votes.emplace(r, v->second);
  }
  std::pair<Promise<Votes>, Votes> out(*it->second.done, std::move(votes));
  // Cancelled here, it will not run; if it is running, Expire finds no
  // entry (or a new one, which it leaves alone: it has no promise yet).
  timers_->Cancel(it->second.timer);
  entries_.erase(it);
  return out;
}

Future<VoteBook::Votes> VoteBook::Collect(const std::string& key,
                                          std::vector<int> members,
                                          std::vector<uint64_t> generations,
                                          int self, bool flag,
                                          absl::Time deadline) {
  Promise<Votes> done;
  std::optional<std::pair<Promise<Votes>, Votes>> complete;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      return Future<Votes>::Ready(
          absl::UnavailableError("agreement " + key + ": stopping"));
    }
    Entry& entry = entries_[key];
    if (entry.done.has_value()) {
      return Future<Votes>::Ready(absl::AlreadyExistsError(
          absl::StrCat("agreement ", key, " is being collected already")));
    }
    generations.resize(members.size(), 0);
    ForgetEarlyLocked(key, entry.votes);
    entry.members = std::move(members);
    entry.generations = std::move(generations);
    entry.votes[self] = flag;
    entry.done = done;
    complete = TakeIfComplete(key);
  }
  if (complete.has_value()) {
    complete->first.Set(std::move(complete->second));
    return done.future();
  }
  // Outside mu_: a timer may run at once (a deadline already past).
  Timers::TimerId timer =
      timers_->RunAt(deadline, [this, key] { Expire(key); });
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it != entries_.end() && it->second.done.has_value()) {
    it->second.timer = timer;
  }
  return done.future();
}

void VoteBook::Expire(const std::string& key) {
  std::optional<Promise<Votes>> done;
  std::string missing;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.done.has_value()) return;
    std::vector<std::string> names;
    for (int i : Missing(it->second)) {
      names.push_back(absl::StrCat("group rank ", i, " (worker",
                                   it->second.members[i], ")"));
    }
    missing = absl::StrJoin(names, ", ");
    done = std::move(it->second.done);
    entries_.erase(it);
  }
  done->Set(absl::DeadlineExceededError(
      absl::StrCat("agreement ", key, ": no vote from ", missing,
                   ", which are not known gone")));
}

absl::Status VoteBook::Vote(const std::string& key, int from, int self,
                            bool flag) {
  // Step 0: the key must be an op of a group holding both, from another.
  absl::Status allowed = CheckSender(key, 0, from, self, world_size_);
  if (!allowed.ok()) return allowed;
  std::optional<std::pair<Promise<Votes>, Votes>> complete;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::OkStatus();
    auto it = entries_.find(key);
    const bool early = it == entries_.end() || !it->second.done.has_value();
    if (early && key.size() > kMaxEarlyBytesPerSender) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "agreement vote from rank ", from, ": a key of ", key.size(),
          " bytes, over the limit of ", kMaxEarlyBytesPerSender,
          " for a vote this worker does not collect yet"));
    }
    if (it == entries_.end()) it = entries_.try_emplace(key).first;
    // The first vote counts.
    if (it->second.votes.emplace(from, flag).second && early) {
      AddEarlyLocked(from, key);
    }
    complete = TakeIfComplete(key);
  }
  if (complete.has_value()) complete->first.Set(std::move(complete->second));
  return absl::OkStatus();
}

void VoteBook::AddEarlyLocked(int from, const std::string& key) {
  Early& mine = early_[from];
  const std::string group = GroupOfOp(key);
  mine.votes.push_back({key, group});
  mine.bytes += key.size();
  // Its own oldest in the group, then its own oldest of all: never the
  // vote just taken (its key alone fits the bytes, checked by Vote).
  size_t in_group = 0;
  for (const Early::Vote& v : mine.votes) in_group += v.group == group;
  for (auto v = mine.votes.begin(); in_group > kMaxEarlyPerGroup;) {
    if (v->group != group) {
      ++v;
      continue;
    }
    DropEarlyLocked(from, v);
    v = mine.votes.begin();
    --in_group;
  }
  while (mine.votes.size() > kMaxEarlyPerSender ||
         mine.bytes > kMaxEarlyBytesPerSender) {
    DropEarlyLocked(from, mine.votes.begin());
  }
}

void VoteBook::DropEarlyLocked(int from, std::deque<Early::Vote>::iterator at) {
  Early& mine = early_[from];
  auto entry = entries_.find(at->key);
  if (entry != entries_.end() && !entry->second.done.has_value()) {
    entry->second.votes.erase(from);
    if (entry->second.votes.empty()) entries_.erase(entry);
  }
  mine.bytes -= at->key.size();
  mine.votes.erase(at);
}

void VoteBook::ForgetEarlyLocked(const std::string& key, const Votes& votes) {
  for (const auto& [from, flag] : votes) {
    auto mine = early_.find(from);
    if (mine == early_.end()) continue;
    std::deque<Early::Vote>& v = mine->second.votes;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (it->key != key) continue;
      mine->second.bytes -= key.size();
      v.erase(it);
      break;
    }
    if (v.empty()) early_.erase(mine);
  }
}

size_t VoteBook::early_votes() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [from, mine] : early_) n += mine.votes.size();
  return n;
}

size_t VoteBook::early_votes(int from) const {
  absl::MutexLock lock(&mu_);
  auto mine = early_.find(from);
  return mine == early_.end() ? 0 : mine->second.votes.size();
}

void VoteBook::Recheck() {
  std::vector<std::pair<Promise<Votes>, Votes>> complete;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> keys;
    for (const auto& [key, entry] : entries_) {
      if (entry.done.has_value()) keys.push_back(key);
    }
    for (const std::string& key : keys) {
      auto c = TakeIfComplete(key);
      if (c.has_value()) complete.push_back(*std::move(c));
    }
  }
  for (auto& [done, votes] : complete) done.Set(std::move(votes));
}

void VoteBook::Stop() {
  std::vector<Promise<Votes>> pending;
  std::vector<Timers::TimerId> timers;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [key, entry] : entries_) {
      if (entry.done.has_value()) pending.push_back(*entry.done);
      if (entry.timer != 0) timers.push_back(entry.timer);
    }
    entries_.clear();
    early_.clear();
  }
  for (Timers::TimerId t : timers) timers_->Cancel(t);
  for (Promise<Votes>& p : pending) {
    p.Set(absl::UnavailableError("agreement: this worker is stopping"));
  }
}

void VoteBook::SetFaultForTesting(Fault fault) {
  absl::MutexLock lock(&mu_);
  fault_ = std::move(fault);
}

bool VoteBook::StopsAt(Point point, int peer) const {
  Fault fault;
  {
    absl::MutexLock lock(&mu_);
    fault = fault_;
  }
  // The test's code runs outside the lock.
  return fault != nullptr && fault(point, peer);
}

}  // namespace ferry
