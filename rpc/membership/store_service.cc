#include "rpc/membership/store_service.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/base/status_util.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

// A key as shown in errors: its start only, escaped.
std::string Shown(const std::string& key) {
  constexpr size_t kShown = 64;
  return absl::StrCat("\"", absl::CEscape(key.substr(0, kShown)),
                      key.size() > kShown ? "…" : "", "\"");
}

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context,
                                 const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

int64_t Bytes(const std::string& key, const std::string& value) {
  return static_cast<int64_t>(key.size() + value.size());
}

}  // namespace

StoreService::StoreService(StoreLimits limits, Timers* timers,
                           const Limits& wire, IsWorker is_worker)
    : BoundedService(ServiceOf<proto::StoreSetRequest>("Store"), wire,
                     "worker0"),
      limits_(limits),
      timers_(timers),
      is_worker_(std::move(is_worker)) {
  Bound(&StoreService::Set, "Set");
  Bound(&StoreService::Get, "Get");
  Bound(&StoreService::Add, "Add");
  Bound(&StoreService::CompareSet, "CompareSet");
  Bound(&StoreService::Delete, "Delete");
  Bound(&StoreService::Wait, "Wait");
  Bound(&StoreService::NumKeys, "NumKeys");
}

StoreService::~StoreService() { Stop(); }

void StoreService::Stop() {
  std::vector<Finish> done;
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (auto& [id, w] : waiters_) {
      done.push_back({w.reactor,
                      absl::UnavailableError("store: the master is stopping"),
                      w.timer});
    }
    waiters_.clear();
  }
  FinishAll(std::move(done));
}

int64_t StoreService::num_keys() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(data_.size());
}

int64_t StoreService::num_waits() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(waiters_.size());
}

absl::Status StoreService::CheckKey(const std::string& key) const {
  if (key.empty()) return absl::InvalidArgumentError("store: an empty key");
  if (static_cast<int64_t>(key.size()) > limits_.max_key_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: key ", Shown(key), " has ", key.size(),
                     " bytes, over the limit of ", limits_.max_key_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreService::CheckWrite(const grpc::ServerContextBase& call,
                                      const std::string& key) const {
  FERRY_RETURN_IF_ERROR(CheckKey(key));
  if (!is_worker_ || !absl::StartsWith(key, kWorkersOnly) || is_worker_(call)) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("store: key ", Shown(key), " is under \"", kWorkersOnly,
                   "\", which only the job's workers change, and the caller "
                   "is none"));
}

absl::Status StoreService::CheckValue(const std::string& value) const {
  if (static_cast<int64_t>(value.size()) > limits_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("store: a value of ", value.size(),
                     " bytes, over the limit of ", limits_.max_value_bytes));
  }
  return absl::OkStatus();
}

absl::Status StoreService::PutLocked(const std::string& key, std::string value,
                                     std::vector<Finish>* done) {
  auto it = data_.find(key);
  const int64_t before = it == data_.end() ? 0 : Bytes(key, it->second);
  const int64_t after = Bytes(key, value);
  if (it == data_.end() &&
      static_cast<int64_t>(data_.size()) >= limits_.max_keys) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "store: ", limits_.max_keys, " keys held already, the limit; key ",
        Shown(key), " not set"));
  }
  if (bytes_ - before + after > limits_.max_total_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "store: ", bytes_, " bytes held; key ", Shown(key), " would go over ",
        "the limit of ", limits_.max_total_bytes));
  }
  bytes_ += after - before;
  data_[key] = std::move(value);
  WakeLocked(done);
  return absl::OkStatus();
}

bool StoreService::AllSetLocked(const std::vector<std::string>& keys) const {
  for (const std::string& k : keys) {
    if (!data_.contains(k)) return false;
  }
  return true;
}

