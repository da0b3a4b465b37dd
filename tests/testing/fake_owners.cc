#include "tests/testing/fake_owners.h"

#include <atomic>
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rpc/membership/directory.h"

namespace ferry::testing {

// One node's requests. One-shot requests are promises failed by their
// timeout (a timer), by FailNode and by Stop, or set by the owner's
// answer, whichever comes first (a promise is set once). Messages hold
// their user (a message outlives its context in the owner's table); the
// fake itself must outlive every message its timers still run.
class FakeOwners::User final : public OwnerRequests,
                               public std::enable_shared_from_this<User> {
 public:
  User(FakeOwners* owners, uint64_t node) : owners_(owners), node_(node) {}

  Future<Done> AddFork(int owner, proto::ForkRequest request,
                       absl::Duration timeout) override {
    auto req = std::make_shared<proto::ForkRequest>(std::move(request));
    return OneShot<Done>(
        owner, "AddFork", "add fork", timeout,
        [self = shared_from_this(), req, owner, timeout](
            OwnerEndpoint& endpoint, Reply<Done> reply) {
          endpoint.AddFork(
              self->Proven(owner), *req, self->Deadline(timeout), Slot(),
              [req, reply = std::move(reply)](absl::Status s) mutable {
                if (!s.ok()) return std::move(reply)(s);
                std::move(reply)(Done());
              });
        });
  }

  Future<Value> Fetch(int owner, proto::ForkRequest request,
                      absl::Duration timeout,
                      std::shared_ptr<RRefCodec> codec) override {
    auto req = std::make_shared<proto::ForkRequest>(std::move(request));
    return OneShot<Value>(
        owner, "Fetch", "to_here", timeout,
        [self = shared_from_this(), req, owner, timeout, codec](
            OwnerEndpoint& endpoint, Reply<Value> reply) {
          auto response = std::make_shared<proto::FetchResponse>();
          endpoint.Fetch(
              self->Proven(owner), *req, self->Deadline(timeout),
              response.get(), Slot(),
              [req, response, codec,
               reply = std::move(reply)](absl::Status s) mutable {
                if (!s.ok()) return std::move(reply)(s);
                std::move(reply)(ValueFromProto(response->mutable_value(),
                                                "value", codec.get()));
              });
        });
  }

  Future<LeaseAnswer> RenewLease(int owner, proto::LeaseRequest request,
                                 absl::Duration timeout) override {
    auto req = std::make_shared<proto::LeaseRequest>(std::move(request));
    return OneShot<LeaseAnswer>(
        owner, "RenewLease", "renew lease", timeout,
        [self = shared_from_this(), req, owner](OwnerEndpoint& endpoint,
                                                Reply<LeaseAnswer> reply) {
          auto response = std::make_shared<proto::LeaseResponse>();
          endpoint.RenewLease(self->Proven(owner), *req, response.get(),
                              [req, response, reply = std::move(reply)](
                                  absl::Status s) mutable {
                                if (!s.ok()) return std::move(reply)(s);
                                std::move(reply)(LeaseAnswer{
                                    absl::Milliseconds(response->lease_ms()),
                                    response->epoch()});
                              });
        });
  }

  Future<std::vector<proto::OwnedRRef>> ListOwned(
      int owner, absl::Duration timeout) override {
    using Rows = std::vector<proto::OwnedRRef>;
    return OneShot<Rows>(
        owner, "ListOwned", "list rrefs", timeout,
        [self = shared_from_this(), owner](OwnerEndpoint& endpoint,
                                           Reply<Rows> reply) {
          proto::ListOwnedResponse response;
          absl::Status s = endpoint.ListOwned(self->Proven(owner), &response);
          if (!s.ok()) return std::move(reply)(s);
          std::move(reply)(
              Rows(response.rrefs().begin(), response.rrefs().end()));
        });
  }

  void Confirm(int owner, proto::ForkRequest request) override {
    Control(owner, "ConfirmFork", std::move(request));
  }
  void Delete(int owner, proto::ForkRequest request) override {
    Control(owner, "DeleteFork", std::move(request));
  }

  int64_t pending() const override {
    absl::MutexLock lock(&mu_);
    return pending_;
  }
  // Nothing is delivered while a test thread waits here (the test steps
  // delivery), so this answers at once.
  bool WaitIdle(absl::Time) override { return pending() == 0; }

  void FailNode(uint64_t node, const absl::Status& reason) override {
    if (!IsWorkerNode(node)) return;  // Clients own nothing.
    const int rank = static_cast<int>(node);
    std::vector<std::function<void(absl::Status)>> fail;
    {
      absl::MutexLock lock(&mu_);
      dead_[rank] = reason;
      for (auto it = open_.begin(); it != open_.end();) {
        if (it->second.owner == rank) {
          fail.push_back(std::move(it->second.fail));
          open_.erase(it++);
        } else {
          ++it;
        }
      }
    }
    for (auto& f : fail) f(reason);
  }

  void Stop() override {
    std::vector<std::function<void(absl::Status)>> fail;
    {
      absl::MutexLock lock(&mu_);
      stopped_ = true;
      pending_ = 0;
      for (auto& [id, call] : open_) fail.push_back(std::move(call.fail));
      open_.clear();
    }
    for (auto& f : fail) f(absl::CancelledError("stopping"));
  }

 private:
  template <typename T>
  using Reply = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;
  struct Open {
    int owner = -1;
    std::function<void(absl::Status)> fail;
  };

  std::optional<uint64_t> Proven(int owner) const {
    if (!owners_->Proves(owner)) return std::nullopt;
    return node_;
  }
  absl::Time Deadline(absl::Duration timeout) const {
    return owners_->timers_->clock()->Now() + timeout;
  }
  static OwnerEndpoint::WaitSlot Slot() {
    return std::make_shared<std::atomic<OwnerTable::WaitId>>(0);
  }
  absl::Status OwnerError(int owner, absl::string_view what,
                          const absl::Status& s) const {
    return absl::Status(s.code(), absl::StrCat(owners_->OwnerName(owner), ": ",
                                               what, ": ", s.message()));
  }
  absl::Status Died(int owner, const absl::Status& reason) const {
    return absl::UnavailableError(absl::StrCat(
        "owner ", owners_->OwnerName(owner), " died (", reason.message(), ")"));
  }

  // The request `id` was answered, timed out or lost.
  void Close(uint64_t id) {
    absl::MutexLock lock(&mu_);
    open_.erase(id);
  }

  // Sends one request to `owner`; `ask` hands it to the owner's endpoint
  // with the reply to give.
  template <typename T, typename Ask>
  Future<T> OneShot(int owner, std::string method, absl::string_view what,
                    absl::Duration timeout, Ask ask) {
    Promise<T> promise;
    uint64_t id = 0;
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return Future<T>::Ready(absl::CancelledError("stopping"));
      if (auto it = dead_.find(owner); it != dead_.end()) {
        return Future<T>::Ready(Died(owner, it->second));
      }
      id = ++next_id_;
      open_[id] = Open{owner, [this, owner, promise](absl::Status s) {
                         promise.Set(s.code() == absl::StatusCode::kCancelled
                                         ? s
                                         : Died(owner, s));
                       }};
    }
    if (timeout != absl::InfiniteDuration()) {
      owners_->timers_->RunAfter(
          timeout, [weak = weak_from_this(), id, promise,
                    error = OwnerError(
                        owner, what,
                        absl::DeadlineExceededError(absl::StrCat(
                            "no answer within ",
                            absl::ToInt64Milliseconds(timeout), " ms")))] {
            if (auto self = weak.lock()) self->Close(id);
            promise.Set(error);
          });
    }
    Reply<T> reply = [self = shared_from_this(), id, owner, promise,
                      what = std::string(what)](absl::StatusOr<T> r) {
      self->Close(id);
      if (!r.ok()) r = self->OwnerError(owner, what, r.status());
      promise.Set(std::move(r));
    };
    Message m;
    m.owner = owner;
    m.method = std::move(method);
    m.deliver = [ask = std::move(ask), reply = std::move(reply)](
                    RRefContext&, OwnerEndpoint& endpoint) mutable {
      ask(endpoint, std::move(reply));
    };
    m.lose = [self = shared_from_this(), id, promise,
              error = OwnerError(owner, what, absl::UnavailableError("lost"))] {
      self->Close(id);
      promise.Set(error);
    };
    owners_->Send(std::move(m));
    return promise.future();
  }

