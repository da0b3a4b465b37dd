#include "collectives/into.h"

#include <utility>

#include "collectives/algorithms/algorithms.h"
#include "collectives/op/runner.h"

namespace ferry {

namespace {

template <typename T>
Work<T> Start(ProcessGroup& group, absl::string_view name,
              const CollectiveOptions& options, Algorithm<T> algorithm) {
  return StartWork<T>(group, name, options, std::move(algorithm));
}

// The tensor a by-value algorithm returns.
Work<Tensor> AsTensor(Work<Value> work) {
  return Work<Tensor>(
      work.future().Map(
          [](const absl::StatusOr<Value>& v) -> absl::StatusOr<Tensor> {
            if (!v.ok()) return v.status();
            if (!v->is_tensor()) return absl::InternalError("not a tensor");
            return v->as_tensor();
          }),
      work.what());
}

std::vector<Tensor> TensorsOf(const std::vector<Value>& values) {
  std::vector<Tensor> out;
  for (const Value& v : values) {
    if (v.is_tensor()) out.push_back(v.as_tensor());
  }
  return out;
}

}  // namespace

Work<Tensor> AllReduceIntoAsync(ProcessGroup& group, const Tensor& input,
                                TensorOut out, ReduceOp op,
                                const CollectiveOptions& options) {
  return Start<Tensor>(
      group, "all_reduce", options,
      [args = algorithms::AllReduceArgs{input, op, std::move(out)}](
          Result<Tensor> r) mutable {
        algorithms::AllReduce(std::move(r), std::move(args));
      });
}

Work<std::vector<Tensor>> AllToAllIntoAsync(ProcessGroup& group,
                                            const std::vector<Tensor>& inputs,
                                            std::vector<TensorOut> outs,
                                            const CollectiveOptions& options) {
  return Start<std::vector<Tensor>>(
      group, "all_to_all", options,
      [args = algorithms::AllToAllArgs{inputs, std::move(outs)}](
          Result<std::vector<Tensor>> r) mutable {
        algorithms::AllToAll(std::move(r), std::move(args));
      });
}

Work<Tensor> AllToAllSingleIntoAsync(ProcessGroup& group, const Tensor& input,
                                     TensorOut out,
                                     const std::vector<int64_t>& output_splits,
                                     const std::vector<int64_t>& input_splits,
                                     const CollectiveOptions& options) {
  return Start<Tensor>(
      group, "all_to_all_single", options,
      [args = algorithms::AllToAllSingleArgs{input, input_splits, output_splits,
                                             std::move(out)}](
          Result<Tensor> r) mutable {
        algorithms::AllToAllSingle(std::move(r), std::move(args));
      });
}

Work<std::vector<Tensor>> AllGatherIntoAsync(ProcessGroup& group,
                                             const Tensor& input,
                                             std::vector<TensorOut> outs,
                                             const CollectiveOptions& options) {
  return Start<std::vector<Tensor>>(
      group, "all_gather", options,
      [args = algorithms::AllGatherArgs{input, std::move(outs)}](
          Result<std::vector<Tensor>> r) mutable {
        algorithms::AllGather(std::move(r), std::move(args));
      });
}

Work<Tensor> ReduceScatterIntoAsync(ProcessGroup& group,
                                    const std::vector<Tensor>& inputs,
                                    TensorOut out, ReduceOp op,
                                    const CollectiveOptions& options) {
  return Start<Tensor>(
      group, "reduce_scatter", options,
      [args = algorithms::ReduceScatterArgs{inputs, op, std::move(out)}](
          Result<Tensor> r) mutable {
        algorithms::ReduceScatter(std::move(r), std::move(args));
      });
}

Work<Tensor> BroadcastIntoAsync(ProcessGroup& group, const Tensor& tensor,
                                TensorOut out, int src,
                                const CollectiveOptions& options) {
  return AsTensor(Start<Value>(
      group, "broadcast", options,
      [args = algorithms::BroadcastArgs{Value(tensor), src, std::move(out)}](
          Result<Value> r) mutable {
        algorithms::Broadcast(std::move(r), std::move(args));
      }));
}

Work<Tensor> ScatterIntoAsync(ProcessGroup& group,
                              const std::vector<Tensor>& inputs, TensorOut out,
                              int src, const CollectiveOptions& options) {
  std::vector<Value> values(inputs.begin(), inputs.end());
  return AsTensor(Start<Value>(
      group, "scatter", options,
      [args = algorithms::ScatterArgs{std::move(values), src, std::move(out)}](
          Result<Value> r) mutable {
        algorithms::Scatter(std::move(r), std::move(args));
      }));
}

Work<std::vector<Tensor>> GatherIntoAsync(ProcessGroup& group,
                                          const Tensor& input,
                                          std::vector<TensorOut> outs, int dst,
                                          const CollectiveOptions& options) {
  Work<std::vector<Value>> work = Start<std::vector<Value>>(
      group, "gather", options,
      [args = algorithms::GatherArgs{Value(input), dst, std::move(outs)}](
          Result<std::vector<Value>> r) mutable {
        algorithms::Gather(std::move(r), std::move(args));
      });
  return Work<std::vector<Tensor>>(
      work.future().Map([](const absl::StatusOr<std::vector<Value>>& v)
                            -> absl::StatusOr<std::vector<Tensor>> {
        if (!v.ok()) return v.status();
        return TensorsOf(*v);
      }));
}

Work<Tensor> ReduceIntoAsync(ProcessGroup& group, const Tensor& input,
                             TensorOut out, int dst, ReduceOp op,
                             const CollectiveOptions& options) {
  return Start<Tensor>(
      group, "reduce", options,
      [args = algorithms::ReduceArgs{input, dst, op, std::move(out)}](
          Result<Tensor> r) mutable {
        algorithms::Reduce(std::move(r), std::move(args));
      });
}

}  // namespace ferry
