#include "collectives/elastic/elastic.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "collectives/op/collective_context.h"
#include "collectives/op/collective_host.h"
#include "collectives/op/group_state.h"
#include "collectives/op/runner.h"
#include "collectives/transport/op_key.h"
#include "rpc/membership/directory.h"
#include "rpc/registry.h"

namespace ferry {

namespace {

constexpr char kVoteFunction[] = "ferry.agree_vote";
constexpr char kRevokeFunction[] = "ferry.revoke_group";
constexpr size_t kMaxReason = 256;
// Where the store keeps each agreement's decision.
constexpr char kDecisionPrefix[] = "ferry/agree/";

// A proposal and a decision, as the store keeps it: "1:0,1,3" (the AND of
// the flags, then the members that took part).
std::string Encode(const Agreement& a) {
  return absl::StrCat(a.flag ? "1" : "0", ":", absl::StrJoin(a.members, ","));
}

// The decision `text` for `group`. DATA_LOSS if it is not one (the store
// is shared with the job's programs: anything may be there).
absl::StatusOr<Agreement> Decode(const std::string& key,
                                 const std::string& text,
                                 const ProcessGroup& group) {
  auto bad = [&] {
    return absl::DataLossError(absl::StrCat("agreement ", key, ": the store ",
                                            "holds no decision but \"",
                                            text.substr(0, 64), "\""));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  if (parts.size() != 2 || (parts[0] != "0" && parts[0] != "1")) return bad();
  Agreement a;
  a.flag = parts[0] == "1";
  // Members in group order: a subsequence of the group's.
  size_t next = 0;
  for (absl::string_view r : absl::StrSplit(parts[1], ',')) {
    int rank;
    if (!absl::SimpleAtoi(r, &rank)) return bad();
    while (next < group.members().size() && group.members()[next] != rank) {
      ++next;
    }
    if (next == group.members().size()) return bad();
    a.members.push_back(rank);
    ++next;
  }
  return a;
}

// An agreement stopped by a test's fault (VoteBook::SetFaultForTesting) at
// `where`, as if this worker died there.
absl::Status Injected(const std::string& key, const std::string& where) {
  return absl::UnavailableError(absl::StrCat(
      "agreement ", key, ": stopped ", where, " (a test's injected fault)"));
}

// What this worker proposes from the votes it collected.
Agreement Proposal(const VoteBook::Votes& votes, const ProcessGroup& group) {
  Agreement a;
  for (int r : group.members()) {
    auto it = votes.find(r);
    if (it == votes.end()) continue;
    a.flag = a.flag && it->second;
    a.members.push_back(r);
  }
  return a;
}

// Proposes `mine` for agreement `key` and returns the decision: the first
// proposal the store kept. Blocking (store calls). `spent` (if not empty)
// names an earlier agreement of the group whose decision every live member
// has read: it is deleted, so a loop that agrees every step leaves two
// decisions per group in the store, not one per step (the store holds
// 65536 keys at most). (Agreement n+2 completes only once every live
// member voted in it, after its own Agree(n) returned.)
absl::StatusOr<Agreement> Decide(ProcessGroup& group, const std::string& key,
                                 const std::string& spent,
                                 const Agreement& mine) {
  CollectiveContext& c = group.state().context();
  if (c.votes().StopsAt(VoteBook::Point::kPropose)) {
    return Injected(key, "before proposing");
  }
  absl::StatusOr<KeyValueStore*> store = c.Arbiter();
  if (!store.ok()) return store.status();
  absl::StatusOr<std::string> decided =
      (*store)->CompareSet(kDecisionPrefix + key, "", Encode(mine));
  if (c.votes().StopsAt(VoteBook::Point::kDecided)) {
    return Injected(key, "once the store decided");
  }
  if (decided.ok() && !spent.empty()) {
    (*store)->Delete(kDecisionPrefix + spent).IgnoreError();  // Tidying.
  }
  if (!decided.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "agreement ", key,
        ": the job's store did not decide: ", decided.status().message()));
  }
  absl::StatusOr<Agreement> a = Decode(key, *decided, group);
  if (!a.ok()) return a.status();
  a->id = key;
  if (std::find(a->members.begin(), a->members.end(), c.rank()) ==
      a->members.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("agreement ", key, ": decided without ", c.host().name(),
                     ", which the others counted gone"));
  }
  return a;
}

