#include "rpc/membership/etcd_job_keys.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "rpc/base/limits.h"
#include "rpc/wire/bounded_parse.h"

namespace ferry {

namespace {

constexpr size_t kMaxListed = 16;

bool ParseRank(absl::string_view text, int* rank) {
  int r = -1;
  if (!absl::SimpleAtoi(text, &r) || r < 0 || r >= kMaxEtcdWorldSize) {
    return false;
  }
  // Only the canonical spelling: "01" would be a second key for rank 1.
  if (text != absl::StrCat(r)) return false;
  *rank = r;
  return true;
}

}  // namespace

EtcdJobKeys::EtcdJobKeys(std::string job)
    : job_(std::move(job)), prefix_(absl::StrCat("/ferry/", job_, "/")) {}

std::string EtcdJobKeys::ranks_prefix() const {
  return absl::StrCat(prefix_, "ranks/");
}
std::string EtcdJobKeys::rank(int rank) const {
  return absl::StrCat(ranks_prefix(), rank);
}
std::string EtcdJobKeys::history(int rank) const {
  return absl::StrCat(prefix_, "history/", rank);
}
std::string EtcdJobKeys::clients_prefix() const {
  return absl::StrCat(prefix_, "clients/");
}
std::string EtcdJobKeys::client(uint64_t node) const {
  return absl::StrCat(clients_prefix(), node);
}
std::string EtcdJobKeys::barrier_prefix(absl::string_view name) const {
  return absl::StrCat(prefix_, "barriers/", name, "/");
}
std::string EtcdJobKeys::barrier(absl::string_view name, int rank) const {
  return absl::StrCat(barrier_prefix(name), rank);
}
std::string EtcdJobKeys::client_seq() const {
  return absl::StrCat(prefix_, "client_seq");
}

EtcdJobKeys::Parsed EtcdJobKeys::Parse(absl::string_view key) const {
  Parsed out;
  if (!absl::ConsumePrefix(&key, prefix_)) return out;
  if (absl::ConsumePrefix(&key, "ranks/")) {
    if (ParseRank(key, &out.rank)) out.kind = Parsed::Kind::kRank;
    return out;
  }
  if (absl::ConsumePrefix(&key, "history/")) {
    if (ParseRank(key, &out.rank)) out.kind = Parsed::Kind::kHistory;
    return out;
  }
  if (absl::ConsumePrefix(&key, "clients/")) {
    uint64_t node = 0;
    if (absl::SimpleAtoi(key, &node) && node >= kEtcdClientBase) {
      out.kind = Parsed::Kind::kClient;
      out.node = node;
    }
    return out;
  }
  if (absl::ConsumePrefix(&key, "barriers/")) {
    const size_t slash = key.rfind('/');
    if (slash == absl::string_view::npos || slash == 0) return out;
    if (!ParseRank(key.substr(slash + 1), &out.rank)) return out;
    out.kind = Parsed::Kind::kBarrier;
    out.barrier = std::string(key.substr(0, slash));
  }
  return out;
}

std::optional<proto::RankRecord> ParseRankRecord(const EtcdKeyValue& kv,
                                                 int rank) {
  proto::RankRecord record;
  if (!BoundedParse(kv.value, DefaultLimits(), "", &record).ok()) {
    return std::nullopt;
  }
  if (record.worker().rank() != rank || record.world_size() < 1 ||
      record.world_size() > kMaxEtcdWorldSize || rank >= record.world_size() ||
      record.worker().generation() > kMaxEtcdGeneration) {
    return std::nullopt;
  }
  return record;
}

bool Serving(const proto::RankRecord& record) {
  return !record.worker().address().empty();
}

JobSnapshot ReadSnapshot(const EtcdJobKeys& keys, const EtcdRange& range) {
  JobSnapshot snapshot;
  snapshot.revision = range.revision;
  for (const EtcdKeyValue& kv : range.kvs) {
    const EtcdJobKeys::Parsed p = keys.Parse(kv.key);
    switch (p.kind) {
      case EtcdJobKeys::Parsed::Kind::kRank: {
        std::optional<proto::RankRecord> record = ParseRankRecord(kv, p.rank);
        if (record.has_value()) {
          snapshot.ranks[p.rank] = *std::move(record);
        } else {
          snapshot.problems.push_back(
              absl::StrCat(kv.key, " holds no valid record for rank ", p.rank));
        }
        break;
      }
      case EtcdJobKeys::Parsed::Kind::kHistory:
        // Its revision even if the record is bad: a take compares it.
        snapshot.history_revisions[p.rank] = kv.mod_revision;
        if (auto record = ParseRankRecord(kv, p.rank)) {
          snapshot.history[p.rank] = *std::move(record);
        }
        break;
      case EtcdJobKeys::Parsed::Kind::kClient: {
        snapshot.clients.insert(p.node);
        proto::ClientRecord record;
        if (BoundedParse(kv.value, DefaultLimits(), "", &record).ok() &&
            !record.public_key().empty()) {
          snapshot.client_keys[p.node] = record.public_key();
        }
        break;
      }
      case EtcdJobKeys::Parsed::Kind::kBarrier:
        snapshot.barriers[p.barrier].insert(p.rank);
        break;
      case EtcdJobKeys::Parsed::Kind::kOther:
        break;
    }
  }
  return snapshot;
}

absl::StatusOr<int> AgreedWorldSize(const JobSnapshot& snapshot) {
  if (snapshot.ranks.empty()) {
    return absl::NotFoundError("no rank is held yet");
  }
  const auto& [first_rank, first] = *snapshot.ranks.begin();
  for (const auto& [rank, record] : snapshot.ranks) {
    if (record.world_size() != first.world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", first_rank, " has world_size ", first.world_size(),
          " but rank ", rank, " has ", record.world_size()));
    }
  }
  return first.world_size();
}

