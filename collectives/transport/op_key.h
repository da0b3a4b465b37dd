// How collective ops are named across the job, and what a worker can tell
// from a name alone — before its own op began, when a peer's message for
// it arrives.
//
//   op key  := GROUP "/" SEQ ["@" EPOCH]    an SPMD op: the group's SEQ-th
//                                           in membership epoch EPOCH (0,
//                                           not written, until a member
//                                           was replaced)
//            | GROUP "/t:" TAG              an op named by the caller
//            | GROUP "/p:" SRC ">" DST ":" PTAG ":" SEQ ["@" EPOCH]
//                                           point-to-point message SEQ
//                                           from global rank SRC to DST
//                                           with the caller's tag PTAG
//                                           (an integer), in the pair's
//                                           membership epoch (p2p.h)
//   GROUP   := "world"                      every rank of the job
//            | "g" RANKS "#" N              NewGroup's N-th group of RANKS
//            | "c" RANKS                    a client's op on RANKS
//   RANKS   := rank ("," rank)*             global ranks, in group order
//
// A group's membership epoch is the sum of its members' generations (how
// many incarnations held each rank before the current one; every node
// knows them from its directory, the same everywhere). It changes exactly
// when a member is replaced, and never returns to an earlier value, so the
// survivors and the newcomer (whose sequence starts at 0) agree on a fresh
// sequence: the group works again after a replacement. Ops of an earlier
// epoch are never confused with them (their frames expire in the mailbox).
// Tagged ops need no epoch: the caller names each one uniquely.
//
// A group's name spells its members, so a receiver checks each frame's
// claimed sender against the op's group as soon as the frame arrives
// (CheckSender): the op key must parse, this worker and the sender must
// both be members, the sender not this worker itself, and the step within
// what any algorithm uses (< MaxSteps). That the sender is who it claims
// is checked by the stream's credential (Inbound's sender, issue 12): in a
// job with a token or TLS only a worker sends frames, under its own rank.
#ifndef FERRY_COLLECTIVES_TRANSPORT_OP_KEY_H_
#define FERRY_COLLECTIVES_TRANSPORT_OP_KEY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// Longest caller-chosen op tag (CollectiveOptions::tag, a client's op id).
inline constexpr size_t kMaxOpTagBytes = 256;

std::string WorldGroupName();
// NewGroup's `n`-th group of `ranks`: "g0,2#1".
std::string NewGroupName(const std::vector<int>& ranks, uint64_t n);
// A client's op on `ranks`: "c0,2".
std::string ClientGroupName(const std::vector<int>& ranks);
// "world/17", or "world/17@2" in epoch 2.
std::string SequencedOpKey(absl::string_view group, uint64_t sequence,
                           uint64_t epoch = 0);
// For messages: "17", or "17@2".
std::string SequencedOpLabel(uint64_t sequence, uint64_t epoch);
// The epoch of a sequenced op key; nullopt for a tagged (or bad) one.
std::optional<uint64_t> EpochOfOp(absl::string_view key);
// The sequence number of a sequenced op key; nullopt for a tagged (or
// bad) one.
std::optional<int64_t> SequenceOfOp(absl::string_view key);
// INVALID_ARGUMENT for an empty tag or one over kMaxOpTagBytes.
absl::StatusOr<std::string> TaggedOpKey(absl::string_view group,
                                        absl::string_view tag);
// Point-to-point message `sequence` from global rank `src` to `dst` with
// `tag` in the pair's membership `epoch`: "world/p:1>0:7:3".
std::string PointToPointKey(absl::string_view group, int src, int dst,
                            int64_t tag, uint64_t sequence, uint64_t epoch);

// The group name of op `key`: what comes before its first "/" (all of it
// if none).
std::string GroupOfOp(absl::string_view key);

// The members of op `key`'s group (global ranks, in group order) in a job
// of `world_size` ranks. INVALID_ARGUMENT if `key` is no op key of such a
// job (unknown form, a rank out of range or twice, a bad SEQ or TAG).
absl::StatusOr<std::vector<int>> MembersOfOp(absl::string_view key,
                                             int world_size);

// Steps an op of a group of `group_size` ranks may use: [0, MaxSteps).
// (The ring all_reduce uses the most: 2·(size-1) per piece, from step 1,
// kMaxRingPieces pieces at most; then come GatherAll's rounds.)
int MaxSteps(int group_size);
// The first of the steps GatherAll's rounds use (gather_all.h): above
// every ring's, kMaxGatherRounds of them.
int FirstGatherStep(int group_size);
inline constexpr int kMaxGatherRounds = 32;

// May rank `self` take message `step` of op `key` from rank `src`?
// INVALID_ARGUMENT for a key, step or rank no peer of this job could send;
// PERMISSION_DENIED if `self` or `src` is not a member of the op's group,
// or `src` is `self` — or, for a point-to-point message, if `src` is not
// its sender or `self` not its receiver.
absl::Status CheckSender(absl::string_view key, int step, int src, int self,
                         int world_size);

}  // namespace ferry

#endif  // FERRY_COLLECTIVES_TRANSPORT_OP_KEY_H_
