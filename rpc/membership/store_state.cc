#include "rpc/membership/store_state.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

// A key as shown in errors: its start only, escaped.
std::string Shown(const std::string& key) {
  constexpr size_t kShown = 64;
  return absl::StrCat("\"", absl::CEscape(key.substr(0, kShown)),
                      key.size() > kShown ? "…" : "", "\"");
}

// `status` with `context` after its message (same code).
absl::Status Noting(const absl::Status& status, absl::string_view context) {
  return absl::Status(status.code(),
                      absl::StrCat(status.message(), "; ", context));
}

bool System(const StoreCaller& caller, const std::string& key) {
  return caller.worker && absl::StartsWith(key, StoreState::kSystemPrefix);
}

}  // namespace

StoreState::StoreState(StoreLimits limits, Timers* timers)
    : limits_(std::move(limits)), timers_(timers), budget_(limits_.shares) {}

StoreState::~StoreState() { Stop(); }

void StoreState::Stop() {
  std::vector<Finish> done;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    while (!waiters_.empty()) {
      auto it = waiters_.begin();
      RemoveLocked(it, absl::UnavailableError("store: the master is stopping"),
                   it->second.timer, &done);
    }
  }
  FinishAll(std::move(done));
}

int64_t StoreState::num_keys() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(data_.size());
}

int64_t StoreState::num_waits() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(waiters_.size());
}

StoreAmount StoreState::held(const StoreCaller& caller) const {
  absl::MutexLock lock(&mu_);
  return budget_.held(caller);
}

StoreAmount StoreState::job_held() const {
  absl::MutexLock lock(&mu_);
  return budget_.job_held();
}

StoreAmount StoreState::reserved_held() const {
  absl::MutexLock lock(&mu_);
  return budget_.reserved_held();
}

int64_t StoreState::waits_examined() const {
  absl::MutexLock lock(&mu_);
  return examined_;
}

absl::Status StoreState::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("store: an empty key");
  if (static_cast<int64_t>(key.size()) > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: key ", Shown(key), " has ", key.size(),
                     " bytes, over the limit of ", limits_.max_key_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreState::CheckWrite(const StoreCaller& caller,
                                    const std::string& key) const {
  FERRY_RETURN_IF_ERROR(CheckKey(key));
  if (!absl::StartsWith(key, kWorkersOnly) || caller.worker) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("store: key ", Shown(key), " is under \"", kWorkersOnly,
                   "\", which only the job's workers change, and the caller (",
                   StoreCallerLabel(caller), ") is none"));
}

