#include "rpc/membership/etcd/etcd_convert.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ferry {
namespace {

using etcdserverpb::Compare;

Compare::CompareTarget ToProto(EtcdCompare::Target target) {
  switch (target) {
    case EtcdCompare::Target::kVersion:
      return Compare::VERSION;
    case EtcdCompare::Target::kCreateRevision:
      return Compare::CREATE;
    case EtcdCompare::Target::kModRevision:
      return Compare::MOD;
    case EtcdCompare::Target::kValue:
      return Compare::VALUE;
    case EtcdCompare::Target::kLease:
      return Compare::LEASE;
  }
  return Compare::VERSION;
}

Compare::CompareResult ToProto(EtcdCompare::Result result) {
  switch (result) {
    case EtcdCompare::Result::kEqual:
      return Compare::EQUAL;
    case EtcdCompare::Result::kNotEqual:
      return Compare::NOT_EQUAL;
    case EtcdCompare::Result::kGreater:
      return Compare::GREATER;
    case EtcdCompare::Result::kLess:
      return Compare::LESS;
  }
  return Compare::EQUAL;
}

void FillCompare(const EtcdCompare& in, Compare* out) {
  out->set_key(in.key);
  out->set_target(ToProto(in.target));
  out->set_result(ToProto(in.result));
  switch (in.target) {
    case EtcdCompare::Target::kVersion:
      out->set_version(in.number);
      break;
    case EtcdCompare::Target::kCreateRevision:
      out->set_create_revision(in.number);
      break;
    case EtcdCompare::Target::kModRevision:
      out->set_mod_revision(in.number);
      break;
    case EtcdCompare::Target::kValue:
      out->set_value(in.value);
      break;
    case EtcdCompare::Target::kLease:
      out->set_lease(in.number);
      break;
  }
}

void FillOp(const EtcdOp& in, etcdserverpb::RequestOp* out) {
  switch (in.kind) {
    case EtcdOp::Kind::kGet:
    case EtcdOp::Kind::kGetPrefix:
      *out->mutable_request_range() =
          RangeRequestFor(in.key, in.kind == EtcdOp::Kind::kGetPrefix);
      break;
    case EtcdOp::Kind::kPut: {
      etcdserverpb::PutRequest* put = out->mutable_request_put();
      put->set_key(in.key);
      put->set_value(in.value);
      put->set_lease(in.lease);
      break;
    }
    case EtcdOp::Kind::kDelete:
    case EtcdOp::Kind::kDeletePrefix:
      *out->mutable_request_delete_range() =
          DeleteRequestFor(in.key, in.kind == EtcdOp::Kind::kDeletePrefix);
      break;
  }
}

absl::Status FillOps(
    const std::vector<EtcdOp>& ops, const char* branch,
    google::protobuf::RepeatedPtrField<etcdserverpb::RequestOp>* out) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd transaction ", branch, "[", i, "]: empty key"));
    }
    FillOp(ops[i], out->Add());
  }
  return absl::OkStatus();
}

EtcdOpResult OpResultFromProto(const etcdserverpb::ResponseOp& op) {
  EtcdOpResult result;
  if (op.has_response_range()) {
    result.kvs = FromProto(op.response_range()).kvs;
  } else if (op.has_response_delete_range()) {
    result.deleted = op.response_delete_range().deleted();
  }
  return result;
}

}  // namespace

EtcdKeyValue FromProto(const mvccpb::KeyValue& kv) {
  return {kv.key(),          kv.value(),   kv.create_revision(),
          kv.mod_revision(), kv.version(), kv.lease()};
}

EtcdEvent FromProto(const mvccpb::Event& event) {
  EtcdEvent out;
  out.type = event.type() == mvccpb::Event::DELETE ? EtcdEvent::Type::kDelete
                                                   : EtcdEvent::Type::kPut;
  out.kv = FromProto(event.kv());
  return out;
}

EtcdRange FromProto(const etcdserverpb::RangeResponse& response) {
  EtcdRange range;
  range.revision = response.header().revision();
  range.kvs.reserve(response.kvs_size());
  for (const mvccpb::KeyValue& kv : response.kvs()) {
    range.kvs.push_back(FromProto(kv));
  }
  return range;
}

EtcdTxnResult FromProto(const etcdserverpb::TxnResponse& response) {
  EtcdTxnResult result;
  result.succeeded = response.succeeded();
  result.revision = response.header().revision();
  for (const etcdserverpb::ResponseOp& op : response.responses()) {
    result.results.push_back(OpResultFromProto(op));
  }
  return result;
}

etcdserverpb::RangeRequest RangeRequestFor(const std::string& key,
                                           bool prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  if (prefix) {
    request.set_range_end(EtcdPrefixEnd(key));
    request.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
    request.set_sort_target(etcdserverpb::RangeRequest::KEY);
  }
  return request;
}

etcdserverpb::DeleteRangeRequest DeleteRequestFor(const std::string& key,
                                                  bool prefix) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  if (prefix) request.set_range_end(EtcdPrefixEnd(key));
  return request;
}

absl::StatusOr<etcdserverpb::TxnRequest> ToProto(const EtcdTxn& txn) {
  etcdserverpb::TxnRequest request;
  for (size_t i = 0; i < txn.compares.size(); ++i) {
    if (txn.compares[i].key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd transaction compares[", i, "]: empty key"));
    }
    FillCompare(txn.compares[i], request.add_compare());
  }
  absl::Status ok = FillOps(txn.success, "success", request.mutable_success());
  if (!ok.ok()) return ok;
  ok = FillOps(txn.failure, "failure", request.mutable_failure());
  if (!ok.ok()) return ok;
  return request;
}

}  // namespace ferry
