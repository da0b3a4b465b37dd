#include "collectives/transport/op_key.h"

#include <climits>
#include <cstdint>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "collectives/transport/config.h"

namespace ferry {

namespace {

// A peer's key, for messages: escaped, and only its start if long.
std::string Shown(absl::string_view key) {
  constexpr size_t kShown = 64;
  return absl::StrCat(absl::CEscape(key.substr(0, kShown)),
                      key.size() > kShown ? "…" : "");
}

absl::Status BadKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("op \"", Shown(key), "\" is no collective op: ", why));
}

bool AllDigits(absl::string_view s) {
  if (s.empty() || s.size() > 20) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c)) return false;
  }
  return true;
}

// "0,2,1" → {0, 2, 1}: in [0, world), each once (so at most `world` of
// them; the parse stops at the first bad one, whatever the text's length).
absl::StatusOr<std::vector<int>> ParseRanks(absl::string_view key,
                                            absl::string_view text, int world) {
  std::vector<int> ranks;
  std::vector<bool> seen(world, false);
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int r = -1;
    if (!AllDigits(part) || !absl::SimpleAtoi(part, &r) || r < 0 ||
        r >= world) {
      return BadKey(key, absl::StrCat("group rank \"", Shown(part),
                                      "\" is not in [0, ", world, ")"));
    }
    if (seen[r]) return BadKey(key, absl::StrCat("rank ", r, " twice"));
    seen[r] = true;
    ranks.push_back(r);
  }
  return ranks;
}

absl::StatusOr<std::vector<int>> MembersOfGroup(absl::string_view key,
                                                absl::string_view group,
                                                int world) {
  if (group == "world") {
    std::vector<int> all(world);
    for (int r = 0; r < world; ++r) all[r] = r;
    return all;
  }
  if (absl::ConsumePrefix(&group, "c")) return ParseRanks(key, group, world);
  if (absl::ConsumePrefix(&group, "g")) {
    const size_t hash = group.rfind('#');
    if (hash == absl::string_view::npos || !AllDigits(group.substr(hash + 1)))
      return BadKey(key, "a group \"g…\" ends with \"#N\"");
    return ParseRanks(key, group.substr(0, hash), world);
  }
  return BadKey(key, "unknown group");
}

// A point-to-point label after "p:": SRC ">" DST ":" PTAG ":" SEQ ["@" E].
struct PointToPoint {
  int src = -1;
  int dst = -1;
};

absl::StatusOr<PointToPoint> ParsePointToPoint(absl::string_view key,
                                               absl::string_view label,
                                               int world) {
  std::vector<absl::string_view> parts = absl::StrSplit(label, ':');
  if (parts.size() != 3) return BadKey(key, "a message is SRC>DST:TAG:SEQ");
  std::vector<absl::string_view> ends = absl::StrSplit(parts[0], '>');
  PointToPoint p;
  if (ends.size() != 2 || !AllDigits(ends[0]) || !AllDigits(ends[1]) ||
      !absl::SimpleAtoi(ends[0], &p.src) ||
      !absl::SimpleAtoi(ends[1], &p.dst) || p.src >= world || p.dst >= world) {
    return BadKey(key, absl::StrCat("no ranks of [0, ", world, ") in \"",
                                    Shown(parts[0]), "\""));
  }
  absl::string_view tag = parts[1];
  absl::ConsumePrefix(&tag, "-");
  const size_t at = parts[2].find('@');
  if (!AllDigits(tag) || !AllDigits(parts[2].substr(0, at)) ||
      (at != absl::string_view::npos && !AllDigits(parts[2].substr(at + 1)))) {
    return BadKey(key, "a message has an integer tag and a sequence number");
  }
  return p;
}

absl::Status CheckLabel(absl::string_view key, absl::string_view label) {
  if (absl::ConsumePrefix(&label, "p:")) {
    // Ranks are checked against the job by CheckSender.
    return ParsePointToPoint(key, label, INT_MAX).status();
  }
  if (absl::ConsumePrefix(&label, "t:")) {
    if (label.empty() || label.size() > kMaxOpTagBytes) {
      return BadKey(key, absl::StrCat("a tag has 1 to ", kMaxOpTagBytes,
                                      " bytes, not ", label.size()));
    }
    return absl::OkStatus();
  }
  const size_t at = label.find('@');
  if (!AllDigits(label.substr(0, at)) ||
      (at != absl::string_view::npos && !AllDigits(label.substr(at + 1)))) {
    return BadKey(key, "no sequence number (with its epoch) or tag");
  }
  return absl::OkStatus();
}

bool Contains(const std::vector<int>& ranks, int r) {
  for (int x : ranks) {
    if (x == r) return true;
  }
  return false;
}

