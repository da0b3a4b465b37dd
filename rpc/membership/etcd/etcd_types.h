// The values EtcdClient takes and returns: plain structs, no protobuf, so
// users of the client do not see etcd's generated code.
//
// Revisions are etcd's: one counter for the whole store, raised by every
// change. A key's create_revision is the revision that created it (0: the
// key does not exist), its version counts the changes since then.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_TYPES_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_TYPES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace ferry {

struct EtcdKeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;
  int64_t lease = 0;  // 0: none.
};

// The keys a read found, and the store's revision when it read them (watch
// from revision + 1 to see every later change).
struct EtcdRange {
  int64_t revision = 0;
  std::vector<EtcdKeyValue> kvs;  // Ascending by key.
};

// One change seen by a watch. For a delete, kv holds the key and the
// revision of the delete (mod_revision); the value is empty.
struct EtcdEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  EtcdKeyValue kv;
};

// A lease as granted. `granted_at` (the client's clock when it asked) +
// `ttl` is the earliest the lease may expire without renewals.
struct EtcdLease {
  int64_t id = 0;
  absl::Duration ttl;
  absl::Time granted_at;
};

// One test of a transaction's guard: `key`'s `target` compared to a number
// (versions, revisions, lease ids) or, for kValue, to `value`.
struct EtcdCompare {
  enum class Target { kVersion, kCreateRevision, kModRevision, kValue, kLease };
  enum class Result { kEqual, kNotEqual, kGreater, kLess };

  std::string key;
  Target target = Target::kVersion;
  Result result = Result::kEqual;
  int64_t number = 0;
  std::string value;

  // The key does not exist (its create_revision is 0).
  static EtcdCompare Absent(std::string key);
  static EtcdCompare VersionIs(std::string key, Result result, int64_t version);
  static EtcdCompare CreateRevisionIs(std::string key, Result result,
                                      int64_t revision);
  static EtcdCompare ModRevisionIs(std::string key, Result result,
                                   int64_t revision);
  static EtcdCompare ValueIs(std::string key, Result result, std::string value);
  static EtcdCompare LeaseIs(std::string key, Result result, int64_t lease);
};

// One operation of a transaction's branch.
struct EtcdOp {
  enum class Kind { kGet, kGetPrefix, kPut, kDelete, kDeletePrefix };

  Kind kind = Kind::kGet;
  std::string key;  // The key, or the prefix for k*Prefix.
  std::string value;
  int64_t lease = 0;  // kPut: 0 for none.

  static EtcdOp Get(std::string key);
  static EtcdOp GetPrefix(std::string prefix);
  static EtcdOp Put(std::string key, std::string value, int64_t lease = 0);
  static EtcdOp Delete(std::string key);
  static EtcdOp DeletePrefix(std::string prefix);
};

// If every compare holds, `success` runs, otherwise `failure`; atomically.
struct EtcdTxn {
  std::vector<EtcdCompare> compares;
  std::vector<EtcdOp> success;
  std::vector<EtcdOp> failure;
};

// The result of one EtcdOp: kvs for gets, deleted for deletes.
struct EtcdOpResult {
  std::vector<EtcdKeyValue> kvs;
  int64_t deleted = 0;
};

struct EtcdTxnResult {
  bool succeeded = false;  // Whether the compares held (success ran).
  int64_t revision = 0;    // The store's revision after the transaction.
  std::vector<EtcdOpResult> results;  // One per op of the branch that ran.
};

// A member's own view of itself (Maintenance.Status).
struct EtcdMemberStatus {
  std::string endpoint;  // The endpoint in use when it answered.
  std::string version;   // etcd's version, e.g. "3.4.23".
  uint64_t member_id = 0;
  uint64_t leader = 0;  // The leader it knows; 0: none.
  int64_t revision = 0;
};

// The end of `prefix`'s key range: the smallest key greater than every key
// starting with `prefix` ("\0" if there is none, i.e. every key >= prefix).
std::string EtcdPrefixEnd(const std::string& prefix);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_TYPES_H_
