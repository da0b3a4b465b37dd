// Fuzz target: the master's rendezvous state machine
// (rpc/membership/rendezvous_service.h) driven as hostile and honest peers
// could, without gRPC (its Handle* entry points): joins, registrations,
// polls, barriers, cancellations and the master's clock stepping, in any
// order.
//
// Input: a byte for the job (world size 2 + b%3, whether identities are
// required), then records, each a control byte and its body (missing
// bytes read as 0):
//   op 0  Join: rank (b%5, so sometimes out of range), world size (the
//         job's unless b&0x80), incarnation (one of 4), key (one of the
//         pool: the rank's own, an attacker's, the master's, none),
//         timeout (100 ms · (1 + b%8), or 0), name (its rank's or
//         another's)
//   op 1  RegisterClient with a key of the pool (or none)
//   op 2  Poll as a node (a worker rank, a registered client, or garbage)
//         with its incarnation or a wrong one, since, hold, leaving, and
//         a credential (the node's own, another node's, garbage, none)
//   op 3  Barrier as a node, one of 3 names, with a credential as above
//   op 4  the clock steps b·37 ms (timers due run, expiring held calls)
//   op 5  the caller of a pending call goes away (gRPC's OnCancel)
//
// Properties (abort otherwise): every call is answered exactly once (at
// the latest by Shutdown at the end); a successful Join's answer lists the
// joiner's own key at its rank (a held join is answered only for the
// incarnation holding the slot: issue 25 F2), and carries no secret; with
// identities required, a successful poll or barrier presented a credential
// made with a key some join or registration offered for its node (never
// garbage, none, or another node's); held joins and barriers never exceed
// --max_held_calls.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "proto/rendezvous.pb.h"
#include "rpc/auth/credential.h"
#include "rpc/auth/node_key.h"
#include "rpc/base/limits.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/rendezvous_service.h"
#include "rpc/value/value.h"
#include "tests/testing/manual_clock.h"

namespace ferry {
namespace {

constexpr int kMaxHeld = 6;

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

// Keys made once (a key pair is an expensive thing to make per input).
struct Keys {
  std::shared_ptr<const NodeKey> master = NodeKey::Generate();
  // Workers 1..3's own, then two attackers'.
  std::vector<std::shared_ptr<const NodeKey>> others = {
      NodeKey::Generate(), NodeKey::Generate(), NodeKey::Generate(),
      NodeKey::Generate(), NodeKey::Generate()};
};
const Keys& TheKeys() {
  static const Keys* const keys = new Keys();
  return *keys;
}

// A call to the master, answered through Answer.
struct FakeCall final : RendezvousService::Held {
  void Answer(const grpc::Status& s) override {
    if (answered) std::abort();  // Answered twice.
    answered = true;
    status = s;
  }
  enum class What { kJoin, kRegister, kPoll, kBarrier } what = What::kJoin;
  bool answered = false;
  grpc::Status status;
  proto::JoinRequest join;
  proto::JoinResponse join_answer;
  proto::RegisterClientResponse registered;
  const NodeKey* key = nullptr;  // The registering client's.
  proto::PollResponse poll_answer;
  // A poll's or barrier's node and what it presented.
  uint64_t node = 0;
  std::optional<std::string> presented;
};

// The pair secret of `key` (one of TheKeys()) and the master's, made once
// per key: an ECDH per credential the harness makes was a third of each
// input's time.
const std::string& SecretOf(const NodeKey& key) {
  static auto* const secrets = new std::map<const NodeKey*, std::string>();
  auto [it, fresh] = secrets->try_emplace(&key);
  if (fresh) it->second = *key.Agree(TheKeys().master->public_key());
  return it->second;
}

class Harness {
 public:
  Harness(int world, bool require_identity)
      : world_(world),
        timers_(&clock_),
        service_(RendezvousOptions{.world_size = world,
                                   .heartbeat_timeout = absl::Seconds(3),
                                   .sweep_interval = absl::Milliseconds(200),
                                   .limits = Limits{.max_held_calls = kMaxHeld,
                                                    .max_clients = 4,
                                                    .max_barriers = 2,
                                                    .max_clients_per_peer = 3},
                                   .require_identity = require_identity,
                                   .key = TheKeys().master},
                 &timers_),
        require_identity_(require_identity) {}