absl::Status StoreState::CheckValue(const std::string& value) const {
  if (static_cast<int64_t>(value.size()) > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: a value of ", value.size(),
                     " bytes, over the limit of ", limits_.max_value_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreState::PutLocked(const StoreCaller& caller,
                                   const std::string& key, std::string value,
                                   std::vector<Finish>* done) {
  auto it = data_.find(key);
  // The writer's charge replaces the last writer's.
  if (it != data_.end()) budget_.Give(it->second.charge);
  StoreAmount amount;
  amount.keys = 1;
  amount.bytes = static_cast<int64_t>(key.size() + value.size());
  absl::StatusOr<StoreBudget::Charge> charge =
      budget_.Take(caller, System(caller, key), amount);
  if (!charge.ok()) {
    if (it != data_.end()) budget_.Restore(it->second.charge);
    return Noting(charge.status(),
                  absl::StrCat("key ", Shown(key), " not set"));
  }
  if (it != data_.end()) {
    it->second = Entry{std::move(value), *charge};
    return absl::OkStatus();  // Its waits counted it set already.
  }
  data_.emplace(key, Entry{std::move(value), *charge});
  auto on = waiting_on_.find(key);
  if (on == waiting_on_.end()) return absl::OkStatus();
  // Only the waits on this key; those it completes leave the index.
  std::vector<uint64_t> complete;
  examined_ += static_cast<int64_t>(on->second.size());
  for (uint64_t id : on->second) {
    Waiter& w = waiters_.at(id);
    if (--w.missing == 0) complete.push_back(id);
  }
  for (uint64_t id : complete) {
    auto w = waiters_.find(id);
    AnswerLocked(w->second);
    RemoveLocked(w, absl::OkStatus(), w->second.timer, done);
  }
  return absl::OkStatus();
}

void StoreState::AnswerLocked(const Waiter& w) {
  if (w.value != nullptr) *w.value = data_.at(w.keys[0]).value;
  if (w.all_set != nullptr) w.all_set->set_all_set(true);
}

void StoreState::RemoveLocked(
    absl::flat_hash_map<uint64_t, Waiter>::iterator it, absl::Status status,
    Timers::TimerId timer, std::vector<Finish>* done) {
  const uint64_t id = it->first;
  Waiter& w = it->second;
  for (const std::string& key : w.keys) {
    auto on = waiting_on_.find(key);
    on->second.erase(id);
    if (on->second.empty()) waiting_on_.erase(on);
  }
  budget_.Give(w.charge);
  done->push_back({std::move(w.reply), std::move(status), timer});
  waiters_.erase(it);
}

void StoreState::FinishAll(std::vector<Finish> done) {
  for (Finish& f : done) {
    if (f.timer != 0) timers_->Cancel(f.timer);
    std::move(f.reply)(std::move(f.status));
  }
}

absl::Status StoreState::Set(const StoreCaller& caller,
                             const proto::StoreSetRequest& request) {
  FERRY_RETURN_IF_ERROR(CheckWrite(caller, request.key()));
  FERRY_RETURN_IF_ERROR(CheckValue(request.value()));
  std::vector<Finish> done;
  absl::Status ok;
  {
    absl::MutexLock lock(&mu_);
    ok = PutLocked(caller, request.key(), request.value(), &done);
  }
  FinishAll(std::move(done));
  return ok;
}

absl::Status StoreState::Add(const StoreCaller& caller,
                             const proto::StoreAddRequest& request,
                             proto::StoreAddResponse* response) {
  FERRY_RETURN_IF_ERROR(CheckWrite(caller, request.key()));
  std::vector<Finish> done;
  absl::Status ok;
  {
    absl::MutexLock lock(&mu_);
    int64_t now = 0;
    const int64_t amount = request.amount();
    auto it = data_.find(request.key());
    if (it != data_.end() && !absl::SimpleAtoi(it->second.value, &now)) {
      ok = absl::InvalidArgumentError(
          absl::StrCat("store: add to key ", Shown(request.key()),
                       ", whose value is not an integer"));
    } else if ((amount > 0 &&
                now > std::numeric_limits<int64_t>::max() - amount) ||
               (amount < 0 &&
                now < std::numeric_limits<int64_t>::min() - amount)) {
      ok = absl::InvalidArgumentError(
          absl::StrCat("store: add ", amount, " to key ", Shown(request.key()),
                       " (", now, ") overflows"));
    } else {
      now += amount;
      ok = PutLocked(caller, request.key(), absl::StrCat(now), &done);
      if (ok.ok()) response->set_value(now);
    }
  }
  FinishAll(std::move(done));
  return ok;
}

absl::Status StoreState::CompareSet(
    const StoreCaller& caller, const proto::StoreCompareSetRequest& request,
    proto::StoreCompareSetResponse* response) {
  FERRY_RETURN_IF_ERROR(CheckWrite(caller, request.key()));
  FERRY_RETURN_IF_ERROR(CheckValue(request.desired()));
  std::vector<Finish> done;
  absl::Status ok;
  {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(request.key());
    const bool matches = it == data_.end()
                             ? request.expected().empty()
                             : it->second.value == request.expected();
    if (matches) {
      ok = PutLocked(caller, request.key(), request.desired(), &done);
      if (ok.ok()) response->set_value(request.desired());
    } else {
      response->set_value(it == data_.end() ? request.expected()
                                            : it->second.value);
    }
  }
  FinishAll(std::move(done));
  return ok;
}

absl::Status StoreState::Delete(const StoreCaller& caller,
                                const proto::StoreDeleteRequest& request,
                                proto::StoreDeleteResponse* response) {
  FERRY_RETURN_IF_ERROR(CheckWrite(caller, request.key()));
  absl::MutexLock lock(&mu_);
  auto it = data_.find(request.key());
  if (it == data_.end()) return absl::OkStatus();
  budget_.Give(it->second.charge);
  data_.erase(it);
  response->set_deleted(true);
  // The waits on it miss it again.
  if (auto on = waiting_on_.find(request.key()); on != waiting_on_.end()) {
    examined_ += static_cast<int64_t>(on->second.size());
    for (uint64_t id : on->second) ++waiters_.at(id).missing;
  }
  return absl::OkStatus();
}

uint64_t StoreState::Get(const StoreCaller& caller,
                         const proto::StoreGetRequest& request,
                         proto::StoreGetResponse* response,
                         absl::Duration call_left, Reply reply) {
  absl::Status ok = CheckKey(request.key());
  if (!ok.ok()) {
    std::move(reply)(ok);
    return 0;
  }
  Waiter w;
  w.keys = {request.key()};
  w.value = response->mutable_value();
  w.wait_ms = request.wait_ms();
  w.reply = std::move(reply);
  return WaitFor(caller, std::move(w), call_left);
}

uint64_t StoreState::Wait(const StoreCaller& caller,
                          proto::StoreWaitRequest request,
                          proto::StoreWaitResponse* response,
                          absl::Duration call_left, Reply reply) {
  // Distinct keys, each checked once and moved out of the request: a
  // request repeating one key costs one.
  // `seen` views w.keys' strings: reserved up front, never reallocated.
  absl::flat_hash_set<absl::string_view> seen;
  Waiter w;
  w.keys.reserve(static_cast<size_t>(std::min<int64_t>(
      request.keys_size(), std::max<int64_t>(limits_.max_wait_keys, 0))));
  absl::Status ok;
  for (std::string& key : *request.mutable_keys()) {
    if (seen.contains(key)) continue;
    ok = CheckKey(key);
    if (!ok.ok()) break;
    if (static_cast<int64_t>(seen.size()) == limits_.max_wait_keys) {
      ok = absl::InvalidArgumentError(absl::StrCat(
          "store: a wait for more than ", limits_.max_wait_keys,
          " distinct keys, over the limit of ", limits_.max_wait_keys));
      break;
    }
    w.keys.push_back(std::move(key));
    seen.insert(w.keys.back());
  }
  if (!ok.ok()) {
    std::move(reply)(ok);
    return 0;
  }
  // wait_ms 0: whether they are set, now (torch's check).
  if (request.wait_ms() == 0) {
    {
      absl::MutexLock lock(&mu_);
      bool all = true;
      for (const std::string& k : w.keys) all = all && data_.contains(k);
      response->set_all_set(all);
    }
    std::move(reply)(absl::OkStatus());
    return 0;
  }
  const int64_t wait_ms = request.wait_ms();
  request.Clear();  // Its keys' husks, before the wait begins.
  w.all_set = response;
  w.wait_ms = wait_ms;
  w.reply = std::move(reply);
  return WaitFor(caller, std::move(w), call_left);
}

uint64_t StoreState::WaitFor(const StoreCaller& caller, Waiter w,
                             absl::Duration call_left) {
  // The shortest of what was asked, the bound, and the call's deadline.
  absl::Duration wait = std::min(
      absl::Milliseconds(std::max<int64_t>(w.wait_ms, 0)), limits_.max_wait);
  wait = std::min(wait, std::max(call_left, absl::ZeroDuration()));
  // Due `wait` from the call's arrival, read before the waiter is visible:
  // read after, a clock that moved meanwhile (a test stepping it once it
  // sees the waiter) would push the deadline out by as much.
  const absl::Time due = timers_->clock()->Now() + wait;
  absl::Status status;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& k : w.keys) w.missing += data_.contains(k) ? 0 : 1;
    if (stopped_) {
      status = absl::UnavailableError("store: the master is stopping");
    } else if (w.missing == 0) {
      AnswerLocked(w);
    } else {
      StoreAmount amount;
      amount.waits = 1;
      bool system = true;
      for (const std::string& k : w.keys) {
        amount.wait_bytes += static_cast<int64_t>(k.size()) + kPerWaitedKey;
        system = system && System(caller, k);
      }
      absl::StatusOr<StoreBudget::Charge> charge =
          budget_.Take(caller, system, amount);
      if (!charge.ok()) {
        status = Noting(
            charge.status(),
            absl::StrCat("a wait for key ", Shown(w.keys[0]),
                         w.keys.size() > 1 ? " and others" : "", " refused"));
      } else {
        id = next_waiter_++;
        w.charge = *charge;
        w.wait_ms = absl::ToInt64Milliseconds(wait);
        for (const std::string& k : w.keys) waiting_on_[k].insert(id);
        waiters_.emplace(id, std::move(w));
      }
    }
  }
  if (id == 0) {
    std::move(w.reply)(std::move(status));
    return 0;
  }
  // Outside the lock: a timer due at once may run before RunAt returns.
  Timers::TimerId timer = timers_->RunAt(due, [this, id] { Expire(id); });
  bool gone = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) {
      gone = true;  // Woken, expired or cancelled already.
    } else {
      it->second.timer = timer;
    }
  }
  if (gone) timers_->Cancel(timer);
  return id;
}

void StoreState::Expire(uint64_t id) {
  std::vector<Finish> done;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    const Waiter& w = it->second;
    std::string missing;
    for (const std::string& k : w.keys) {
      if (!data_.contains(k)) {
        missing = k;
        break;
      }
    }
    RemoveLocked(it,
                 absl::DeadlineExceededError(
                     absl::StrCat("store: key ", Shown(missing),
                                  " not set within ", w.wait_ms, " ms")),
                 0, &done);
  }
  FinishAll(std::move(done));
}

void StoreState::Cancel(uint64_t id) {
  std::vector<Finish> done;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) return;
    RemoveLocked(it, absl::CancelledError("store: the caller cancelled"),
                 it->second.timer, &done);
  }
  FinishAll(std::move(done));
}

}  // namespace ferry
