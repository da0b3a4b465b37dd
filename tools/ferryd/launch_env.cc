#include "tools/ferryd/launch_env.h"

#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rpc/membership/node_names.h"

namespace ferry {

std::optional<std::string> ProcessEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

namespace {

constexpr int kDefaultMasterPort = 29500;

struct Source {
  const char* label;
  const char* rank;
  const char* world;
};

constexpr Source kSources[] = {
    {"FERRY_*", "FERRY_RANK", "FERRY_WORLD_SIZE"},
    {"torchrun", "RANK", "WORLD_SIZE"},
    {"SLURM", "SLURM_PROCID", "SLURM_NTASKS"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
};

absl::StatusOr<int> ParseInt(const std::string& text, absl::string_view what) {
  int v;
  if (!absl::SimpleAtoi(text, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": '", text, "' is not an integer"));
  }
  return v;
}

absl::StatusOr<std::string> ResolveMaster(const PlacementFlags& flags,
                                          const Getenv& getenv) {
  if (flags.master) return *flags.master;
  if (auto m = getenv("FERRY_MASTER")) return *m;
  auto addr = getenv("MASTER_ADDR");
  auto port = getenv("MASTER_PORT");
  if (!addr && port) {
    return absl::InvalidArgumentError(
        "MASTER_PORT is set but MASTER_ADDR is not");
  }
  if (!addr) return std::string();
  int p = kDefaultMasterPort;
  if (port) {
    absl::StatusOr<int> parsed = ParseInt(*port, "MASTER_PORT");
    if (!parsed.ok()) return parsed.status();
    p = *parsed;
  }
  return absl::StrCat(*addr, ":", p);
}

}  // namespace

absl::StatusOr<Placement> ResolvePlacement(const PlacementFlags& flags,
                                           const Getenv& getenv) {
  Placement p;
  std::optional<int> rank = flags.rank, world = flags.world_size;
  p.source = "flags";
  for (const Source& s : kSources) {
    if (rank && world) break;
    auto r = getenv(s.rank);
    auto w = getenv(s.world);
    if (!r && !w) continue;
    if (!rank) {
      if (!r) continue;
      absl::StatusOr<int> v = ParseInt(*r, s.rank);
      if (!v.ok()) return v.status();
      rank = *v;
      p.source = s.label;
    }
    if (!world && w) {
      absl::StatusOr<int> v = ParseInt(*w, s.world);
      if (!v.ok()) return v.status();
      world = *v;
    }
  }
  p.world_size = world.value_or(1);
  if (p.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size must be >= 1, got ", p.world_size));
  }
  if (!rank.has_value() && flags.rank_assignable) {
    if (flags.name || getenv("FERRY_NAME")) {
      return absl::InvalidArgumentError(
          "--name needs --rank: a worker that takes the first free rank is "
          "named worker<rank>");
    }
    p.rank = -1;
    p.source = "first free rank";
    return p;
  }
  p.rank = rank.value_or(0);
  if (p.rank < 0 || p.rank >= p.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", p.rank, " is out of range for world size ", p.world_size));
  }
  absl::StatusOr<std::string> master = ResolveMaster(flags, getenv);
  if (!master.ok()) return master.status();
  p.master = *master;
  if (p.master.empty() && p.rank != 0 && flags.needs_master) {
    return absl::InvalidArgumentError(
        "no master address: pass --master=HOST:PORT or set FERRY_MASTER or "
        "MASTER_ADDR/MASTER_PORT");
  }
  if (flags.name) {
    p.name = *flags.name;
  } else if (auto n = getenv("FERRY_NAME")) {
    p.name = *n;
  } else {
    p.name = absl::StrCat("worker", p.rank);
  }
  // Refused here with the flag's name rather than by the master's Join.
  if (absl::Status name = CheckWorkerName(p.name); !name.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--name (or FERRY_NAME): ", name.message()));
  }
  return p;
}

}  // namespace ferry