  // A control message: counted until the owner answers it (any answer:
  // there is no transport to fail, so nothing to retry) or it is lost.
  void Control(int owner, std::string method, proto::ForkRequest request) {
    {
      absl::MutexLock lock(&mu_);
      if (stopped_) return;
      ++pending_;
    }
    auto req = std::make_shared<proto::ForkRequest>(std::move(request));
    auto done = [self = shared_from_this()] {
      absl::MutexLock lock(&self->mu_);
      if (!self->stopped_) --self->pending_;
    };
    const bool is_delete = method == "DeleteFork";
    Message m;
    m.owner = owner;
    m.method = std::move(method);
    m.deliver = [self = shared_from_this(), owner, req, is_delete, done](
                    RRefContext&, OwnerEndpoint& endpoint) {
      auto answer = [req, done](absl::Status) { done(); };
      if (is_delete) {
        endpoint.DeleteFork(self->Proven(owner), *req, answer);
      } else {
        endpoint.ConfirmFork(self->Proven(owner), *req, answer);
      }
    };
    m.lose = done;
    owners_->Send(std::move(m));
  }

  FakeOwners* const owners_;
  const uint64_t node_;
  mutable absl::Mutex mu_;
  int64_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Open> open_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int, absl::Status> dead_ ABSL_GUARDED_BY(mu_);
};

