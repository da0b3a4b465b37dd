// Where ferryd learns its place in the job: flags first, then ferry's own
// environment, then the environments cluster launchers set:
//   FERRY_NAME FERRY_RANK FERRY_WORLD_SIZE FERRY_MASTER
//   torchrun-style RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
//   SLURM          SLURM_PROCID SLURM_NTASKS
//   Open MPI       OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
// (MASTER_ADDR/MASTER_PORT also supply the master under SLURM and MPI.)
#ifndef FERRY_TOOLS_FERRYD_LAUNCH_ENV_H_
#define FERRY_TOOLS_FERRYD_LAUNCH_ENV_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace ferry {

struct Placement {
  std::string name;  // Default "worker<rank>"; empty while rank is -1.
  // -1: none given, and the membership backend assigns one (the first free
  // rank on etcd; rank_assignable).
  int rank = 0;
  int world_size = 1;
  std::string master;  // host:port; may be empty for a world of 1.
  std::string source;  // Which launcher the rank came from, for the log.
};

struct PlacementFlags {
  std::optional<std::string> name;
  std::optional<int> rank;
  std::optional<int> world_size;
  std::optional<std::string> master;
  // False when membership is kept elsewhere (--rendezvous=etcd://…): no
  // rank then needs the master's address.
  bool needs_master = true;
  // True when the backend can pick the rank (etcd): without one given
  // anywhere, the placement's rank is -1 (and a --name is refused: such a
  // worker is named after the rank it gets). Otherwise it defaults to 0.
  bool rank_assignable = false;
};

using Getenv = std::function<std::optional<std::string>(const std::string&)>;

// The process environment.
std::optional<std::string> ProcessEnv(const std::string& name);

// INVALID_ARGUMENT names the variable or flag that is malformed or missing.
absl::StatusOr<Placement> ResolvePlacement(const PlacementFlags& flags,
                                           const Getenv& getenv);

}  // namespace ferry

#endif  // FERRY_TOOLS_FERRYD_LAUNCH_ENV_H_
