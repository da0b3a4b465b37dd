// Fuzz target: the job's store's request handling as StoreService runs it
// (issue 49): each request parsed from bytes by BoundedParse (the
// service's parse) and handed to the StoreState, from several callers —
// two workers, two clients, the callers without a credential —
// interleaved with cancellations and time on the manual clock, under
// shares small enough that every bound is met.
//
// Input: a script of steps; each step's first byte picks what happens:
//   0-6 a request of that method (Set, Get, Add, CompareSet, Delete, Wait,
//       NumKeys) from caller (a byte % 5); then a byte: below 64, the
//       request's raw bytes follow (a length byte, then that many), else
//       it is built — keys from a small set (some under "ferry/" and
//       "ferry/agree/", so writes meet waits and the reserved share), a
//       value of a byte's length, an amount, a wait of a byte's ms (0
//       sometimes: torch's check);
//   7   the caller of a pending wait (a byte picks it) cancels it;
//   8   time passes (a byte, in ms).
// Properties: no crash; every reply runs exactly once, and every wait's
// by its deadline; no caller, the job or the reserved share ever holds
// more than its share; the keys held are those charged, the waits held
// those pending; and once the store stops, nothing is held but keys.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/store.pb.h"
#include "rpc/base/limits.h"
#include "rpc/membership/store_budget.h"
#include "rpc/membership/store_state.h"
#include "rpc/wire/bounded_parse.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

// Two are no keys: empty, and one byte over max_key_bytes.
const char* const kKeys[] = {"a",
                             "b",
                             "c",
                             "ferry/x",
                             "ferry/agree/g",
                             "ferry/agree/h",
                             "",
                             "ddddddddddddddddd"};

const StoreCaller kCallers[] = {
    {0, true},                         // worker0
    {3, true},                         // worker3
    {(uint64_t{1} << 32) + 1, false},  // a client
    {(uint64_t{1} << 32) + 2, false},  // another
    {std::nullopt, false},             // callers without a credential
};

class Script {
 public:
  Script(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ >= end_; }
  uint8_t Byte() { return p_ < end_ ? *p_++ : 0; }
  std::string Bytes(size_t n) {
    std::string out;
    while (n-- > 0 && p_ < end_) out.push_back(static_cast<char>(*p_++));
    return out;
  }
  std::string Key() { return kKeys[Byte() % 8]; }

 private:
  const uint8_t* p_;
  const uint8_t* const end_;
};

// One Get or Wait: its response, and its answer once it comes.
struct Waiting {
  proto::StoreGetResponse get;
  proto::StoreWaitResponse wait;
  int answers = 0;
  uint64_t id = 0;
  absl::Time due;
};

StoreLimits Tight() {
  StoreLimits l;
  l.max_key_bytes = 16;
  l.max_value_bytes = 40;
  l.max_wait_keys = 4;
  l.max_wait = absl::Milliseconds(200);
  l.shares.caller = {3, 60, 3, 200};
  l.shares.job = {6, 150, 5, 500};
  l.shares.reserved = {2, 40, 1, 100};
  return l;
}

bool Within(const StoreAmount& a, const StoreAmount& limit) {
  return a.keys >= 0 && a.bytes >= 0 && a.waits >= 0 && a.wait_bytes >= 0 &&
         a.keys <= limit.keys && a.bytes <= limit.bytes &&
         a.waits <= limit.waits && a.wait_bytes <= limit.wait_bytes;
}

// Parses `bytes` as the service does; false if it refuses them.
template <typename Request>
bool Parse(const std::string& bytes, Request* request) {
  static const Limits* limits = [] {
    auto* l = new Limits();
    l->max_items = 64;
    l->max_string_bytes = 64;
    return l;
  }();
  return BoundedParse(bytes, *limits, "worker0: Store", request).ok();
}