// One node's calls. A call's state is shared by its delivery, its
// function's end and its timeout: the first answer wins (a promise is set
// once), and a remote() whose timeout came while its function ran is
// abandoned at the owner.
class FakeOwners::Calls final : public CallSender {
 public:
  Calls(FakeOwners* owners, uint64_t node) : owners_(owners), node_(node) {}

  // The fake owners' functions are positional (kwargs are not used by the
  // RRef protocol's calls): keyword arguments are refused, as a C++
  // function refuses them.
  Future<Value> Send(const WorkerInfo& to, const std::string& function,
                     std::vector<Value> args, Value::Map kwargs,
                     absl::Duration timeout,
                     std::optional<proto::RRefHandle> create_rref) override {
    if (!kwargs.empty()) {
      return Future<Value>::Ready(absl::InvalidArgumentError(absl::StrCat(
          to.name, ": ", function, ": takes no keyword arguments")));
    }
    auto call = std::make_shared<Call>();
    call->prefix = absl::StrCat(to.name, ": ", function, ": ");
    call->create_rref = std::move(create_rref);
    if (timeout != absl::InfiniteDuration()) {
      owners_->timers_->RunAfter(timeout,
                                 [call, timeout] { call->TimedOut(timeout); });
    }
    Message m;
    m.owner = to.rank;
    m.method = "Call";
    m.deliver = [owners = owners_, node = node_, rank = to.rank, function,
                 args = std::move(args),
                 call](RRefContext& owner, OwnerEndpoint&) mutable {
      // gRPC does not deliver a call past its deadline.
      if (call->promise.future().IsReady()) return;
      Function fn = owners->FunctionOf(rank, function);
      if (fn == nullptr) {
        call->Reply(
            absl::NotFoundError(absl::StrCat("no function named ", function)));
        return;
      }
      if (!call->Begin(&owner, node)) return;
      fn(std::move(args)).Then([call](const absl::StatusOr<Value>& r) {
        call->Ran(r);
      });
    };
    m.lose = [call] { call->Reply(absl::UnavailableError("lost")); };
    Future<Value> result = call->promise.future();
    owners_->Send(std::move(m));
    return result;
  }

 private:
  struct Call {
    std::string prefix;  // "<worker>: <function>: "
    std::optional<proto::RRefHandle> create_rref;
    Promise<Value> promise;
    absl::Mutex mu;
    RRefContext* owner ABSL_GUARDED_BY(mu) = nullptr;  // remote(), begun.
    bool ran ABSL_GUARDED_BY(mu) = false;              // The function ended.

    // remote(): the owner creates the entry; false (answered) if it refuses.
    bool Begin(RRefContext* context, uint64_t node) {
      if (!create_rref.has_value()) return true;
      if (absl::Status s = context->Begin(*create_rref, node); !s.ok()) {
        Reply(s);
        return false;
      }
      absl::MutexLock lock(&mu);
      owner = context;
      return true;
    }
    // The function ended: a remote()'s owner keeps the result (even past
    // the call's timeout, as a callee does), and the call is answered.
    void Ran(const absl::StatusOr<Value>& r) {
      RRefContext* begun = nullptr;
      {
        absl::MutexLock lock(&mu);
        ran = true;
        begun = owner;
      }
      if (begun != nullptr) {
        // Answered as a worker's call service answers: the owner's word
        // (a value over its creator's budget is not kept).
        const absl::Status kept = begun->Finish(*create_rref, r);
        Reply(kept.ok() ? absl::StatusOr<Value>(Value()) : kept);
        return;
      }
      Reply(r.ok() && create_rref.has_value() ? Value() : r);
    }
    // Answers the call, unless it was answered (the first answer stays).
    void Reply(const absl::StatusOr<Value>& r) {
      if (r.ok()) {
        promise.Set(r);
        return;
      }
      promise.Set(absl::Status(r.status().code(),
                               absl::StrCat(prefix, r.status().message())));
    }
    // The timeout: the call fails, and a remote() still running is
    // abandoned at its owner (a callee's cancelled call is).
    void TimedOut(absl::Duration timeout) {
      if (promise.future().IsReady()) return;
      RRefContext* abandon = nullptr;
      {
        absl::MutexLock lock(&mu);
        if (!ran) abandon = owner;
      }
      if (abandon != nullptr) abandon->Abandon(*create_rref);
      Reply(absl::DeadlineExceededError(absl::StrCat(
          "no reply within ", absl::ToInt64Milliseconds(timeout), " ms")));
    }
  };

