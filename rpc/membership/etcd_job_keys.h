// How a job's membership is laid out in etcd, and reading it back:
//   /ferry/<job>/ranks/<rank>            RankRecord, under the holder's lease
//   /ferry/<job>/history/<rank>          RankRecord of the rank's latest
//                                        holder, no lease
//   /ferry/<job>/clients/<node>          ClientRecord, under the client's lease
//   /ferry/<job>/barriers/<name>/<rank>  "", under the worker's lease
//   /ferry/<job>/client_seq              bumped to number clients
// A key that exists is held by a live process (its lease is alive): a dead
// process's keys vanish when etcd expires its lease. What stays (history,
// client_seq) numbers incarnations and clients, and names dead ranks.
//
// A rank record without an address is a reservation: the rank is taken
// (nobody else may take it) but its holder does not serve yet, so it is
// not in the directory, not awaited at barriers, and counts as missing.
// A holder that saw the job formed (every rank served at once) says so in
// its record (formed): joiners of a formed job are replacements, and they
// and clients wait for nobody — the ranks missing then are dead.
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
// Most incarnations of one rank a record may claim (WorkerInfo.generation).
inline constexpr uint64_t kMaxEtcdGeneration = uint64_t{1} << 32;

class EtcdJobKeys {
 public:
  explicit EtcdJobKeys(std::string job);

  const std::string& job() const { return job_; }
  const std::string& prefix() const { return prefix_; }  // "/ferry/<job>/"
  std::string ranks_prefix() const;
  std::string rank(int rank) const;
  std::string history(int rank) const;
  std::string clients_prefix() const;
  std::string client(uint64_t node) const;
  std::string barrier_prefix(absl::string_view name) const;
  std::string barrier(absl::string_view name, int rank) const;
  std::string client_seq() const;

  // What a key under prefix() is. Keys that fit no pattern, or whose
  // numbers are out of bounds, are kOther (ignored).
  struct Parsed {
    enum class Kind { kOther, kRank, kHistory, kClient, kBarrier };
    Kind kind = Kind::kOther;
    int rank = -1;        // kRank, kHistory, kBarrier.
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
  // The ranks' latest holders (well-formed), and their keys' revisions
  // (malformed ones too).
  std::map<int, proto::RankRecord> history;
  std::map<int, int64_t> history_revisions;
  std::set<uint64_t> clients;
  // Their public keys, where their records carry one.
  std::map<uint64_t, std::string> client_keys;
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

// Whether `record`'s holder serves (it is no reservation).
bool Serving(const proto::RankRecord& record);

// Ranks in [0, world_size) nobody holds (free to take).
std::vector<int> FreeRanks(const JobSnapshot& snapshot, int world_size);
// Ranks in [0, world_size) nobody serves (free or reserved).
std::vector<int> MissingRanks(const JobSnapshot& snapshot, int world_size);
// Whether a serving holder saw the job formed.
bool Formed(const JobSnapshot& snapshot);

// The directory of ranks [0, world_size): each served rank's holder; for a
// rank nobody serves (a formed job's dead rank), its latest holder's entry
// from the history, else a bare "worker<rank>".
Directory DirectoryOf(const JobSnapshot& snapshot, int world_size);

// "1, 2 and 5" for messages (at most the first 16).
std::string RankList(const std::vector<int>& ranks);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_JOB_KEYS_H_
