// Gloo (Debian's libgloo), the collectives' baseline: W ranks as threads of
// this process, connected over TCP on 127.0.0.1 — the same setting as
// ferry's in-process workers. Used only by ferry_bench.
#ifndef FERRY_TOOLS_BENCH_GLOO_BASELINE_H_
#define FERRY_TOOLS_BENCH_GLOO_BASELINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gloo::rendezvous {
class Context;
}  // namespace gloo::rendezvous

namespace ferry {
namespace bench {

class GlooGroup {
 public:
  // Connects `world` ranks (a full mesh of TCP pairs).
  static absl::StatusOr<std::unique_ptr<GlooGroup>> Connect(int world);
  ~GlooGroup();

  int size() const { return static_cast<int>(contexts_.size()); }

  // Rank `rank`'s part of collective `op` ("all_reduce", "all_gather",
  // "all_to_all_single", "reduce_scatter", "broadcast") over `bytes` per
  // rank (as in collective_bench.h), with its
  // buffers allocated once: call it once per iteration, on every rank at
  // once. Gloo's exceptions come back as INTERNAL.
  absl::StatusOr<std::function<absl::Status()>> Op(const std::string& op,
                                                   int64_t bytes, int rank);

 private:
  GlooGroup() = default;
  std::vector<std::shared_ptr<gloo::rendezvous::Context>> contexts_;
};

}  // namespace bench
}  // namespace ferry

#endif  // FERRY_TOOLS_BENCH_GLOO_BASELINE_H_
