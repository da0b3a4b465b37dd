#include "tools/bench/sparse_bench.h"

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "collectives/sparse.h"
#include "rpc/base/status_util.h"
#include "tools/bench/collective_bench.h"
#include "tools/runtime/local_job.h"

namespace ferry {
namespace bench {

namespace {

constexpr int kFeatures = 26;
constexpr int kPooling = 20;  // Mean ids per sample and feature.

// A rank's input: lengths uniform in [0, 2·pooling], random ids.
absl::StatusOr<SparseFeatures> DlrmInput(int rank, int batch) {
  std::mt19937_64 random(rank);
  std::uniform_int_distribution<int64_t> length(0, 2 * kPooling);
  std::vector<std::string> keys;
  std::vector<int64_t> lengths, ids;
  for (int f = 0; f < kFeatures; ++f) {
    keys.push_back(absl::StrCat("f", f));
    for (int s = 0; s < batch; ++s) {
      lengths.push_back(length(random));
      for (int64_t i = 0; i < lengths.back(); ++i)
        ids.push_back(static_cast<int64_t>(random()));
    }
  }
  SparseFeatures in;
  FERRY_ASSIGN_OR_RETURN(
      in.id_list,
      KeyedJaggedTensor::Create(keys, Tensor::FromVector<int64_t>(lengths),
                                Tensor::FromVector<int64_t>(ids)));
  return in;
}

absl::Status RunWorld(int world, int batch, int rounds, bool quick,
                      Report* report) {
  FERRY_ASSIGN_OR_RETURN(std::unique_ptr<LocalJob> job, LocalJob::Start(world));
  std::vector<int64_t> features_per_rank(world, kFeatures / world);
  for (int r = 0; r < kFeatures % world; ++r) ++features_per_rank[r];
  std::vector<SparseFeatures> inputs;
  int64_t bytes = 0;
  for (int r = 0; r < world; ++r) {
    FERRY_ASSIGN_OR_RETURN(SparseFeatures in, DlrmInput(r, batch));
    bytes += static_cast<int64_t>(in.id_list.values().nbytes() +
                                  in.id_list.lengths().nbytes());
    inputs.push_back(std::move(in));
  }
  const std::vector<int64_t> none(world, 0);
  MakeOp make = [&](int rank) -> absl::StatusOr<OneOp> {
    ProcessGroup& group = job->worker(rank).collectives().world();
    return OneOp([&group, &inputs, &features_per_rank, &none, rank] {
      return SparseFeaturesAllToAll(group, inputs[rank], features_per_rank,
                                    none)
          .status();
    });
  };
  const int iterations = quick ? 3 : 10;
  std::vector<double> us;
  for (int round = 0; round < rounds; ++round) {
    FERRY_ASSIGN_OR_RETURN(absl::Duration t,
                           TimeOnThreads(world, iterations, make));
    us.push_back(absl::ToDoubleMicroseconds(t));
  }
  std::sort(us.begin(), us.end());
  report->Add({"sparse", "op_time_us", "ferry", "sparse_features_all_to_all",
               bytes / world, world, 1, us[us.size() / 2]});
  return absl::OkStatus();
}

}  // namespace

absl::Status RunSparseSuite(bool quick, int rounds, Report* report) {
  const int batch = quick ? 256 : 2048;
  for (int world : {2, 4})
    FERRY_RETURN_IF_ERROR(RunWorld(world, batch, rounds, quick, report));
  return absl::OkStatus();
}

}  // namespace bench
}  // namespace ferry
