// Between etcd's protobuf messages and the plain structs of etcd_types.h.
#ifndef FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CONVERT_H_
#define FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CONVERT_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/etcd/kv.pb.h"
#include "proto/etcd/rpc.pb.h"
#include "rpc/membership/etcd/etcd_types.h"

namespace ferry {

EtcdKeyValue FromProto(const mvccpb::KeyValue& kv);
EtcdEvent FromProto(const mvccpb::Event& event);
EtcdRange FromProto(const etcdserverpb::RangeResponse& response);
EtcdTxnResult FromProto(const etcdserverpb::TxnResponse& response);

// A range over one key, or over every key starting with `key`.
etcdserverpb::RangeRequest RangeRequestFor(const std::string& key, bool prefix);
etcdserverpb::DeleteRangeRequest DeleteRequestFor(const std::string& key,
                                                  bool prefix);

// INVALID_ARGUMENT naming the compare or op with an empty key.
absl::StatusOr<etcdserverpb::TxnRequest> ToProto(const EtcdTxn& txn);

}  // namespace ferry

#endif  // FERRY_RPC_MEMBERSHIP_ETCD_ETCD_CONVERT_H_
