#include "collectives/collectives.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "collectives/algorithms/algorithms.h"
#include "collectives/algorithms/by_name.h"
#include "collectives/op/runner.h"

namespace ferry {

namespace {

// `inputs`: this rank's input, for the flight recorder.
template <typename T>
absl::StatusOr<T> Run(ProcessGroup& group, absl::string_view name,
                      const CollectiveOptions& options, Algorithm<T> algorithm,
                      std::vector<TensorSummary> inputs = {}) {
  return RunOp<T>(group, name, options, std::move(algorithm),
                  std::move(inputs));
}

template <typename T>
Work<T> Start(ProcessGroup& group, absl::string_view name,
              const CollectiveOptions& options, Algorithm<T> algorithm,
              std::vector<TensorSummary> inputs = {}) {
  return StartWork<T>(group, name, options, std::move(algorithm),
                      std::move(inputs));
}

Algorithm<std::vector<Tensor>> AllToAllOf(const std::vector<Tensor>& inputs) {
  return [inputs](Result<std::vector<Tensor>> r) mutable {
    algorithms::AllToAll(std::move(r), std::move(inputs));
  };
}
Algorithm<Tensor> AllToAllSingleOf(const Tensor& input,
                                   const std::vector<int64_t>& output_splits,
                                   const std::vector<int64_t>& input_splits) {
  return [args = algorithms::AllToAllSingleArgs{
              input, input_splits, output_splits}](Result<Tensor> r) mutable {
    algorithms::AllToAllSingle(std::move(r), std::move(args));
  };
}
Algorithm<std::vector<Tensor>> AllGatherOf(const Tensor& input) {
  return [input](Result<std::vector<Tensor>> r) {
    algorithms::AllGather(std::move(r), input);
  };
}
Algorithm<Value> AllGatherAxisOf(const Value& value, int64_t axis) {
  return [value, axis](Result<Value> r) {
    algorithms::AllGatherAlongAxis(std::move(r), {value, axis});
  };
}
Algorithm<Tensor> AllReduceOf(const Tensor& input, ReduceOp op) {
  return [input, op](Result<Tensor> r) {
    algorithms::AllReduce(std::move(r), {input, op});
  };
}
Algorithm<Tensor> ReduceScatterOf(const std::vector<Tensor>& inputs,
                                  ReduceOp op) {
  return [inputs, op](Result<Tensor> r) {
    algorithms::ReduceScatter(std::move(r), {inputs, op});
  };
}
Algorithm<Tensor> ReduceOf(const Tensor& input, int dst, ReduceOp op) {
  return [input, dst, op](Result<Tensor> r) {
    algorithms::Reduce(std::move(r), {input, dst, op, nullptr});
  };
}
Algorithm<Value> BroadcastOf(const Value& value, int src) {
  return [value, src](Result<Value> r) {
    algorithms::Broadcast(std::move(r), {value, src});
  };
}
Algorithm<Value> ScatterOf(const std::vector<Value>& values, int src) {
  return [values, src](Result<Value> r) {
    algorithms::Scatter(std::move(r), {values, src});
  };
}
Algorithm<std::vector<Value>> GatherOf(const Value& value, int dst) {
  return [value, dst](Result<std::vector<Value>> r) {
    algorithms::Gather(std::move(r), {value, dst});
  };
}
Algorithm<Value> ByNameOf(by_name::Runner run, Value input, Value params) {
  return [run, input = std::move(input),
          params = std::move(params)](Result<Value> r) mutable {
    run(std::move(r), std::move(input), std::move(params));
  };
}

absl::Status UnknownCollective(absl::string_view name) {
  return absl::InvalidArgumentError(
      absl::StrCat("unknown collective \"", name,
                   "\"; known: ", absl::StrJoin(by_name::Names(), ", ")));
}

}  // namespace

absl::StatusOr<Value> RunCollective(ProcessGroup& group, absl::string_view name,
                                    const Value& input, const Value& params,
                                    const CollectiveOptions& options) {
  by_name::Runner run = by_name::Find(name);
  if (run == nullptr) return UnknownCollective(name);
  return Run<Value>(group, name, options, ByNameOf(run, input, params),
                    Summarize(input));
}

Work<Value> RunCollectiveAsync(ProcessGroup& group, absl::string_view name,
                               Value input, Value params,
                               const CollectiveOptions& options) {
  by_name::Runner run = by_name::Find(name);
  if (run == nullptr)
    return Work<Value>(Future<Value>::Ready(UnknownCollective(name)));
  std::vector<TensorSummary> inputs = Summarize(input);
  return Start<Value>(group, name, options,
                      ByNameOf(run, std::move(input), std::move(params)),
                      std::move(inputs));
}

absl::StatusOr<std::vector<Tensor>> AllToAll(ProcessGroup& group,
                                             const std::vector<Tensor>& inputs,
                                             const CollectiveOptions& options) {
  return Run(group, "all_to_all", options, AllToAllOf(inputs),
             Summarize(inputs));
}
Work<std::vector<Tensor>> AllToAllAsync(ProcessGroup& group,
                                        const std::vector<Tensor>& inputs,
                                        const CollectiveOptions& options) {
  return Start(group, "all_to_all", options, AllToAllOf(inputs),
               Summarize(inputs));
}

absl::StatusOr<Tensor> AllToAllSingle(ProcessGroup& group, const Tensor& input,
                                      const std::vector<int64_t>& output_splits,
                                      const std::vector<int64_t>& input_splits,
                                      const CollectiveOptions& options) {
  return Run(group, "all_to_all_single", options,
             AllToAllSingleOf(input, output_splits, input_splits),
             Summarize(input));
}
Work<Tensor> AllToAllSingleAsync(ProcessGroup& group, const Tensor& input,
                                 const std::vector<int64_t>& output_splits,
                                 const std::vector<int64_t>& input_splits,
                                 const CollectiveOptions& options) {
  return Start(group, "all_to_all_single", options,
               AllToAllSingleOf(input, output_splits, input_splits),
               Summarize(input));
}

absl::StatusOr<std::vector<Tensor>> AllGather(
    ProcessGroup& group, const Tensor& input,
    const CollectiveOptions& options) {
  return Run(group, "all_gather", options, AllGatherOf(input),
             Summarize(input));
}
Work<std::vector<Tensor>> AllGatherAsync(ProcessGroup& group,
                                         const Tensor& input,
                                         const CollectiveOptions& options) {
  return Start(group, "all_gather", options, AllGatherOf(input),
               Summarize(input));
}

absl::StatusOr<Value> AllGather(ProcessGroup& group, const Value& value,
                                int64_t axis,
                                const CollectiveOptions& options) {
  return Run(group, "all_gather", options, AllGatherAxisOf(value, axis),
             Summarize(value));
}
Work<Value> AllGatherAsync(ProcessGroup& group, const Value& value,
                           int64_t axis, const CollectiveOptions& options) {
  return Start(group, "all_gather", options, AllGatherAxisOf(value, axis),
               Summarize(value));
}

absl::StatusOr<Tensor> AllReduce(ProcessGroup& group, const Tensor& input,
                                 ReduceOp op,
                                 const CollectiveOptions& options) {
  return Run(group, "all_reduce", options, AllReduceOf(input, op),
             Summarize(input));
}
Work<Tensor> AllReduceAsync(ProcessGroup& group, const Tensor& input,
                            ReduceOp op, const CollectiveOptions& options) {
  return Start(group, "all_reduce", options, AllReduceOf(input, op),
               Summarize(input));
}

absl::StatusOr<Tensor> ReduceScatter(ProcessGroup& group,
                                     const std::vector<Tensor>& inputs,
                                     ReduceOp op,
                                     const CollectiveOptions& options) {
  return Run(group, "reduce_scatter", options, ReduceScatterOf(inputs, op),
             Summarize(inputs));
}
Work<Tensor> ReduceScatterAsync(ProcessGroup& group,
                                const std::vector<Tensor>& inputs, ReduceOp op,
                                const CollectiveOptions& options) {
  return Start(group, "reduce_scatter", options, ReduceScatterOf(inputs, op),
               Summarize(inputs));
}

absl::StatusOr<Tensor> Reduce(ProcessGroup& group, const Tensor& input, int dst,
                              ReduceOp op, const CollectiveOptions& options) {
  return Run(group, "reduce", options, ReduceOf(input, dst, op));
}
Work<Tensor> ReduceAsync(ProcessGroup& group, const Tensor& input, int dst,
                         ReduceOp op, const CollectiveOptions& options) {
  return Start(group, "reduce", options, ReduceOf(input, dst, op));
}

absl::StatusOr<Value> Broadcast(ProcessGroup& group, const Value& value,
                                int src, const CollectiveOptions& options) {
  return Run(group, "broadcast", options, BroadcastOf(value, src),
             Summarize(value));
}
Work<Value> BroadcastAsync(ProcessGroup& group, const Value& value, int src,
                           const CollectiveOptions& options) {
  return Start(group, "broadcast", options, BroadcastOf(value, src),
               Summarize(value));
}

absl::StatusOr<Value> Scatter(ProcessGroup& group,
                              const std::vector<Value>& values, int src,
                              const CollectiveOptions& options) {
  return Run(group, "scatter", options, ScatterOf(values, src),
             Summarize(values));
}
Work<Value> ScatterAsync(ProcessGroup& group, const std::vector<Value>& values,
                         int src, const CollectiveOptions& options) {
  return Start(group, "scatter", options, ScatterOf(values, src),
               Summarize(values));
}

absl::StatusOr<std::vector<Value>> Gather(ProcessGroup& group,
                                          const Value& value, int dst,
                                          const CollectiveOptions& options) {
  return Run(group, "gather", options, GatherOf(value, dst), Summarize(value));
}
Work<std::vector<Value>> GatherAsync(ProcessGroup& group, const Value& value,
                                     int dst,
                                     const CollectiveOptions& options) {
  return Start(group, "gather", options, GatherOf(value, dst),
               Summarize(value));
}

absl::Status Barrier(ProcessGroup& group, const CollectiveOptions& options) {
  return Run<Done>(group, "barrier", options, &algorithms::Barrier).status();
}
Work<Done> BarrierAsync(ProcessGroup& group, const CollectiveOptions& options) {
  return Start<Done>(group, "barrier", options, &algorithms::Barrier);
}

}  // namespace ferry