// An op's timeout as PrepareOp (runner.h) takes it: the option, else the
// worker's default; none becomes a week.
absl::Duration OpTimeout(ProcessGroup& group,
                         const CollectiveOptions& options) {
  absl::Duration timeout =
      options.timeout > absl::ZeroDuration()
          ? options.timeout
          : group.state().context().host().default_timeout();
  return timeout > absl::ZeroDuration() && timeout <= absl::Hours(24 * 7)
             ? timeout
             : absl::Hours(24 * 7);
}

// Sends this worker's vote to every other member (failures ignored: a
// member that cannot be reached is, or will be, known gone). Not OK only if
// a test's fault stopped it.
absl::Status SendVotes(ProcessGroup& group, const std::string& key, bool flag,
                       absl::Duration timeout) {
  CollectiveHost& host = group.state().context().host();
  for (int r = 0; r < group.size(); ++r) {
    if (r == group.rank()) continue;
    if (group.state().context().votes().StopsAt(VoteBook::Point::kVote,
                                                group.members()[r])) {
      return Injected(
          key, absl::StrCat("before voting to rank ", group.members()[r]));
    }
    host.Call(group.members()[r], kVoteFunction, {Value(key), Value(flag)},
              timeout)
        .Then([](const absl::StatusOr<Value>&) {});
  }
  return absl::OkStatus();
}

}  // namespace

Future<Agreement> AgreeAsync(ProcessGroup& group, bool flag,
                             const CollectiveOptions& options) {
  // Named by the group's agreement count (process_group.h), not its op
  // sequence (which members that began different ops before a revoke no
  // longer share).
  CollectiveOptions named = options;
  std::string spent;
  if (named.tag.empty()) {
    const collectives_internal::GroupState::OpNumber n =
        group.state().NextAgreement();
    named.tag = absl::StrCat("agree.", n.sequence, "@", n.epoch);
    if (n.sequence >= 2) {
      spent =
          absl::StrCat(group.name(), "/t:agree.", n.sequence - 2, "@", n.epoch);
    }
  } else {
    named.tag = absl::StrCat("agree:", options.tag);
  }
  absl::StatusOr<OpSpec> spec = PrepareOp(group, "agree", named);
  if (!spec.ok()) return Future<Agreement>::Ready(spec.status());
  CollectiveContext& c = group.state().context();
  const absl::Time deadline = c.host().timers().clock()->Now() + spec->timeout;
  Future<VoteBook::Votes> votes =
      c.votes().Collect(spec->key, group.members(), group.state().generations(),
                        c.rank(), flag, deadline);
  // (A collection left behind ends at its deadline, or at Stop.)
  if (absl::Status sent = SendVotes(group, spec->key, flag, spec->timeout);
      !sent.ok()) {
    return Future<Agreement>::Ready(sent);
  }
  Promise<Agreement> done;
  std::shared_ptr<ProcessGroup> keep = group.shared_from_this();
  votes.Then([keep, key = spec->key, spent,
              done](const absl::StatusOr<VoteBook::Votes>& v) mutable {
    if (!v.ok()) {
      done.Set(v.status());
      return;
    }
    Agreement mine = Proposal(*v, *keep);
    // The store's answer is awaited on the executor, not on the thread
    // that completed the votes (a call handler, a timer, a listener).
    absl::Status queued = keep->state().context().host().Submit(
        [keep, key, spent, mine, done]() mutable {
          done.Set(Decide(*keep, key, spent, mine));
        });
    if (!queued.ok()) {
      done.Set(absl::UnavailableError(
          absl::StrCat("agreement ", key, ": this worker is stopping")));
    }
  });
  return done.future();
}

absl::StatusOr<Agreement> Agree(ProcessGroup& group, bool flag,
                                const CollectiveOptions& options) {
  // Bounded inside (the votes' timer at the op's deadline, then one store
  // call within its call timeout); this wait only backs them up.
  return AgreeAsync(group, flag, options)
      .Wait(OpTimeout(group, options) + StoreClientOptions().call_timeout +
            absl::Seconds(5));
}