// A point-to-point message comes from its sender to its receiver, as its
// only step. (Other keys pass.)
absl::Status CheckPointToPoint(absl::string_view key, int step, int src,
                               int self, int world) {
  const size_t slash = key.find('/');
  absl::string_view label = key.substr(slash + 1);
  if (!absl::ConsumePrefix(&label, "p:")) return absl::OkStatus();
  absl::StatusOr<PointToPoint> p = ParsePointToPoint(key, label, world);
  if (!p.ok()) return p.status();
  if (step != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a point-to-point message ", Shown(key), " has step ", step));
  }
  if (p->src != src || p->dst != self) {
    return absl::PermissionDeniedError(absl::StrCat(
        "a point-to-point message ", Shown(key), " from rank ", p->src,
        " to rank ", p->dst, " came from rank ", src, " to rank ", self));
  }
  return absl::OkStatus();
}

}  // namespace

std::string WorldGroupName() { return "world"; }

std::string GroupOfOp(absl::string_view key) {
  return std::string(key.substr(0, key.find('/')));
}

std::string NewGroupName(const std::vector<int>& ranks, uint64_t n) {
  return absl::StrCat("g", absl::StrJoin(ranks, ","), "#", n);
}

std::string ClientGroupName(const std::vector<int>& ranks) {
  return absl::StrCat("c", absl::StrJoin(ranks, ","));
}

std::string SequencedOpKey(absl::string_view group, uint64_t sequence,
                           uint64_t epoch) {
  return absl::StrCat(group, "/", SequencedOpLabel(sequence, epoch));
}

std::string SequencedOpLabel(uint64_t sequence, uint64_t epoch) {
  if (epoch == 0) return absl::StrCat(sequence);
  return absl::StrCat(sequence, "@", epoch);
}

std::optional<uint64_t> EpochOfOp(absl::string_view key) {
  const size_t slash = key.find('/');
  if (slash == absl::string_view::npos) return std::nullopt;
  absl::string_view label = key.substr(slash + 1);
  if (absl::StartsWith(label, "t:")) return std::nullopt;
  const size_t at = label.find('@');
  if (at == absl::string_view::npos) {
    if (!AllDigits(label)) return std::nullopt;
    return uint64_t{0};
  }
  uint64_t epoch = 0;
  if (!AllDigits(label.substr(0, at)) || !AllDigits(label.substr(at + 1)) ||
      !absl::SimpleAtoi(label.substr(at + 1), &epoch)) {
    return std::nullopt;
  }
  return epoch;
}

std::optional<int64_t> SequenceOfOp(absl::string_view key) {
  if (!EpochOfOp(key).has_value()) return std::nullopt;
  absl::string_view label = key.substr(key.find('/') + 1);
  int64_t sequence = 0;
  if (!absl::SimpleAtoi(label.substr(0, label.find('@')), &sequence)) {
    return std::nullopt;
  }
  return sequence;
}

absl::StatusOr<std::string> TaggedOpKey(absl::string_view group,
                                        absl::string_view tag) {
  if (tag.empty() || tag.size() > kMaxOpTagBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "an op tag has 1 to ", kMaxOpTagBytes, " bytes, not ", tag.size()));
  }
  return absl::StrCat(group, "/t:", tag);
}

std::string PointToPointKey(absl::string_view group, int src, int dst,
                            int64_t tag, uint64_t sequence, uint64_t epoch) {
  return absl::StrCat(group, "/p:", src, ">", dst, ":", tag, ":",
                      SequencedOpLabel(sequence, epoch));
}

absl::StatusOr<std::vector<int>> MembersOfOp(absl::string_view key,
                                             int world_size) {
  // The group part holds no '/', a tag may.
  const size_t slash = key.find('/');
  if (slash == absl::string_view::npos) return BadKey(key, "no \"/\"");
  absl::Status label = CheckLabel(key, key.substr(slash + 1));
  if (!label.ok()) return label;
  return MembersOfGroup(key, key.substr(0, slash), world_size);
}

int FirstGatherStep(int group_size) {
  return 2 + 2 * kMaxRingPieces * group_size;
}

int MaxSteps(int group_size) {
  return FirstGatherStep(group_size) + kMaxGatherRounds;
}

absl::Status CheckSender(absl::string_view key, int step, int src, int self,
                         int world_size) {
  if (src < 0 || src >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame of op ", Shown(key), " claims to come from rank ",
                     src, ", not a rank of this job of ", world_size));
  }
  absl::StatusOr<std::vector<int>> members = MembersOfOp(key, world_size);
  if (!members.ok()) return members.status();
  const int steps = MaxSteps(static_cast<int>(members->size()));
  if (step < 0 || step >= steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("a frame of op ", Shown(key), " has step ", step,
                     ", not in [0, ", steps, ")"));
  }
  if (src == self) {
    return absl::PermissionDeniedError(
        absl::StrCat("a frame of op ", Shown(key), " claims to come from rank ",
                     src, ", this worker itself"));
  }
  if (!Contains(*members, self)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a frame of op ", Shown(key), ": rank ", self,
                     " is not a member of its group, so never runs it"));
  }
  if (!Contains(*members, src)) {
    return absl::PermissionDeniedError(
        absl::StrCat("a frame of op ", Shown(key), " claims to come from rank ",
                     src, ", not a member of its group"));
  }
  return CheckPointToPoint(key, step, src, self, world_size);
}

}  // namespace ferry