  ~Harness() {
    service_.Shutdown();
    timers_.Stop();
    for (const auto& c : calls_) {
      if (!c->answered) std::abort();  // Never answered.
    }
  }

  void Step(Reader& in) {
    switch (in.Byte() % 6) {
      case 0:
        Join(in);
        break;
      case 1:
        Register(in);
        break;
      case 2:
        Poll(in);
        break;
      case 3:
        Barrier(in);
        break;
      case 4:
        timers_.Advance(absl::Milliseconds(37 * in.Byte()));
        break;
      default:
        Cancel(in);
        break;
    }
    if (service_.held_waits() > kMaxHeld) std::abort();
    Check();
  }

 private:
  const NodeKey& KeyOf(int rank) const {
    return rank == 0 ? *TheKeys().master : *TheKeys().others[(rank - 1) % 3];
  }

  FakeCall* NewCall(FakeCall::What what) {
    calls_.push_back(std::make_unique<FakeCall>());
    calls_.back()->what = what;
    return calls_.back().get();
  }

  void Join(Reader& in) {
    FakeCall* c = NewCall(FakeCall::What::kJoin);
    const uint8_t shape = in.Byte();
    const int rank = shape % 5;
    proto::JoinRequest& r = c->join;
    r.set_world_size(shape & 0x80 ? world_ + 1 : world_);
    r.set_incarnation(1 + in.Byte() % 4);
    r.mutable_worker()->set_rank(rank);
    const uint8_t name = in.Byte();
    r.mutable_worker()->set_name(
        absl::StrCat("worker", name & 1 ? (rank + 1) % world_ : rank));
    switch (in.Byte() % 4) {
      case 0:
        r.mutable_worker()->set_public_key(KeyOf(rank).public_key());
        break;
      case 1:
        r.mutable_worker()->set_public_key(
            TheKeys().others[3 + name % 2]->public_key());
        break;
      case 2:
        r.mutable_worker()->set_public_key(TheKeys().master->public_key());
        break;
      default:
        break;
    }
    const uint8_t t = in.Byte();
    r.set_timeout_ms(t & 0x80 ? 0 : 100 * (1 + t % 8));
    offered_[WorkerNode(rank)].insert(r.worker().public_key());
    service_.HandleJoin(c, r, &c->join_answer, {});
  }

  void Register(Reader& in) {
    FakeCall* c = NewCall(FakeCall::What::kRegister);
    const uint8_t b = in.Byte();
    proto::RegisterClientRequest r;
    r.set_description("fuzz");
    if (b % 4 != 3) {
      c->key = TheKeys().others[2 + b % 3].get();
      r.set_public_key(c->key->public_key());
    }
    // Two connections.
    service_.HandleRegisterClient(c, r, &c->registered,
                                  {.peer = b & 0x10 ? "ipv4:a" : "ipv4:b"});
  }

  // A node to speak as: a worker rank, a client registered here, or junk.
  struct Who {
    uint64_t node = 0;
    uint64_t incarnation = 0;
    const NodeKey* key = nullptr;
  };
  Who Pick(uint8_t b) {
    Who w;
    const int kind = b % 3;
    if (kind == 0) {
      const int rank = (b >> 2) % world_;
      w.node = WorkerNode(rank);
      w.incarnation = 1 + (b >> 4) % 4;
      w.key = &KeyOf(rank);
    } else if (kind == 1 && !clients_.empty()) {
      const FakeCall* c = clients_[(b >> 2) % clients_.size()];
      w.node = c->registered.node();
      w.incarnation = b & 0x80 ? 7 : c->registered.incarnation();
      w.key = c->key;
    } else {
      w.node = kFirstClientNode + b;
      w.incarnation = b;
    }
    return w;
  }

  // A credential: the node's own, another key's, another node's,
  // garbage, or none.
  static std::optional<std::string> Present(const Who& who, uint8_t b) {
    switch (b % 5) {
      case 0:
        if (who.key == nullptr) return std::nullopt;
        return Made(who.node, *who.key);
      case 1:
        return Made(who.node, *TheKeys().others[4]);
      case 2:
        return Made(who.node ^ 1, *TheKeys().others[0]);
      case 3:
        return std::string("v1.0.") + std::string(64, 'f');
      default:
        return std::nullopt;
    }
  }

