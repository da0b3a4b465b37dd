#include "collectives/op/p2p_book.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ferry {

uint64_t P2pBook::Next(Count& count, uint64_t epoch, bool take) {
  // A new epoch of the pair (a member was replaced): numbers restart, as
  // they do in the newcomer.
  if (epoch > count.epoch) count = Count{epoch, 0};
  return take ? count.next++ : count.next;
}

uint64_t P2pBook::NextSend(int peer, int64_t tag, uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  return Next(sent_[{peer, tag}], epoch, true);
}

uint64_t P2pBook::NextReceive(int peer, int64_t tag, uint64_t epoch,
                              bool take) {
  absl::MutexLock lock(&mu_);
  return Next(received_[{peer, tag}], epoch, take);
}

void P2pBook::Admit(Turns& turns, std::deque<Start>* out) {
  while (!turns.queued.empty()) {
    const bool any = turns.queued.front().first;
    // One from a source joins others from sources; an any-source one
    // waits until nothing runs, and then runs alone.
    if (any ? turns.running > 0 : turns.any_source) return;
    ++turns.running;
    turns.any_source = any;
    out->push_back(std::move(turns.queued.front().second));
    turns.queued.pop_front();
  }
}

void P2pBook::Queue(int64_t tag, bool any_source, Start start) {
  std::deque<Start> ready;
  {
    absl::MutexLock lock(&mu_);
    Turns& turns = turns_[tag];
    turns.queued.emplace_back(any_source, std::move(start));
    Admit(turns, &ready);
  }
  for (Start& s : ready) std::move(s)();
}

void P2pBook::Finished(int64_t tag, bool any_source) {
  std::deque<Start> ready;
  {
    absl::MutexLock lock(&mu_);
    auto it = turns_.find(tag);
    if (it == turns_.end()) return;
    Turns& turns = it->second;
    --turns.running;
    if (any_source) turns.any_source = false;
    Admit(turns, &ready);
    if (turns.running == 0 && turns.queued.empty()) turns_.erase(it);
  }
  for (Start& s : ready) std::move(s)();
}

absl::Status P2pBook::Keep(int src, const std::string& key, Value message) {
  absl::MutexLock lock(&mu_);
  size_t& held = kept_by_source_[src];
  if (held >= kMaxKeptPerSource) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "point-to-point message ", key, " from rank ", src, ": ", held,
        " of its messages are kept for later receives already, the limit"));
  }
  auto [it, fresh] = kept_.try_emplace(key, src, std::move(message));
  if (fresh) {
    ++held;
  } else {
    it->second.second = std::move(message);  // Once per number, but safe.
  }
  return absl::OkStatus();
}

std::optional<Value> P2pBook::Take(const std::string& key) {
  absl::MutexLock lock(&mu_);
  auto it = kept_.find(key);
  if (it == kept_.end()) return std::nullopt;
  Value v = std::move(it->second.second);
  auto count = kept_by_source_.find(it->second.first);
  if (--count->second == 0) kept_by_source_.erase(count);
  kept_.erase(it);
  return v;
}

}  // namespace ferry