void StoreService::WakeLocked(std::vector<Finish>* done) {
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    Waiter& w = it->second;
    if (!AllSetLocked(w.keys)) {
      ++it;
      continue;
    }
    if (w.value != nullptr) *w.value = data_[w.keys[0]];
    if (w.all_set != nullptr) w.all_set->set_all_set(true);
    done->push_back({w.reactor, absl::OkStatus(), w.timer});
    waiters_.erase(it++);
  }
}

void StoreService::FinishAll(std::vector<Finish> done) {
  for (Finish& f : done) {
    if (f.timer != 0) timers_->Cancel(f.timer);
    f.reactor->Finish(ToGrpcStatus(f.status));
  }
}

grpc::ServerUnaryReactor* StoreService::Set(
    grpc::CallbackServerContext* context, const proto::StoreSetRequest* request,
    proto::StoreSetResponse* /*response*/) {
  absl::Status ok = CheckWrite(*context, request->key());
  if (ok.ok()) ok = CheckValue(request->value());
  std::vector<Finish> done;
  if (ok.ok()) {
    absl::MutexLock lock(&mu_);
    ok = PutLocked(request->key(), request->value(), &done);
  }
  FinishAll(std::move(done));
  return Answer(context, ok);
}

grpc::ServerUnaryReactor* StoreService::Add(
    grpc::CallbackServerContext* context, const proto::StoreAddRequest* request,
    proto::StoreAddResponse* response) {
  absl::Status ok = CheckWrite(*context, request->key());
  std::vector<Finish> done;
  if (ok.ok()) {
    absl::MutexLock lock(&mu_);
    int64_t now = 0;
    auto it = data_.find(request->key());
    if (it != data_.end() && !absl::SimpleAtoi(it->second, &now)) {
      ok = absl::InvalidArgumentError(
          absl::StrCat("store: add to key ", Shown(request->key()),
                       ", whose value is not an integer"));
    } else if ((request->amount() > 0 &&
                now >
                    std::numeric_limits<int64_t>::max() - request->amount()) ||
               (request->amount() < 0 &&
                now <
                    std::numeric_limits<int64_t>::min() - request->amount())) {
      ok = absl::InvalidArgumentError(
          absl::StrCat("store: add ", request->amount(), " to key ",
                       Shown(request->key()), " (", now, ") overflows"));
    } else {
      now += request->amount();
      ok = PutLocked(request->key(), absl::StrCat(now), &done);
      response->set_value(now);
    }
  }
  FinishAll(std::move(done));
  return Answer(context, ok);
}

grpc::ServerUnaryReactor* StoreService::CompareSet(
    grpc::CallbackServerContext* context,
    const proto::StoreCompareSetRequest* request,
    proto::StoreCompareSetResponse* response) {
  absl::Status ok = CheckWrite(*context, request->key());
  if (ok.ok()) ok = CheckValue(request->desired());
  std::vector<Finish> done;
  if (ok.ok()) {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(request->key());
    // torch's compare_set: an unset key matches an empty `expected`.
    const bool matches = it == data_.end() ? request->expected().empty()
                                           : it->second == request->expected();
    if (matches) {
      ok = PutLocked(request->key(), request->desired(), &done);
      response->set_value(request->desired());
    } else {
      response->set_value(it == data_.end() ? request->expected() : it->second);
    }
  }
  FinishAll(std::move(done));
  return Answer(context, ok);
}

grpc::ServerUnaryReactor* StoreService::Delete(
    grpc::CallbackServerContext* context,
    const proto::StoreDeleteRequest* request,
    proto::StoreDeleteResponse* response) {
  absl::Status ok = CheckWrite(*context, request->key());
  if (ok.ok()) {
    absl::MutexLock lock(&mu_);
    auto it = data_.find(request->key());
    if (it != data_.end()) {
      bytes_ -= Bytes(it->first, it->second);
      data_.erase(it);
      response->set_deleted(true);
    }
  }
  return Answer(context, ok);
}

