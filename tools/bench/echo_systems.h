// The two systems ferry_bench's RPC suite compares: ferry's echo built-in
// between two workers, and a bare gRPC echo service (callback API, one
// channel) built from the same libraries.
#ifndef FERRY_TOOLS_BENCH_ECHO_SYSTEMS_H_
#define FERRY_TOOLS_BENCH_ECHO_SYSTEMS_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ferry {
namespace bench {

class EchoSystem {
 public:
  virtual ~EchoSystem() = default;
  // Payload of the following echoes.
  virtual void SetPayload(size_t bytes) = 0;
  // Starts one echo; `done(ok)` runs when its reply arrived.
  virtual void Echo(std::function<void(bool ok)> done) = 0;
};

// ferry: worker0 calls "echo" on worker1 with a uint8 tensor. With
// `local_socket` the workers talk over a unix-abstract socket (ferry's
// default on one host), otherwise over TCP loopback; on it, large calls
// go in memory files unless `shared_memory` is false. Unless `observed`,
// the workers run without their flight recorder, metrics and tracing.
absl::StatusOr<std::unique_ptr<EchoSystem>> StartFerryEcho(
    bool local_socket, bool observed = true, bool shared_memory = true);

// Bare gRPC over TCP loopback (`uds` false) or a unix-abstract socket.
absl::StatusOr<std::unique_ptr<EchoSystem>> StartBareEcho(bool uds);

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_ECHO_SYSTEMS_H_
