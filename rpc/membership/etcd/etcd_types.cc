#include "rpc/membership/etcd/etcd_types.h"

#include <utility>

namespace ferry {

EtcdCompare EtcdCompare::Absent(std::string key) {
  return CreateRevisionIs(std::move(key), Result::kEqual, 0);
}

EtcdCompare EtcdCompare::VersionIs(std::string key, Result result,
                                   int64_t version) {
  return {std::move(key), Target::kVersion, result, version, ""};
}

EtcdCompare EtcdCompare::CreateRevisionIs(std::string key, Result result,
                                          int64_t revision) {
  return {std::move(key), Target::kCreateRevision, result, revision, ""};
}

EtcdCompare EtcdCompare::ModRevisionIs(std::string key, Result result,
                                       int64_t revision) {
  return {std::move(key), Target::kModRevision, result, revision, ""};
}

EtcdCompare EtcdCompare::ValueIs(std::string key, Result result,
                                 std::string value) {
  return {std::move(key), Target::kValue, result, 0, std::move(value)};
}

EtcdCompare EtcdCompare::LeaseIs(std::string key, Result result,
                                 int64_t lease) {
  return {std::move(key), Target::kLease, result, lease, ""};
}

EtcdOp EtcdOp::Get(std::string key) {
  return {Kind::kGet, std::move(key), "", 0};
}

EtcdOp EtcdOp::GetPrefix(std::string prefix) {
  return {Kind::kGetPrefix, std::move(prefix), "", 0};
}

EtcdOp EtcdOp::Put(std::string key, std::string value, int64_t lease) {
  return {Kind::kPut, std::move(key), std::move(value), lease};
}

EtcdOp EtcdOp::Delete(std::string key) {
  return {Kind::kDelete, std::move(key), "", 0};
}

EtcdOp EtcdOp::DeletePrefix(std::string prefix) {
  return {Kind::kDeletePrefix, std::move(prefix), "", 0};
}

std::string EtcdPrefixEnd(const std::string& prefix) {
  // etcd's own rule (clientv3.GetPrefixRangeEnd): drop trailing 0xff bytes,
  // then add one to the last byte left.
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace ferry
