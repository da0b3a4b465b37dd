// Fuzz target: lease rounds and the fork protocol against one owner table
// (rref/owner_table.h), as peers could send them in any order: creations,
// values, forks added, confirmed, deleted and abandoned, listing rounds in
// chunks (with forks that are not the sender's, in transit or not), holders
// dying, fetches parked and cancelled, and time passing.
//
// Input: records, each an opcode byte and its operands (bytes past the
// end read as 0). Ids are small, so records hit the same RRefs and forks:
//   rref r = (creator h, 2·(b&7)+1), fork f = (creator h', 2·(b'&7)+2),
//   holders h ∈ {self 1, 2, 3, 4}.
//   op%12: 0 Create  1 Resolve (value or error)  2 AddFork  3 ConfirmFork
//          4 DeleteFork (abandon or not)  5 RenewLease: one chunk of a
//          round — round, chunk, chunks, epoch, up to 15 listed and 15 in
//          transit pairs  6 KeepInTransit  7 DropHolder  8 time passes
//          (b·100 ms) and Sweep  9 Fetch  10 CancelWait  11 AddLocal
//
// Properties: no crash (ASan, UBSan); a round costs at most the forks its
// holder had here (stats().forks_walked), a drop exactly them; a dropped
// holder holds nothing after; and at the end — every value resolved, every
// holder dropped, every wait failed, time past every lease and tombstone —
// the table is empty. Values' bytes stay within their budgets (per
// creator and in all; some values are refused) and none stays charged at
// the end.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "rref/owner_table.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