  // Whether `c` presented a credential made for its node with a key
  // offered for that node.
  bool PresentedOffered(const FakeCall& c) const {
    if (!c.presented.has_value()) return false;
    auto offered = offered_.find(c.node);
    if (offered == offered_.end()) return false;
    const Keys& keys = TheKeys();
    std::vector<const NodeKey*> pool = {keys.master.get()};
    for (const auto& k : keys.others) pool.push_back(k.get());
    for (const NodeKey* k : pool) {
      if (offered->second.count(k->public_key()) > 0 &&
          *c.presented == Made(c.node, *k)) {
        return true;
      }
    }
    return false;
  }
  // Made once per node and key (a derivation per credential the harness
  // makes or checks was a fifth of each input's time).
  static const std::string& Made(uint64_t node, const NodeKey& key) {
    static auto* const made =
        new std::map<std::pair<uint64_t, const NodeKey*>, std::string>();
    auto [it, fresh] = made->try_emplace({node, &key});
    if (fresh) {
      PresentedCredential c;
      c.node = node;
      c.token = CallToken(SecretOf(key), {node, key.public_key()},
                          {0, TheKeys().master->public_key()});
      it->second = FormatCredential(c);
    }
    return it->second;
  }

  void Poll(Reader& in) {
    FakeCall* c = NewCall(FakeCall::What::kPoll);
    const Who who = Pick(in.Byte());
    const uint8_t shape = in.Byte();
    proto::PollRequest r;
    r.set_node(who.node);
    r.set_incarnation(who.incarnation);
    r.set_since(shape % 8);
    r.set_hold_ms(shape & 0x08 ? 0 : 1000);
    r.set_leaving((shape & 0x30) == 0x30);
    RendezvousService::Caller caller;
    caller.credential = Present(who, in.Byte());
    c->node = who.node;
    c->presented = caller.credential;
    service_.HandlePoll(c, r, &c->poll_answer, caller);
  }

  void Barrier(Reader& in) {
    FakeCall* c = NewCall(FakeCall::What::kBarrier);
    const Who who = Pick(in.Byte());
    proto::BarrierRequest r;
    r.set_node(who.node);
    r.set_name(absl::StrCat("b", in.Byte() % 3));
    r.set_timeout_ms(500);
    RendezvousService::Caller caller;
    caller.credential = Present(who, in.Byte());
    c->node = who.node;
    c->presented = caller.credential;
    service_.HandleBarrier(c, r, caller);
  }

  void Cancel(Reader& in) {
    if (calls_.empty()) return;
    FakeCall* c = calls_[in.Byte() % calls_.size()].get();
    if (!c->answered) service_.Cancel(c);
  }

  // What every answer must be.
  void Check() {
    for (const auto& c : calls_) {
      if (!c->answered || checked_.count(c.get()) > 0) continue;
      checked_.insert(c.get());
      if (!c->status.ok()) continue;
      switch (c->what) {
        case FakeCall::What::kJoin: {
          const proto::JoinResponse& a = c->join_answer;
          const int rank = c->join.worker().rank();
          // Answered only for the slot's holder: its own key at its rank.
          if (rank >= a.workers_size() ||
              a.workers(rank).public_key() != c->join.worker().public_key() ||
              !a.GetReflection()->GetUnknownFields(a).empty()) {
            std::abort();
          }
          break;
        }
        case FakeCall::What::kRegister:
          clients_.push_back(c.get());
          offered_[c->registered.node()].insert(c->key->public_key());
          if (c->registered.vouchers_size() != world_) std::abort();
          break;
        case FakeCall::What::kPoll:
        case FakeCall::What::kBarrier:
          if (require_identity_ && !PresentedOffered(*c)) std::abort();
          break;
      }
    }
  }

  const int world_;
  ::ferry::testing::ManualClock clock_;
  ::ferry::testing::ManualTimers timers_;
  RendezvousService service_;
  const bool require_identity_;
  std::vector<std::unique_ptr<FakeCall>> calls_;
  std::vector<const FakeCall*> clients_;
  std::set<const FakeCall*> checked_;
  // Keys joins and registrations offered, by node.
  std::map<uint64_t, std::set<std::string>> offered_;
};

}  // namespace
}  // namespace ferry

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ferry::Reader in(data, size);
  const uint8_t job = in.Byte();
  ferry::Harness harness(2 + job % 3, (job & 0x10) != 0);
  // Bounded work per input.
  for (int steps = 0; !in.empty() && steps < 256; ++steps) harness.Step(in);
  return 0;
}
