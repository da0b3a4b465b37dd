// A gRPC caller that never reads its replies, as a hostile peer would: a
// raw HTTP/2 connection (no gRPC library on this side) whose SETTINGS
// grant every stream a flow-control window of 0, so the server can send a
// reply's headers and an error's trailers but not one byte of a message.
// It answers the server's SETTINGS and PINGs, so the connection looks
// alive to keepalive, and counts the streams the server resets.
//
//   ASSERT_OK_AND_ASSIGN(auto peer, StalledHttp2Client::Connect(
//       address, {{"authorization", "Bearer " + token}}));
//   ASSERT_OK(peer->Call("/ferry.proto.Worker/Call", request_bytes));
//   peer->AwaitResets(1, absl::Seconds(30));   // the server gave up on it
#ifndef FERRY_TESTS_TESTING_STALLED_HTTP2_H_
#define FERRY_TESTS_TESTING_STALLED_HTTP2_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {
namespace testing {

class StalledHttp2Client {
 public:
  using Metadata = std::vector<std::pair<std::string, std::string>>;

  // Connects to `address` ("127.0.0.1:PORT") and sends the preface and
  // its SETTINGS; `metadata` goes with every call (lower-case names).
  static absl::StatusOr<std::unique_ptr<StalledHttp2Client>> Connect(
      const std::string& address, Metadata metadata);
  ~StalledHttp2Client();
  StalledHttp2Client(const StalledHttp2Client&) = delete;
  StalledHttp2Client& operator=(const StalledHttp2Client&) = delete;

  // Starts a unary call of `method` ("/pkg.Service/Method") whose request
  // message is `request` (at most 16 KiB), on a new stream. Its reply is
  // never read.
  absl::Status Call(const std::string& method, const std::string& request)
      ABSL_LOCKS_EXCLUDED(write_mu_);

  // Streams started; streams the server sent headers on (an answer, whole
  // if it was an error); streams it ended (END_STREAM: an error's
  // trailers, since no message can come) or reset (RST_STREAM).
  int started() const ABSL_LOCKS_EXCLUDED(mu_);
  int answered() const ABSL_LOCKS_EXCLUDED(mu_);
  int ended() const ABSL_LOCKS_EXCLUDED(mu_);
  int resets() const ABSL_LOCKS_EXCLUDED(mu_);
  // DATA bytes the server sent (0 while the windows stay shut).
  int64_t data_bytes() const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the server closed the connection (GOAWAY or end of stream).
  bool closed() const ABSL_LOCKS_EXCLUDED(mu_);
  // True once answered() (ended(), resets()) >= n, false after `timeout`.
  bool AwaitAnswered(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  bool AwaitEnded(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);
  bool AwaitResets(int n, absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  StalledHttp2Client(int fd, std::string authority, Metadata metadata);
  // Writes all of `bytes` (whole, among other writers); false if the
  // connection broke.
  bool Send(const std::string& bytes) ABSL_LOCKS_EXCLUDED(write_mu_);
  bool WriteLocked(const std::string& bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // Reads frames until the connection ends, answering SETTINGS and PINGs.
  void ReadLoop();

  const int fd_;
  const std::string authority_;
  const Metadata metadata_;

  absl::Mutex write_mu_;
  uint32_t next_stream_ ABSL_GUARDED_BY(write_mu_) = 1;

  mutable absl::Mutex mu_;
  // Waits until `*count` >= n, false after `timeout`.
  bool AwaitCount(const int* count, int n, absl::Duration timeout)
      ABSL_LOCKS_EXCLUDED(mu_);

  int started_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_set<uint32_t> answered_ ABSL_GUARDED_BY(mu_);
  int answered_count_ ABSL_GUARDED_BY(mu_) = 0;
  int ended_ ABSL_GUARDED_BY(mu_) = 0;
  int resets_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t data_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;

  std::thread reader_;  // Last: starts once the rest is built.
};

}  // namespace testing
}  // namespace ferry

#endif  // FERRY_TESTS_TESTING_STALLED_HTTP2_H_