constexpr uint64_t kSelf = 1;
// What keeping one int value costs (rpc/value/payload_bytes.h), and
// the table's budget for all values.
constexpr int64_t kIntBytes = 16;
constexpr int64_t kValueBytes = 5 * kIntBytes;
constexpr absl::Duration kLease = absl::Seconds(10);

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return at_ >= size_; }
  uint8_t Byte() { return at_ < size_ ? data_[at_++] : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

void Fail(const char* what) {
  fprintf(stderr, "lease_rounds_fuzz: %s\n", what);
  abort();
}

uint64_t Holder(uint8_t b) { return 1 + b % 4; }
GlobalId RRefId(uint8_t b) { return {Holder(b >> 4), 2 * (b & 7u) + 1}; }
GlobalId ForkId(uint8_t b) { return {Holder(b >> 4), 2 * (b & 7u) + 2}; }

class Run {
 public:
  Run() : table_(kSelf, &clock_, Options()) {}

  void Step(Reader& in) {
    const uint8_t op = in.Byte();
    switch (op % 12) {
      case 0: {
        // Operands are read into locals, in order (argument order is
        // unspecified, and gcc and clang differ).
        const GlobalId r = RRefId(in.Byte());
        const GlobalId f = ForkId(in.Byte());
        (void)table_.Create(r, f, Holder(in.Byte()));
        created_.insert(r);
        break;
      }
      case 1: {
        const GlobalId r = RRefId(in.Byte());
        if (in.Byte() & 1) {
          (void)table_.Resolve(r, Value(int64_t{7}));
        } else {
          (void)table_.Resolve(r, absl::InternalError("it failed"));
        }
        break;
      }
      case 2: {
        const GlobalId r = RRefId(in.Byte());
        const GlobalId f = ForkId(in.Byte());
        const uint64_t h = Holder(in.Byte());
        const absl::Time deadline =
            clock_.Now() + absl::Milliseconds(100 * in.Byte());
        waits_.push_back(
            table_.AddFork(r, f, h, deadline, [](absl::Status) {}));
        break;
      }
      case 3: {
        const GlobalId r = RRefId(in.Byte());
        const GlobalId f = ForkId(in.Byte());
        const uint64_t h = Holder(in.Byte());
        (void)table_.ConfirmFork(r, f, h, in.Byte() % 8);
        break;
      }
      case 4: {
        const GlobalId r = RRefId(in.Byte());
        const GlobalId f = ForkId(in.Byte());
        table_.DeleteFork(r, f, in.Byte() & 1);
        break;
      }
      case 5:
        Round(in);
        break;
      case 6: {
        std::vector<std::pair<GlobalId, GlobalId>> forks;
        for (int n = in.Byte() % 4; n > 0; --n) {
          forks.push_back({RRefId(in.Byte()), ForkId(in.Byte())});
        }
        table_.KeepInTransit(forks);
        break;
      }
      case 7:
        Drop(Holder(in.Byte()));
        break;
      case 8:
        clock_.Advance(absl::Milliseconds(100 * in.Byte()));
        table_.Sweep();
        break;
      case 9: {
        const GlobalId r = RRefId(in.Byte());
        const uint8_t b = in.Byte();
        const GlobalId f = (b & 0x80) != 0 ? GlobalId{} : ForkId(b);
        waits_.push_back(table_.Fetch(
            r, f, clock_.Now() + absl::Milliseconds(100 * in.Byte()),
            [](absl::StatusOr<Value>) {}));
        break;
      }
      case 10: {
        const uint8_t b = in.Byte();
        if (!waits_.empty()) table_.CancelWait(waits_[b % waits_.size()]);
        break;
      }
      default: {
        const GlobalId r = RRefId(in.Byte());
        const GlobalId f = ForkId(in.Byte());
        (void)table_.AddLocal(r, f, Value(int64_t{1}));
        created_.insert(r);
      }
    }
    const OwnerStats s = table_.stats();
    if (s.forks < 0 || s.owned < 0 || s.unconfirmed > s.forks) {
      Fail("inconsistent counts");
    }
    if (s.value_bytes < 0 || s.value_bytes > kValueBytes) {
      Fail("values' bytes outside their budget");
    }
  }

  // Everything resolved, dropped, failed and forgotten: nothing left.
  void Finish() {
    for (const GlobalId& r : created_) {
      (void)table_.Resolve(r, Value(int64_t{0}));
    }
    for (uint64_t h = 1; h <= 4; ++h) Drop(h);
    table_.FailWaits(absl::UnavailableError("the owner stops"));
    clock_.Advance(absl::Hours(1));
    table_.Sweep();
    const OwnerStats s = table_.stats();
    if (s.value_bytes != 0) Fail("freed values' bytes are still charged");
    if (s.owned != 0 || s.forks != 0 || s.parked != 0 || s.unconfirmed != 0) {
      fprintf(stderr, "owned %ld forks %ld parked %ld unconfirmed %ld\n",
              static_cast<long>(s.owned), static_cast<long>(s.forks),
              static_cast<long>(s.parked), static_cast<long>(s.unconfirmed));
      for (const proto::OwnedRRef& r : table_.List()) {
        fprintf(stderr, "  %s %s forks %d\n", r.id().c_str(), r.state().c_str(),
                r.forks_size());
      }
      Fail("the table is not empty at the end");
    }
  }

 private:
  static OwnerOptions Options() {
    OwnerOptions o;
    o.lease = kLease;
    o.max_forks_per_holder = 6;
    o.max_early_deletes = 8;
    // A creator keeps two int values, all of them five: resolving
    // sometimes refuses a value, so frees of refused entries are fuzzed too.
    o.max_value_bytes_per_creator = 2 * kIntBytes;
    o.max_value_bytes = kValueBytes;
    return o;
  }

  // Forks `holder` has here, by the table's own listing.
  int64_t ForksOf(uint64_t holder) const {
    int64_t n = 0;
    for (const proto::OwnedRRef& r : table_.List()) {
      for (const proto::OwnedFork& f : r.forks()) n += f.holder() == holder;
    }
    return n;
  }

  void Round(Reader& in) {
    const uint64_t holder = Holder(in.Byte());
    LeaseListing l;
    l.round = in.Byte() % 8;
    l.chunks = in.Byte() % 4;
    l.chunk = in.Byte() % 4;
    l.epoch = in.Byte() % 8;
    const uint8_t counts = in.Byte();
    for (int n = counts & 15; n > 0; --n) {
      l.forks.push_back({RRefId(in.Byte()), ForkId(in.Byte())});
    }
    for (int n = counts >> 4; n > 0; --n) {
      l.in_transit.push_back({RRefId(in.Byte()), ForkId(in.Byte())});
    }
    const int64_t had = ForksOf(holder);
    const int64_t before = table_.stats().forks_walked;
    (void)table_.RenewLease(holder, l);
    if (table_.stats().forks_walked - before > had) {
      Fail("a round walked more than its holder's forks");
    }
  }

  void Drop(uint64_t holder) {
    const int64_t had = ForksOf(holder);
    const int64_t before = table_.stats().forks_walked;
    table_.DropHolder(holder);
    if (table_.stats().forks_walked - before != had) {
      Fail("a drop did not walk exactly its holder's forks");
    }
    if (ForksOf(holder) != 0) Fail("a dropped holder still holds forks");
  }

  testing::ManualClock clock_;
  OwnerTable table_;
  std::set<GlobalId> created_;
  std::vector<OwnerTable::WaitId> waits_;
};

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ferry::Reader in(data, size);
  ferry::Run run;
  while (!in.empty()) run.Step(in);
  run.Finish();
  return 0;
}
