#include "rpc/membership/membership_events.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/base/timers.h"

namespace ferry {

Value EventValue(const MembershipEvent& e) {
  Value::Map m = {
      {"seq", e.seq},
      {"event", e.kind},
      {"rank", e.rank},
      {"worker", e.worker},
      {"detail", e.detail},
      {"time",
       absl::FormatTime(absl::RFC3339_full, e.time, absl::UTCTimeZone())},
  };
  if (!e.group.empty()) m.emplace("group", e.group);
  return Value(std::move(m));
}

MembershipEvents::~MembershipEvents() { Stop(); }

int64_t MembershipEvents::Subscribe(Subscriber fn) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  subscribers_.emplace(id, std::move(fn));
  return id;
}

void MembershipEvents::Unsubscribe(int64_t id) {
  absl::MutexLock lock(&mu_);
  subscribers_.erase(id);
}

void MembershipEvents::Record(MembershipEvent event) {
  std::vector<Subscriber> subscribers;
  std::vector<std::pair<Promise<std::vector<MembershipEvent>>,
                        std::vector<MembershipEvent>>>
      answers;
  std::vector<Timers::TimerId> timers;
  {
    absl::MutexLock lock(&mu_);
    event.seq = ++last_;
    if (event.time == absl::Time()) event.time = absl::Now();
    kept_.push_back(event);
    if (kept_.size() > kKept) kept_.pop_front();
    for (const auto& [id, fn] : subscribers_) subscribers.push_back(fn);
    for (auto& [id, poll] : polls_) {
      answers.emplace_back(poll.answer, SinceLocked(poll.after));
      timers.push_back(poll.timer);
    }
    polls_.clear();
  }
  for (Timers::TimerId t : timers) timers_->Cancel(t);
  for (auto& [answer, events] : answers) answer.Set(std::move(events));
  for (const Subscriber& fn : subscribers) fn(event);
}

std::vector<MembershipEvent> MembershipEvents::SinceLocked(
    int64_t after) const {
  std::vector<MembershipEvent> out;
  for (const MembershipEvent& e : kept_) {
    if (e.seq > after) out.push_back(e);
  }
  return out;
}

std::vector<MembershipEvent> MembershipEvents::Since(int64_t after) const {
  absl::ReaderMutexLock lock(&mu_);
  return SinceLocked(after);
}

int64_t MembershipEvents::last() const {
  absl::ReaderMutexLock lock(&mu_);
  return last_;
}

Future<std::vector<MembershipEvent>> MembershipEvents::Poll(
    int64_t after, absl::Duration wait) {
  Promise<std::vector<MembershipEvent>> answer;
  int64_t id;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      return Future<std::vector<MembershipEvent>>::Ready(
          absl::UnavailableError("membership events: stopping"));
    }
    // A number past the last (a watcher of an earlier incarnation) counts
    // as "from now on".
    std::vector<MembershipEvent> now =
        SinceLocked(after > last_ ? last_ : after);
    if (!now.empty() || wait <= absl::ZeroDuration()) {
      return Future<std::vector<MembershipEvent>>::Ready(std::move(now));
    }
    if (polls_.size() >= kMaxPolls) {
      return Future<std::vector<MembershipEvent>>::Ready(
          absl::ResourceExhaustedError(absl::StrCat(
              "membership events: ", kMaxPolls, " polls wait already")));
    }
    id = next_id_++;
    polls_.emplace(id, Waiting{after > last_ ? last_ : after, answer});
  }
  // Outside mu_: the timer may run at once.
  Timers::TimerId timer = timers_->RunAfter(wait, [this, id] { TimeOut(id); });
  absl::MutexLock lock(&mu_);
  auto it = polls_.find(id);
  if (it != polls_.end()) it->second.timer = timer;
  return answer.future();
}

void MembershipEvents::TimeOut(int64_t poll) {
  std::optional<Promise<std::vector<MembershipEvent>>> answer;
  {
    absl::MutexLock lock(&mu_);
    auto it = polls_.find(poll);
    if (it == polls_.end()) return;
    answer = it->second.answer;
    polls_.erase(it);
  }
  answer->Set(std::vector<MembershipEvent>());
}

void MembershipEvents::Stop() {
  std::vector<Promise<std::vector<MembershipEvent>>> answers;
  std::vector<Timers::TimerId> timers;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [id, poll] : polls_) {
      answers.push_back(poll.answer);
      timers.push_back(poll.timer);
    }
    polls_.clear();
  }
  for (Timers::TimerId t : timers) timers_->Cancel(t);
  for (auto& answer : answers) answer.Set(std::vector<MembershipEvent>());
}

}  // namespace ferry