namespace {

// A group number every member derives alike from `text` (FNV-1a: the same
// in every process), above any count NewGroup reaches.
uint64_t GroupNumber(const std::string& text) {
  uint64_t n = 14695981039346656037ull;
  for (unsigned char ch : text) n = (n ^ ch) * 1099511628211ull;
  return (uint64_t{1} << 40) | (n & ((uint64_t{1} << 40) - 1));
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> Shrink(
    ProcessGroup& group, const CollectiveOptions& options) {
  absl::StatusOr<Agreement> live = Agree(group, true, options);
  if (!live.ok()) return live.status();
  // Named from the agreement's name: alike on every survivor.
  return group.state().context().NamedGroup(
      live->members, GroupNumber(live->id),
      /*pinned=*/true, group.state().origin());
}

namespace {

// How often Grow looks whether every rank is live again.
constexpr absl::Duration kLiveCheck = absl::Milliseconds(20);

// The ranks of `ranks` known gone here.
std::vector<int> DownRanks(CollectiveContext& c,
                           const std::vector<int>& ranks) {
  std::vector<int> down;
  for (int r : ranks) {
    if (c.host().DownReason(r)) down.push_back(r);
  }
  return down;
}

// Returns once none of `ranks` is known gone; DEADLINE_EXCEEDED at
// `deadline` (on the worker's clock, looked at every kLiveCheck) naming
// those still gone.
absl::Status AwaitAllLive(CollectiveContext& c, const std::vector<int>& ranks,
                          absl::Time deadline) {
  Timers& timers = c.host().timers();
  while (true) {
    std::vector<int> down = DownRanks(c, ranks);
    if (down.empty()) return absl::OkStatus();
    if (timers.clock()->Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("grow: ranks ", absl::StrJoin(down, ", "),
                       " are still gone (no replacement joined for them)"));
    }
    Promise<Done> tick;
    timers.RunAt(std::min(deadline, timers.clock()->Now() + kLiveCheck),
                 [tick] { tick.Set(Done()); });
    // The timer sets it (or is dropped at Stop: bounded by the deadline).
    tick.future()
        .Wait(TimeLeft(*timers.clock(), deadline) + kLiveCheck)
        .IgnoreError();
    if (c.stopping()) return absl::UnavailableError("grow: stopping");
  }
}

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> Grow(
    ProcessGroup& group, const CollectiveOptions& options) {
  CollectiveContext& c = group.state().context();
  const std::vector<int> target = group.state().origin();
  const absl::Time deadline =
      c.host().timers().clock()->Now() + OpTimeout(group, options);
  if (absl::Status live = AwaitAllLive(c, target, deadline); !live.ok()) {
    return live;
  }
  // Named by the members' epoch now, the same on the survivors and the
  // newcomers once all saw the replacements.
  CollectiveOptions named = options;
  named.timeout = TimeLeft(*c.host().timers().clock(), deadline);
  const uint64_t epoch = c.Epoch(target);
  named.tag = absl::StrCat("grow@", epoch);
  // The successor: the world itself, or a new group of the origin's ranks
  // named from them and the epoch (alike on every member, however each
  // came by its group). Its members are the incarnations live now.
  std::shared_ptr<ProcessGroup> next;
  const bool world = target == c.world().members();
  if (world) {
    next = c.world().shared_from_this();
    next->state().RefreshGenerations();
  } else {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made =
        c.NamedGroup(target,
                     GroupNumber(absl::StrCat(
                         "grow:", absl::StrJoin(target, ","), "@", epoch)),
                     /*pinned=*/false);
    if (!made.ok()) return made.status();
    next = *std::move(made);
  }
  absl::StatusOr<Agreement> all = Agree(*next, true, named);
  if (!all.ok()) return all.status();
  // Every rank is here, at this point of its program: the world's
  // agreements start afresh, alike on the survivors and the newcomers. (A
  // new group's count starts at 0 anyway.)
  if (world) next->state().StartAgreementEra(epoch);
  if (all->members.size() != target.size()) {
    std::vector<int> missing;
    for (int r : target) {
      if (std::find(all->members.begin(), all->members.end(), r) ==
          all->members.end()) {
        missing.push_back(r);
      }
    }
    return absl::UnavailableError(
        absl::StrCat("grow: ranks ", absl::StrJoin(missing, ", "),
                     " died while ", next->name(), " grew back; shrink again"));
  }
  return next;
}

namespace {

// "group G was revoked by W (rank r): reason", relayed by `via` if not W.
absl::Status RevokedStatus(const std::string& group, const std::string& by,
                           int rank, const std::string& via,
                           const std::string& reason) {
  std::string relayed = via.empty() || via == by
                            ? std::string()
                            : absl::StrCat(", relayed by ", via);
  return absl::AbortedError(absl::StrCat("group ", group, " was revoked by ",
                                         by, " (rank ", rank, relayed,
                                         "): ", reason));
}

// Tells every member of `members` but this worker and `skip` that `group`
// was revoked by global rank `by` in `epoch` for `reason`.
void TellRevoked(CollectiveContext& c, const std::string& group,
                 const std::vector<int>& members, int skip, int by,
                 uint64_t epoch, const std::string& reason) {
  for (int r : members) {
    if (r == c.rank() || r == skip) continue;
    c.host()
        .Call(r, kRevokeFunction,
              {Value(group), Value(static_cast<int64_t>(by)),
               Value(static_cast<int64_t>(epoch)), Value(reason)},
              std::nullopt)
        .Then([](const absl::StatusOr<Value>&) {});
  }
}

}  // namespace

absl::Status Revoke(ProcessGroup& group, const std::string& reason) {
  if (reason.size() > kMaxReason) {
    return absl::InvalidArgumentError(
        absl::StrCat("revoke: reason of ", reason.size(), " bytes (at most ",
                     kMaxReason, ")"));
  }
  CollectiveContext& c = group.state().context();
  const std::string& me = c.host().name();
  // The epoch travels with the revoke and its relays: one that reaches a
  // member after the group grew back must not revoke the grown group.
  const uint64_t epoch = c.Epoch(group.members());
  if (c.Revoke(group.name(), epoch,
               RevokedStatus(group.name(), me, c.rank(), me, reason))) {
    TellRevoked(c, group.name(), group.members(), -1, c.rank(), epoch, reason);
  }
  return absl::OkStatus();
}

absl::Status RegisterElasticFunctions(
    std::shared_ptr<CollectiveContext> context) {
  std::weak_ptr<CollectiveContext> weak = context;
  Registry& registry = context->host().registry();
  absl::Status s = registry.Register(
      kVoteFunction,
      [weak](const CallContext& call, const std::string& key,
             bool flag) -> absl::Status {
        std::shared_ptr<CollectiveContext> c = weak.lock();
        if (c == nullptr) return absl::UnavailableError("stopping");
        if (!IsWorkerNode(call.caller_node)) {
          return absl::PermissionDeniedError(
              absl::StrCat(call.caller, " is no worker: only members vote"));
        }
        return c->votes().Vote(key, static_cast<int>(call.caller_node),
                               c->rank(), flag);
      },
      {.params = {"agreement", "flag"},
       .doc = "a member's vote in agreement `agreement` (elastic.h's Agree)",
       .run_inline = true});
  if (!s.ok()) return s;
  return registry.Register(
      kRevokeFunction,
      [weak](const CallContext& call, const std::string& group, int64_t by,
             int64_t epoch, const std::string& reason) -> absl::Status {
        std::shared_ptr<CollectiveContext> c = weak.lock();
        if (c == nullptr) return absl::UnavailableError("stopping");
        const int world = c->host().world_size();
        if (!IsWorkerNode(call.caller_node)) {
          return absl::PermissionDeniedError(absl::StrCat(
              call.caller, " is no worker: only members revoke a group"));
        }
        if (reason.size() > kMaxReason || by < 0 || by >= world || epoch < 0) {
          return absl::InvalidArgumentError(
              "revoke: a reason over 256 bytes, or a rank or epoch out of "
              "range");
        }
        absl::StatusOr<std::vector<int>> members =
            MembersOfOp(absl::StrCat(group, "/0"), world);
        if (!members.ok()) return members.status();
        const int from = static_cast<int>(call.caller_node);
        auto member = [&](int r) {
          return std::find(members->begin(), members->end(), r) !=
                 members->end();
        };
        if (!member(from) || !member(by) || !member(c->rank())) {
          return absl::PermissionDeniedError(absl::StrCat(
              "revoke: ", call.caller, " may not revoke group ", group,
              " here: the sender, the revoker and this worker must be "
              "members"));
        }
        const std::string by_name = c->host().directory().at(by).name;
        // The revoker's epoch, never a later one than this worker's: a
        // member cannot revoke epochs to come (a replacement is how a group
        // recovers). A revoke made in an epoch this worker has not reached
        // yet so lands in its own, the latest it knows.
        const uint64_t in =
            std::min(static_cast<uint64_t>(epoch), c->Epoch(*members));
        if (c->Revoke(group, in,
                      RevokedStatus(group, by_name, by, call.caller, reason))) {
          // Relayed once by each member: the revoker may have died while
          // telling the others.
          TellRevoked(*c, group, *members, from, by, in, reason);
        }
        return absl::OkStatus();
      },
      {.params = {"group", "by", "epoch", "reason"},
       .doc = "group `group` was revoked by rank `by` in membership epoch "
              "`epoch` (elastic.h's Revoke)",
       .run_inline = true});
}

}  // namespace ferry