  FakeOwners* const owners_;
  const uint64_t node_;
};

FakeOwners::FakeOwners(Timers* timers, absl::Duration latency)
    : timers_(timers), latency_(latency) {}

FakeOwners::~FakeOwners() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

void FakeOwners::AddOwner(int rank, RRefContext* owner) {
  absl::MutexLock lock(&mu_);
  Owner& o = owners_[rank];
  o.context = owner;
  o.endpoint = std::make_unique<OwnerEndpoint>(owner);
}

std::shared_ptr<OwnerRequests> FakeOwners::ForNode(uint64_t node) {
  return std::make_shared<User>(this, node);
}

void FakeOwners::Define(int rank, const std::string& name, Function fn) {
  absl::MutexLock lock(&mu_);
  owners_[rank].functions[name] = std::move(fn);
}

CallSender* FakeOwners::CallerFor(uint64_t node) {
  absl::MutexLock lock(&mu_);
  calls_.push_back(std::make_unique<Calls>(this, node));
  return calls_.back().get();
}

FakeOwners::Function FakeOwners::FunctionOf(int rank,
                                            const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(rank);
  if (it == owners_.end()) return nullptr;
  auto fn = it->second.functions.find(name);
  return fn == it->second.functions.end() ? nullptr : fn->second;
}

std::string FakeOwners::OwnerName(int rank) const {
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(rank);
  if (it == owners_.end() || it->second.context == nullptr) {
    return absl::StrCat("rank ", rank);
  }
  return it->second.context->host().name;
}

bool FakeOwners::Proves(int rank) const {
  absl::MutexLock lock(&mu_);
  auto it = owners_.find(rank);
  return it != owners_.end() && it->second.context != nullptr &&
         it->second.context->host().authenticator != nullptr;
}

void FakeOwners::Send(Message m) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    ++in_flight_;
    if (!hold_.empty() && m.method == hold_) {
      held_.push_back(std::move(m));
      return;
    }
  }
  timers_->RunAfter(
      latency_, [this, m = std::move(m)]() mutable { Deliver(std::move(m)); });
}

void FakeOwners::Deliver(Message m) {
  RRefContext* context = nullptr;
  OwnerEndpoint* endpoint = nullptr;
  {
    absl::MutexLock lock(&mu_);
    --in_flight_;
    auto it = owners_.find(m.owner);
    if (it != owners_.end() && it->second.context != nullptr) {
      context = it->second.context;
      endpoint = it->second.endpoint.get();
      ++delivered_[m.method];
    }
  }
  if (endpoint == nullptr) {  // No such owner: as a lost message.
    std::move(m.lose)();
    return;
  }
  std::move(m.deliver)(*context, *endpoint);
}

void FakeOwners::Hold(absl::string_view method) {
  absl::MutexLock lock(&mu_);
  hold_ = std::string(method);
}

void FakeOwners::Release() {
  std::vector<Message> held;
  {
    absl::MutexLock lock(&mu_);
    held.swap(held_);
    hold_.clear();
  }
  for (Message& m : held) Deliver(std::move(m));
}

void FakeOwners::Drop() {
  std::vector<Message> held;
  {
    absl::MutexLock lock(&mu_);
    held.swap(held_);
    hold_.clear();
    in_flight_ -= static_cast<int>(held.size());
  }
  for (Message& m : held) std::move(m.lose)();
}

int FakeOwners::delivered(absl::string_view method) const {
  absl::MutexLock lock(&mu_);
  auto it = delivered_.find(std::string(method));
  return it == delivered_.end() ? 0 : it->second;
}

int FakeOwners::in_flight() const {
  absl::MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace ferry::testing