class Run {
 public:
  void Step(Script& s) {
    const uint8_t op = s.Byte() % 9;
    if (op == 7) {
      if (!waiting_.empty()) {
        state_.Cancel(waiting_[s.Byte() % waiting_.size()]->id);
      }
      return;
    }
    if (op == 8) {
      timers_.Advance(absl::Milliseconds(s.Byte()));
      return;
    }
    const StoreCaller& caller = kCallers[s.Byte() % 5];
    const bool raw = s.Byte() < 64;
    const std::string bytes = raw ? s.Bytes(s.Byte()) : std::string();
    switch (op) {
      case 0: {
        proto::StoreSetRequest r;
        if (raw ? !Parse(bytes, &r) : false) return;
        if (!raw) {
          r.set_key(s.Key());
          r.set_value(std::string(s.Byte() % 48, 'v'));
        }
        state_.Set(caller, r).IgnoreError();
        break;
      }
      case 1: {
        proto::StoreGetRequest r;
        if (raw ? !Parse(bytes, &r) : false) return;
        if (!raw) {
          r.set_key(s.Key());
          r.set_wait_ms(s.Byte());
        }
        Waiting* w = New(r.wait_ms());
        w->id = state_.Get(caller, r, &w->get, CallLeft(s), Reply(w));
        break;
      }
      case 2: {
        proto::StoreAddRequest r;
        if (raw ? !Parse(bytes, &r) : false) return;
        if (!raw) {
          r.set_key(s.Key());
          r.set_amount(static_cast<int8_t>(s.Byte()));
        }
        proto::StoreAddResponse response;
        state_.Add(caller, r, &response).IgnoreError();
        break;
      }
      case 3: {
        proto::StoreCompareSetRequest r;
        if (raw ? !Parse(bytes, &r) : false) return;
        if (!raw) {
          r.set_key(s.Key());
          r.set_expected(std::string(s.Byte() % 3, 'v'));
          r.set_desired(std::string(s.Byte() % 48, 'v'));
        }
        proto::StoreCompareSetResponse response;
        state_.CompareSet(caller, r, &response).IgnoreError();
        break;
      }
      case 4: {
        proto::StoreDeleteRequest r;
        if (raw ? !Parse(bytes, &r) : false) return;
        if (!raw) r.set_key(s.Key());
        proto::StoreDeleteResponse response;
        state_.Delete(caller, r, &response).IgnoreError();
        break;
      }
      case 5: {
        proto::StoreWaitRequest r;
        if (raw ? !Parse(bytes, &r) : false) return;
        if (!raw) {
          for (int n = s.Byte() % 7; n > 0; --n) r.add_keys(s.Key());
          r.set_wait_ms(s.Byte() % 4 == 0 ? 0 : s.Byte());
        }
        Waiting* w = New(r.wait_ms());
        w->id =
            state_.Wait(caller, std::move(r), &w->wait, CallLeft(s), Reply(w));
        break;
      }
      case 6:
        if (state_.num_keys() < 0) std::abort();
        break;
    }
  }

  // Checks what may be checked at any moment.
  void Check() {
    const StoreLimits l = Tight();
    for (const StoreCaller& c : kCallers) {
      if (!Within(state_.held(c), l.shares.caller)) std::abort();
    }
    const StoreAmount job = state_.job_held();
    const StoreAmount reserved = state_.reserved_held();
    if (!Within(job, l.shares.job) || !Within(reserved, l.shares.reserved)) {
      std::abort();
    }
    if (job.keys + reserved.keys != state_.num_keys()) std::abort();
    if (job.waits + reserved.waits != state_.num_waits()) std::abort();
    int64_t pending = 0;
    for (const auto& w : all_) {
      if (w->answers > 1) std::abort();
      if (w->answers == 0) {
        ++pending;
        // Timers due run as time passes: none is late.
        if (clock_.Now() > w->due) std::abort();
      }
    }
    if (pending != state_.num_waits()) std::abort();
    // Pending ones stay cancellable; answered ones leave the list.
    std::vector<Waiting*> still;
    for (Waiting* w : waiting_) {
      if (w->answers == 0) still.push_back(w);
    }
    waiting_ = std::move(still);
  }

  void Finish() {
    state_.Stop();
    for (const auto& w : all_) {
      if (w->answers != 1) std::abort();
    }
    const StoreAmount job = state_.job_held();
    const StoreAmount reserved = state_.reserved_held();
    if (job.waits != 0 || job.wait_bytes != 0 || reserved.waits != 0 ||
        reserved.wait_bytes != 0 || state_.num_waits() != 0) {
      std::abort();
    }
    timers_.Stop();
  }

 private:
  Waiting* New(int64_t wait_ms) {
    all_.push_back(std::make_unique<Waiting>());
    Waiting* w = all_.back().get();
    w->due = clock_.Now() +
             std::min(absl::Milliseconds(std::max<int64_t>(wait_ms, 0)),
                      Tight().max_wait);
    waiting_.push_back(w);
    return w;
  }
  StoreState::Reply Reply(Waiting* w) {
    return [w](absl::Status) { ++w->answers; };
  }
  // What the call has left: mostly no deadline, sometimes one already
  // past, sometimes a short one.
  absl::Duration CallLeft(Script& s) {
    switch (s.Byte() % 4) {
      case 0:
        return -absl::Milliseconds(1);
      case 1:
        return absl::Milliseconds(10);
      default:
        return absl::InfiniteDuration();
    }
  }

  testing::ManualClock clock_;
  testing::ManualTimers timers_{&clock_};
  std::vector<std::unique_ptr<Waiting>> all_;  // Outlives state_.
  std::vector<Waiting*> waiting_;
  StoreState state_{Tight(), &timers_};
};

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ferry::Script script(data, size);
  ferry::Run run;
  for (int steps = 0; !script.done() && steps < 256; ++steps) {
    run.Step(script);
    run.Check();
  }
  run.Finish();
  return 0;
}
