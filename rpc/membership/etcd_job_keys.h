// How a job's membership is laid out in etcd, and reading it back:
//   /ferry/<job>/ranks/<rank>            RankRecord, under the holder's lease
//   /ferry/<job>/clients/<node>          ClientRecord, under the client's lease
//   /ferry/<job>/barriers/<name>/<rank>  "", under the worker's lease
//   /ferry/<job>/client_seq              bumped to number clients
// A key that exists is held by a live process (its lease is alive): a dead
// process's keys vanish when etcd expires its lease.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_JOB_KEYS_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_JOB_KEYS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/membership_record.pb.h"
#include "rpc/membership/directory.h"
#include "rpc/membership/etcd/etcd_types.h"

namespace ferry {

// Bounds on what the store may claim, checked before anything is sized by it.
inline constexpr int kMaxEtcdWorldSize = 1 << 16;
// Client node ids: kEtcdClientBase + a store revision. Above every id an
// embedded master or a worker's DirectoryService hands out ((rank + 1) <<
// 32 + n for ranks below kMaxEtcdWorldSize).
inline constexpr uint64_t kEtcdClientBase = uint64_t{1} << 52;

class EtcdJobKeys {
 public:
  explicit EtcdJobKeys(std::string job);

  const std::string& job() const { return job_; }
  const std::string& prefix() const { return prefix_; }  // "/ferry/<job>/"
  std::string ranks_prefix() const;
  std::string rank(int rank) const;
  std::string clients_prefix() const;
  std::string client(uint64_t node) const;
  std::string barrier_prefix(absl::string_view name) const;
  std::string barrier(absl::string_view name, int rank) const;
  std::string client_seq() const;

  // What a key under prefix() is. Keys that fit no pattern, or whose
  // numbers are out of bounds, are kOther (ignored).
  struct Parsed {
    enum class Kind { kOther, kRank, kClient, kBarrier };
    Kind kind = Kind::kOther;
    int rank = -1;        // kRank, kBarrier.
    uint64_t node = 0;    // kClient.
    std::string barrier;  // kBarrier.
  };
  Parsed Parse(absl::string_view key) const;

 private:
  const std::string job_;
  const std::string prefix_;
};

// A consistent reading of the job's keys.
struct JobSnapshot {
  int64_t revision = 0;
  std::map<int, proto::RankRecord> ranks;  // Well-formed records only.
  std::set<uint64_t> clients;
  // Their credential digests, where their records carry one.
  std::map<uint64_t, std::string> client_digests;
  std::map<std::string, std::set<int>> barriers;
  std::vector<std::string> problems;  // Malformed records, for messages.
};

JobSnapshot ReadSnapshot(const EtcdJobKeys& keys, const EtcdRange& range);

// The record in `kv` for rank `rank`, if it parses and agrees with the key.
std::optional<proto::RankRecord> ParseRankRecord(const EtcdKeyValue& kv,
                                                 int rank);

// The world size the holders agree on; INVALID_ARGUMENT naming two ranks
// that disagree; NOT_FOUND if no rank is held.
absl::StatusOr<int> AgreedWorldSize(const JobSnapshot& snapshot);

// Ranks in [0, world_size) nobody holds.
std::vector<int> MissingRanks(const JobSnapshot& snapshot, int world_size);

// The directory when every rank in [0, world_size) is held.
Directory DirectoryOf(const JobSnapshot& snapshot, int world_size);

// "1, 2 and 5" for messages (at most the first 16).
std::string RankList(const std::vector<int>& ranks);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_JOB_KEYS_H_