std::vector<int> FreeRanks(const JobSnapshot& snapshot, int world_size) {
  std::vector<int> free;
  for (int r = 0; r < world_size; ++r) {
    if (snapshot.ranks.count(r) == 0) free.push_back(r);
  }
  return free;
}

std::vector<int> MissingRanks(const JobSnapshot& snapshot, int world_size) {
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r) {
    auto it = snapshot.ranks.find(r);
    if (it == snapshot.ranks.end() || !Serving(it->second)) {
      missing.push_back(r);
    }
  }
  return missing;
}

bool Formed(const JobSnapshot& snapshot) {
  for (const auto& [rank, record] : snapshot.ranks) {
    if (Serving(record) && record.formed()) return true;
  }
  return false;
}

Directory DirectoryOf(const JobSnapshot& snapshot, int world_size) {
  std::vector<WorkerInfo> workers;
  workers.reserve(world_size);
  for (int r = 0; r < world_size; ++r) {
    auto held = snapshot.ranks.find(r);
    auto last = snapshot.history.find(r);
    if (held != snapshot.ranks.end() && Serving(held->second)) {
      workers.push_back(WorkerInfoFromProto(held->second.worker()));
    } else if (last != snapshot.history.end() && Serving(last->second)) {
      workers.push_back(WorkerInfoFromProto(last->second.worker()));
    } else {
      WorkerInfo bare;
      bare.name = absl::StrCat("worker", r);
      bare.rank = r;
      workers.push_back(std::move(bare));
    }
  }
  return Directory(std::move(workers));
}

std::string RankList(const std::vector<int>& ranks) {
  std::vector<int> shown(ranks.begin(),
                         ranks.begin() + std::min(ranks.size(), kMaxListed));
  std::string out = absl::StrJoin(shown, ", ");
  if (ranks.size() > kMaxListed) {
    absl::StrAppend(&out, " and ", ranks.size() - kMaxListed, " more");
  }
  return out;
}

}  // namespace ferry
