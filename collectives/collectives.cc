#include "collectives/collectives.h"

#include <utility>

#include "collectives/args.h"
#include "rpc/base/status_util.h"

namespace ferry {

namespace {

// A typed collective: its Value-level request and how to read its result.
template <typename T>
struct Request {
  absl::string_view name;
  Value input;
  Value params;
  absl::StatusOr<T> (*read)(absl::StatusOr<Value>);
};

template <typename T>
absl::StatusOr<T> Run(ProcessGroup& group, Request<T> r,
                      const CollectiveOptions& options) {
  return r.read(RunCollective(group, r.name, r.input, r.params, options));
}

template <typename T>
Work<T> Start(ProcessGroup& group, Request<T> r,
              const CollectiveOptions& options) {
  Future<Value> out = RunCollectiveAsync(group, r.name, std::move(r.input),
                                         std::move(r.params), options)
                          .future();
  return Work<T>(out.Map(r.read));
}

absl::StatusOr<Value> AsValue(absl::StatusOr<Value> v) { return v; }

absl::StatusOr<Tensor> AsTensor(absl::StatusOr<Value> v) {
  if (!v.ok()) return v.status();
  if (!v->is_tensor())
    return absl::InternalError("collective: expected a tensor result");
  return v->as_tensor();
}

absl::StatusOr<std::vector<Value>> AsList(absl::StatusOr<Value> v) {
  if (!v.ok()) return v.status();
  if (v->is_null()) return std::vector<Value>();
  if (!v->is_list())
    return absl::InternalError("collective: expected a list result");
  return v->as_list();
}

absl::StatusOr<std::vector<Tensor>> AsTensors(absl::StatusOr<Value> v) {
  FERRY_ASSIGN_OR_RETURN(std::vector<Value> list, AsList(std::move(v)));
  std::vector<Tensor> out;
  for (Value& x : list) {
    FERRY_ASSIGN_OR_RETURN(Tensor t, AsTensor(std::move(x)));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<Done> AsDone(absl::StatusOr<Value> v) {
  if (!v.ok()) return v.status();
  return Done();
}

Value TensorList(const std::vector<Tensor>& ts) {
  Value::List list(ts.begin(), ts.end());
  return Value(std::move(list));
}

Value Param(absl::string_view key, Value v) {
  return Value(Value::Map{{std::string(key), std::move(v)}});
}

Value ReduceParams(ReduceOp op) {
  return Param("op", std::string(ReduceOpName(op)));
}

Request<std::vector<Tensor>> AllToAllRequest(
    const std::vector<Tensor>& inputs) {
  return {"all_to_all", TensorList(inputs), Value(), &AsTensors};
}
Request<Tensor> AllToAllSingleRequest(
    const Tensor& input, const std::vector<int64_t>& output_splits,
    const std::vector<int64_t>& input_splits) {
  Value in(Value::Map{{"input", input},
                      {"input_splits", IntList(input_splits)},
                      {"output_splits", IntList(output_splits)}});
  return {"all_to_all_single", std::move(in), Value(), &AsTensor};
}
Request<std::vector<Tensor>> AllGatherRequest(const Tensor& input) {
  return {"all_gather", Value(input), Value(), &AsTensors};
}
Request<Value> AllGatherAxisRequest(const Value& value, int64_t axis) {
  return {"all_gather", value, Param("axis", axis), &AsValue};
}
Request<Tensor> AllReduceRequest(const Tensor& input, ReduceOp op) {
  return {"all_reduce", Value(input), ReduceParams(op), &AsTensor};
}
Request<Tensor> ReduceScatterRequest(const std::vector<Tensor>& inputs,
                                     ReduceOp op) {
  return {"reduce_scatter", TensorList(inputs), ReduceParams(op), &AsTensor};
}
Request<Value> BroadcastRequest(const Value& value, int src) {
  return {"broadcast", value, Param("src", src), &AsValue};
}
Request<Value> ScatterRequest(const std::vector<Value>& values, int src) {
  return {"scatter", Value(Value::List(values)), Param("src", src), &AsValue};
}
Request<std::vector<Value>> GatherRequest(const Value& value, int dst) {
  return {"gather", value, Param("dst", dst), &AsList};
}
Request<Done> BarrierRequest() {
  return {"barrier", Value(), Value(), &AsDone};
}

}  // namespace

absl::StatusOr<Value> RunCollective(ProcessGroup& group, absl::string_view name,
                                    const Value& input, const Value& params,
                                    const CollectiveOptions& options) {
  FERRY_ASSIGN_OR_RETURN(OpSpec spec, PrepareOp(group, name, options));
  return RunOp(group, spec, input, params);
}

Work<Value> RunCollectiveAsync(ProcessGroup& group, absl::string_view name,
                               Value input, Value params,
                               const CollectiveOptions& options) {
  absl::StatusOr<OpSpec> spec = PrepareOp(group, name, options);
  if (!spec.ok()) return Work<Value>(Future<Value>::Ready(spec.status()));
  return Work<Value>(
      RunOpAsync(group, *std::move(spec), std::move(input), std::move(params)));
}

absl::StatusOr<std::vector<Tensor>> AllToAll(ProcessGroup& group,
                                             const std::vector<Tensor>& inputs,
                                             const CollectiveOptions& options) {
  return Run(group, AllToAllRequest(inputs), options);
}
Work<std::vector<Tensor>> AllToAllAsync(ProcessGroup& group,
                                        const std::vector<Tensor>& inputs,
                                        const CollectiveOptions& options) {
  return Start(group, AllToAllRequest(inputs), options);
}

absl::StatusOr<Tensor> AllToAllSingle(ProcessGroup& group, const Tensor& input,
                                      const std::vector<int64_t>& output_splits,
                                      const std::vector<int64_t>& input_splits,
                                      const CollectiveOptions& options) {
  return Run(group, AllToAllSingleRequest(input, output_splits, input_splits),
             options);
}
Work<Tensor> AllToAllSingleAsync(ProcessGroup& group, const Tensor& input,
                                 const std::vector<int64_t>& output_splits,
                                 const std::vector<int64_t>& input_splits,
                                 const CollectiveOptions& options) {
  return Start(group, AllToAllSingleRequest(input, output_splits, input_splits),
               options);
}

absl::StatusOr<std::vector<Tensor>> AllGather(
    ProcessGroup& group, const Tensor& input,
    const CollectiveOptions& options) {
  return Run(group, AllGatherRequest(input), options);
}
Work<std::vector<Tensor>> AllGatherAsync(ProcessGroup& group,
                                         const Tensor& input,
                                         const CollectiveOptions& options) {
  return Start(group, AllGatherRequest(input), options);
}

absl::StatusOr<Value> AllGather(ProcessGroup& group, const Value& value,
                                int64_t axis,
                                const CollectiveOptions& options) {
  return Run(group, AllGatherAxisRequest(value, axis), options);
}
Work<Value> AllGatherAsync(ProcessGroup& group, const Value& value,
                           int64_t axis, const CollectiveOptions& options) {
  return Start(group, AllGatherAxisRequest(value, axis), options);
}

absl::StatusOr<Tensor> AllReduce(ProcessGroup& group, const Tensor& input,
                                 ReduceOp op,
                                 const CollectiveOptions& options) {
  return Run(group, AllReduceRequest(input, op), options);
}
Work<Tensor> AllReduceAsync(ProcessGroup& group, const Tensor& input,
                            ReduceOp op, const CollectiveOptions& options) {
  return Start(group, AllReduceRequest(input, op), options);
}

absl::StatusOr<Tensor> ReduceScatter(ProcessGroup& group,
                                     const std::vector<Tensor>& inputs,
                                     ReduceOp op,
                                     const CollectiveOptions& options) {
  return Run(group, ReduceScatterRequest(inputs, op), options);
}
Work<Tensor> ReduceScatterAsync(ProcessGroup& group,
                                const std::vector<Tensor>& inputs, ReduceOp op,
                                const CollectiveOptions& options) {
  return Start(group, ReduceScatterRequest(inputs, op), options);
}

absl::StatusOr<Value> Broadcast(ProcessGroup& group, const Value& value,
                                int src, const CollectiveOptions& options) {
  return Run(group, BroadcastRequest(value, src), options);
}
Work<Value> BroadcastAsync(ProcessGroup& group, const Value& value, int src,
                           const CollectiveOptions& options) {
  return Start(group, BroadcastRequest(value, src), options);
}

absl::StatusOr<Value> Scatter(ProcessGroup& group,
                              const std::vector<Value>& values, int src,
                              const CollectiveOptions& options) {
  return Run(group, ScatterRequest(values, src), options);
}
Work<Value> ScatterAsync(ProcessGroup& group, const std::vector<Value>& values,
                         int src, const CollectiveOptions& options) {
  return Start(group, ScatterRequest(values, src), options);
}

absl::StatusOr<std::vector<Value>> Gather(ProcessGroup& group,
                                          const Value& value, int dst,
                                          const CollectiveOptions& options) {
  return Run(group, GatherRequest(value, dst), options);
}
Work<std::vector<Value>> GatherAsync(ProcessGroup& group, const Value& value,
                                     int dst,
                                     const CollectiveOptions& options) {
  return Start(group, GatherRequest(value, dst), options);
}

absl::Status Barrier(ProcessGroup& group, const CollectiveOptions& options) {
  return Run(group, BarrierRequest(), options).status();
}
Work<Done> BarrierAsync(ProcessGroup& group, const CollectiveOptions& options) {
  return Start(group, BarrierRequest(), options);
}

}  // namespace ferry
