#include "rpc/membership/store_client.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "proto/store.grpc.pb.h"
#include "rpc/base/status_util.h"
#include "rpc/membership/etcd/etcd_client.h"
#include "rpc/membership/etcd/etcd_watch.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

namespace {

// ---- Over the embedded master ----

class MasterStore final : public KeyValueStore {
 public:
  // `security`: null where `channel` adds the secrets itself.
  MasterStore(std::string master, std::shared_ptr<grpc::Channel> channel,
              std::shared_ptr<const Security> security,
              StoreClientOptions options)
      : master_(std::move(master)),
        options_(options),
        security_(std::move(security)),
        stub_(proto::Store::NewStub(std::move(channel))) {}

  static std::shared_ptr<grpc::Channel> Channel(const std::string& target,
                                                const Security& security) {
    grpc::ChannelArguments args;
    security.ConfigureChannel(&args);
    return grpc::CreateCustomChannel(target, security.ChannelCredentials(),
                                     args);
  }

  absl::Status Set(const std::string& key, const std::string& value) override {
    proto::StoreSetRequest req;
    req.set_key(key);
    req.set_value(value);
    proto::StoreSetResponse resp;
    return Call(&proto::Store::Stub::Set, req, &resp, absl::ZeroDuration());
  }

  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration wait) override {
    proto::StoreGetRequest req;
    req.set_key(key);
    req.set_wait_ms(absl::ToInt64Milliseconds(wait));
    proto::StoreGetResponse resp;
    FERRY_RETURN_IF_ERROR(Call(&proto::Store::Stub::Get, req, &resp, wait));
    return resp.value();
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t amount) override {
    proto::StoreAddRequest req;
    req.set_key(key);
    req.set_amount(amount);
    proto::StoreAddResponse resp;
    FERRY_RETURN_IF_ERROR(
        Call(&proto::Store::Stub::Add, req, &resp, absl::ZeroDuration()));
    return resp.value();
  }

  absl::StatusOr<std::string> CompareSet(const std::string& key,
                                         const std::string& expected,
                                         const std::string& desired) override {
    proto::StoreCompareSetRequest req;
    req.set_key(key);
    req.set_expected(expected);
    req.set_desired(desired);
    proto::StoreCompareSetResponse resp;
    FERRY_RETURN_IF_ERROR(Call(&proto::Store::Stub::CompareSet, req, &resp,
                               absl::ZeroDuration()));
    return resp.value();
  }

  absl::StatusOr<bool> Delete(const std::string& key) override {
    proto::StoreDeleteRequest req;
    req.set_key(key);
    proto::StoreDeleteResponse resp;
    FERRY_RETURN_IF_ERROR(
        Call(&proto::Store::Stub::Delete, req, &resp, absl::ZeroDuration()));
    return resp.deleted();
  }

  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration wait) override {
    proto::StoreWaitRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    // 0 would mean "check"; a wait of nothing is one of a millisecond.
    req.set_wait_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(wait)));
    proto::StoreWaitResponse resp;
    return Call(&proto::Store::Stub::Wait, req, &resp, wait);
  }

  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    proto::StoreWaitRequest req;
    for (const std::string& k : keys) req.add_keys(k);
    proto::StoreWaitResponse resp;
    FERRY_RETURN_IF_ERROR(
        Call(&proto::Store::Stub::Wait, req, &resp, absl::ZeroDuration()));
    return resp.all_set();
  }

  absl::StatusOr<int64_t> NumKeys() override {
    proto::StoreNumKeysRequest req;
    proto::StoreNumKeysResponse resp;
    FERRY_RETURN_IF_ERROR(
        Call(&proto::Store::Stub::NumKeys, req, &resp, absl::ZeroDuration()));
    return resp.keys();
  }

 private:
  template <typename Method, typename Req, typename Resp>
  absl::Status Call(Method method, const Req& req, Resp* resp,
                    absl::Duration wait) {
    grpc::ClientContext ctx;
    ctx.set_deadline(
        absl::ToChronoTime(absl::Now() + wait + options_.call_timeout));
    // The job's token, where it may be sent (TLS, loopback, unix socket).
    if (security_ != nullptr && security_->has_token() &&
        security_->MaySendSecrets(master_)) {
      ctx.AddMetadata("authorization", "Bearer " + security_->token());
    }
    grpc::Status s = ((*stub_).*method)(&ctx, req, resp);
    if (s.ok()) return absl::OkStatus();
    absl::Status status = FromGrpcStatus(s);
    return absl::Status(status.code(), absl::StrCat("store at ", master_, ": ",
                                                    status.message()));
  }

  const std::string master_;
  const StoreClientOptions options_;
  const std::shared_ptr<const Security> security_;
  std::unique_ptr<proto::Store::Stub> stub_;
};

