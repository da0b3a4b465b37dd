// A hostile peer's client: sends hand-built bytes to a worker's gRPC
// methods through a generic stub (no ferry code on the sending path, no
// message size limit of its own), and times the answers.
//
//   RawClient raw(worker_address);
//   RawReply r = raw.Unary(kCallMethod,
//                          wire::CallRequest("echo", {wire::Int(1)}));
//   EXPECT_EQ(r.status.error_code(), grpc::StatusCode::OK);
#ifndef FERRY_TESTS_TESTING_RAW_CLIENT_H_
#define FERRY_TESTS_TESTING_RAW_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "proto/rendezvous.pb.h"
#include "proto/worker.pb.h"
#include "rpc/auth/node_key.h"

namespace ferry {
namespace testing {

inline constexpr char kCallMethod[] = "/ferry.proto.Worker/Call";
inline constexpr char kStatusMethod[] = "/ferry.proto.Worker/GetStatus";
inline constexpr char kCallStreamMethod[] = "/ferry.proto.CallStream/Call";
inline constexpr char kRegisterClientMethod[] =
    "/ferry.proto.Rendezvous/RegisterClient";

struct RawReply {
  grpc::Status status;
  std::string bytes;  // The response message, if OK.
  // A stream's reply messages, one by one (`bytes` has them concatenated).
  std::vector<std::string> messages;
  absl::Duration elapsed;
};

class RawClient {
 public:
  // A channel (and connection) of its own to `address` (host:port);
  // `token`, if not empty, is sent as "authorization: Bearer <token>".
  explicit RawClient(const std::string& address, std::string token = "");
  // The same over `credentials` (e.g. TLS with a client certificate).
  RawClient(const std::string& address, std::string token,
            std::shared_ptr<grpc::ChannelCredentials> credentials);

  // One unary call of `method` with `request` as its message bytes.
  RawReply Unary(const std::string& method, const std::string& request,
                 absl::Duration timeout = absl::Seconds(10));
  // `n` calls of the same request started at once; their replies.
  std::vector<RawReply> UnaryMany(const std::string& method,
                                  const std::string& request, int n,
                                  absl::Duration timeout);
  // A call cancelled by this client `after` it started.
  RawReply UnaryCancelledAfter(const std::string& method,
                               const std::string& request,
                               absl::Duration after);

  // One bidi stream of `method`: `messages` written in order, then
  // half-closed; the bytes of every reply message, concatenated.
  RawReply Stream(const std::string& method,
                  const std::vector<std::string>& messages,
                  absl::Duration timeout = absl::Seconds(10));

  // A bidi stream of `method` that writes `messages` and then stays open,
  // never half-closed: what a peer that stops sending holds at the server.
  // Ends when the server ends it (Wait), or is cancelled when destroyed.
  class HeldStream {
   public:
    ~HeldStream();
    // Whether every message was handed to the connection within `timeout`.
    bool AwaitWritten(absl::Duration timeout);
    // The server's answer once it ends the stream (UNKNOWN "not ended" if
    // it did not within `timeout`; the stream stays held).
    RawReply Wait(absl::Duration timeout);

   private:
    friend class RawClient;
    struct Call;
    explicit HeldStream(Call* call) : call_(call) {}
    Call* call_;
  };
  // The stream's gRPC deadline is `timeout` from now.
  std::unique_ptr<HeldStream> Hold(const std::string& method,
                                   const std::vector<std::string>& messages,
                                   absl::Duration timeout = absl::Seconds(60));

  // The worker's status (GetStatus, parsed).
  absl::StatusOr<proto::WorkerStatus> Status();
  // Reads the status every 20 ms until `done` holds or `bound` passed; the
  // last status read.
  proto::WorkerStatus AwaitStatus(
      const std::function<bool(const proto::WorkerStatus&)>& done,
      absl::Duration bound);

  // A client of the job at `address` (with `token`), registered there.
  static absl::StatusOr<std::unique_ptr<RawClient>> Registered(
      const std::string& address, std::string token);

  // Registers as a client of the job (RegisterClient at this address),
  // with a key pair of its own: later calls present the credential it
  // makes for the worker at this address (metadata "ferry-credential",
  // rpc/auth/credential.h), with the voucher its registrar made for it. Its
  // node id.
  absl::StatusOr<uint64_t> Register();
  // Presents `credential` on later calls ("" = none), as a forger would.
  void set_credential(std::string credential) {
    credential_ = std::move(credential);
  }
  const std::string& credential() const { return credential_; }
  // Sends `key: value` on every later call, as any gRPC client may.
  void add_metadata(std::string key, std::string value) {
    metadata_.emplace_back(std::move(key), std::move(value));
  }
  // What this client presents to `worker` (after Register): made for that
  // worker only.
  std::string CredentialFor(const proto::WorkerInfo& worker) const;
  // The node Register() made this client (0 before).
  uint64_t node() const { return node_; }
  // The incarnation Register() was given, for its polls (0 before).
  uint64_t incarnation() const { return incarnation_; }
  // The directory Register() learnt.
  const std::vector<proto::WorkerInfo>& workers() const { return workers_; }
  const NodeKey& key() const { return *key_; }

 private:
  // Adds the token, credential and metadata (if any) to a call.
  void Authorize(grpc::ClientContext* context) const;

  std::string address_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  std::string token_;
  std::string credential_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  const std::shared_ptr<const NodeKey> key_ = NodeKey::Generate();
  uint64_t node_ = 0;
  uint64_t incarnation_ = 0;
  std::vector<proto::WorkerInfo> workers_;
  std::vector<std::string> vouchers_;  // By rank.
};

// Protobuf wire bytes built by hand, for messages no honest writer makes.
namespace wire {

std::string Varint(uint64_t v);
// A length-delimited field (key, length, bytes).
std::string Bytes(int field, absl::string_view bytes);
std::string VarintField(int field, uint64_t v);

// ferry.proto.Value messages (the body of one value).
std::string Null();
std::string Int(int64_t v);
std::string Str(absl::string_view s);
std::string List(const std::vector<std::string>& items);
// A tensor of wire dtype `dtype` (proto/value.proto's numbering).
std::string Tensor(int dtype, const std::vector<int64_t>& shape,
                   absl::string_view data);
std::string RRef(const proto::RRefHandle& handle);

// A call stream's first frame (rpc/wire/frames.h), without payload: its
// StreamHead says `total` bytes to come, the largest piece starting at
// `align` modulo 64.
std::string StreamHead(uint64_t total, uint64_t align = 0);
// A later frame of a call stream: no head, `bytes` of payload.
std::string StreamChunk(absl::string_view bytes);

// A CallRequest for `function` with these argument values.
std::string CallRequest(absl::string_view function,
                        const std::vector<std::string>& args,
                        uint64_t caller_node = (uint64_t{1} << 32) + 99,
                        absl::string_view caller_name = "hostile");

}  // namespace wire

// The value of a CallResponse's result (null if absent).
absl::StatusOr<proto::Value> ParseResult(const std::string& response);

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_RAW_CLIENT_H_