grpc::ServerUnaryReactor* StoreService::NumKeys(
    grpc::CallbackServerContext* context,
    const proto::StoreNumKeysRequest* /*request*/,
    proto::StoreNumKeysResponse* response) {
  response->set_keys(num_keys());
  return Answer(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* StoreService::Get(
    grpc::CallbackServerContext* context, const proto::StoreGetRequest* request,
    proto::StoreGetResponse* response) {
  absl::Status ok = CheckKey(request->key());
  if (!ok.ok()) return Answer(context, ok);
  Waiter w;
  w.keys = {request->key()};
  w.value = response->mutable_value();
  w.wait_ms = request->wait_ms();
  return WaitFor(context, std::move(w));
}

grpc::ServerUnaryReactor* StoreService::Wait(
    grpc::CallbackServerContext* context,
    const proto::StoreWaitRequest* request,
    proto::StoreWaitResponse* response) {
  if (request->keys_size() > limits_.max_keys) {
    return Answer(context, absl::InvalidArgumentError(absl::StrCat(
                               "store: a wait for ", request->keys_size(),
                               " keys, over the limit of ", limits_.max_keys)));
  }
  Waiter w;
  for (const std::string& key : request->keys()) {
    absl::Status ok = CheckKey(key);
    if (!ok.ok()) return Answer(context, ok);
    w.keys.push_back(key);
  }
  w.all_set = response;
  w.wait_ms = request->wait_ms();
  // wait_ms 0: whether they are set, now (torch's check).
  if (w.wait_ms == 0) {
    absl::MutexLock lock(&mu_);
    response->set_all_set(AllSetLocked(w.keys));
    return Answer(context, absl::OkStatus());
  }
  return WaitFor(context, std::move(w));
}

grpc::ServerUnaryReactor* StoreService::WaitFor(
    grpc::CallbackServerContext* context, Waiter w) {
  // The shortest of what was asked, the bound, and the call's deadline.
  absl::Duration wait = std::min(
      absl::Milliseconds(std::max<int64_t>(w.wait_ms, 0)), limits_.max_wait);
  const absl::Duration call_left =
      absl::FromChrono(context->deadline()) - absl::Now();
  wait = std::min(wait, std::max(call_left, absl::ZeroDuration()));
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  // Due `wait` from the call's arrival, read before the waiter is visible:
  // read after, a clock that moved meanwhile (a test stepping it once it
  // sees the waiter) would push the deadline out by as much.
  const absl::Time due = timers_->clock()->Now() + wait;
  absl::Status status;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) {
      status = absl::UnavailableError("store: the master is stopping");
    } else if (AllSetLocked(w.keys)) {
      if (w.value != nullptr) *w.value = data_[w.keys[0]];
      if (w.all_set != nullptr) w.all_set->set_all_set(true);
    } else if (static_cast<int64_t>(waiters_.size()) >= limits_.max_waits) {
      status = absl::ResourceExhaustedError(absl::StrCat(
          "store: ", limits_.max_waits, " calls wait already, the limit"));
    } else {
      id = next_waiter_++;
      w.reactor = reactor;
      w.wait_ms = absl::ToInt64Milliseconds(wait);
      waiters_.emplace(id, std::move(w));
    }
  }
  if (id == 0) {
    reactor->Finish(ToGrpcStatus(status));
    return reactor;
  }
  // Outside the lock: a timer due at once may run before RunAt returns.
  Timers::TimerId timer = timers_->RunAt(due, [this, id] { Expire(id); });
  bool gone = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = waiters_.find(id);
    if (it == waiters_.end()) {
      gone = true;  // Woken (or expired) already.
    } else {
      it->second.timer = timer;
    }
  }
  if (gone) timers_->Cancel(timer);
  return reactor;
}

void StoreService::Expire(uint64_t id) {
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
    done.push_back({w.reactor,
                    absl::DeadlineExceededError(
                        absl::StrCat("store: key ", Shown(missing),
                                     " not set within ", w.wait_ms, " ms")),
                    0});
    waiters_.erase(it);
  }
  FinishAll(std::move(done));
}

}  // namespace ferry