// ---- Over etcd ----

class EtcdStore final : public KeyValueStore {
 public:
  EtcdStore(std::unique_ptr<EtcdClient> etcd, std::string prefix,
            StoreClientOptions options)
      : etcd_(std::move(etcd)), prefix_(std::move(prefix)), options_(options) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    return etcd_->Put(prefix_ + key, value)
        .Wait(options_.call_timeout)
        .status();
  }

  absl::StatusOr<std::string> Get(const std::string& key,
                                  absl::Duration wait) override {
    const absl::Time deadline = absl::Now() + wait;
    while (true) {
      FERRY_ASSIGN_OR_RETURN(
          EtcdRange r, etcd_->Get(prefix_ + key).Wait(options_.call_timeout));
      if (!r.kvs.empty()) return r.kvs[0].value;
      FERRY_RETURN_IF_ERROR(AwaitPut(key, r.revision + 1, deadline));
    }
  }

  absl::StatusOr<int64_t> Add(const std::string& key, int64_t amount) override {
    const absl::Time deadline = absl::Now() + options_.call_timeout;
    const std::string k = prefix_ + key;
    // Read, then write if nobody wrote meanwhile; again if somebody did.
    while (absl::Now() < deadline) {
      FERRY_ASSIGN_OR_RETURN(EtcdRange r,
                             etcd_->Get(k).Wait(options_.call_timeout));
      int64_t now = 0;
      EtcdTxn txn;
      if (r.kvs.empty()) {
        txn.compares = {EtcdCompare::Absent(k)};
      } else {
        if (!absl::SimpleAtoi(r.kvs[0].value, &now)) {
          return absl::InvalidArgumentError(
              absl::StrCat("store: add to key \"", key,
                           "\", whose value is not an integer"));
        }
        txn.compares = {EtcdCompare::ModRevisionIs(
            k, EtcdCompare::Result::kEqual, r.kvs[0].mod_revision)};
      }
      if ((amount > 0 && now > std::numeric_limits<int64_t>::max() - amount) ||
          (amount < 0 && now < std::numeric_limits<int64_t>::min() - amount)) {
        return absl::InvalidArgumentError(
            absl::StrCat("store: add ", amount, " to key \"", key, "\" (", now,
                         ") overflows"));
      }
      txn.success = {EtcdOp::Put(k, absl::StrCat(now + amount))};
      FERRY_ASSIGN_OR_RETURN(EtcdTxnResult done,
                             etcd_->Txn(txn).Wait(options_.call_timeout));
      if (done.succeeded) return now + amount;
    }
    return absl::DeadlineExceededError(
        absl::StrCat("store: add to key \"", key, "\": contended for ",
                     absl::ToInt64Milliseconds(options_.call_timeout), " ms"));
  }

  absl::StatusOr<std::string> CompareSet(const std::string& key,
                                         const std::string& expected,
                                         const std::string& desired) override {
    const std::string k = prefix_ + key;
    EtcdTxn txn;
    txn.compares = {
        expected.empty()
            ? EtcdCompare::Absent(k)
            : EtcdCompare::ValueIs(k, EtcdCompare::Result::kEqual, expected)};
    txn.success = {EtcdOp::Put(k, desired)};
    txn.failure = {EtcdOp::Get(k)};
    FERRY_ASSIGN_OR_RETURN(EtcdTxnResult r,
                           etcd_->Txn(txn).Wait(options_.call_timeout));
    if (r.succeeded) return desired;
    if (r.results.empty() || r.results[0].kvs.empty()) return expected;
    return r.results[0].kvs[0].value;
  }

  absl::StatusOr<bool> Delete(const std::string& key) override {
    FERRY_ASSIGN_OR_RETURN(
        int64_t n, etcd_->Delete(prefix_ + key).Wait(options_.call_timeout));
    return n > 0;
  }

  absl::Status Wait(const std::vector<std::string>& keys,
                    absl::Duration wait) override {
    const absl::Time deadline = absl::Now() + wait;
    for (const std::string& key : keys) {
      FERRY_RETURN_IF_ERROR(
          Get(key, std::max(deadline - absl::Now(), absl::ZeroDuration()))
              .status());
    }
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Check(const std::vector<std::string>& keys) override {
    for (const std::string& key : keys) {
      FERRY_ASSIGN_OR_RETURN(
          EtcdRange r, etcd_->Get(prefix_ + key).Wait(options_.call_timeout));
      if (r.kvs.empty()) return false;
    }
    return true;
  }

  absl::StatusOr<int64_t> NumKeys() override {
    FERRY_ASSIGN_OR_RETURN(
        EtcdRange r, etcd_->GetPrefix(prefix_).Wait(options_.call_timeout));
    return static_cast<int64_t>(r.kvs.size());
  }

 private:
  // Waits (until `deadline`) for a put of `key` from `revision` on.
  absl::Status AwaitPut(const std::string& key, int64_t revision,
                        absl::Time deadline) {
    auto put = std::make_shared<absl::Notification>();
    const std::string k = prefix_ + key;
    std::unique_ptr<EtcdWatch> watch = etcd_->WatchPrefix(
        k, revision,
        {.on_events =
             [put, k](std::vector<EtcdEvent> events) {
               for (const EtcdEvent& e : events) {
                 if (e.type == EtcdEvent::Type::kPut && e.kv.key == k &&
                     !put->HasBeenNotified()) {
                   put->Notify();
                 }
               }
             },
         .on_end = nullptr});
    const bool came = put->WaitForNotificationWithDeadline(deadline);
    watch->Stop();
    if (came) return absl::OkStatus();
    return absl::DeadlineExceededError(
        absl::StrCat("store: key \"", key, "\" not set in time"));
  }

  std::unique_ptr<EtcdClient> etcd_;
  const std::string prefix_;
  const StoreClientOptions options_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KeyValueStore>> ConnectMasterStore(
    const std::string& master, std::shared_ptr<const Security> security,
    StoreClientOptions options) {
  if (master.empty()) {
    return absl::InvalidArgumentError("store: no master address");
  }
  std::shared_ptr<grpc::Channel> channel =
      MasterStore::Channel(master, *security);
  return std::unique_ptr<KeyValueStore>(new MasterStore(
      master, std::move(channel), std::move(security), options));
}

std::unique_ptr<KeyValueStore> MasterStoreOver(
    std::shared_ptr<grpc::Channel> channel, const std::string& master,
    StoreClientOptions options) {
  return std::unique_ptr<KeyValueStore>(
      new MasterStore(master, std::move(channel), nullptr, options));
}

absl::StatusOr<std::unique_ptr<KeyValueStore>> ConnectEtcdStore(
    EtcdOptions etcd, const std::string& job, StoreClientOptions options) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<EtcdClient> client,
                         EtcdClient::Connect(std::move(etcd)));
  return std::unique_ptr<KeyValueStore>(new EtcdStore(
      std::move(client), absl::StrCat("/ferry/", job, "/store/"), options));
}

}  // namespace ferry
