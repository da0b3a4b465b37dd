#include "tools/python/src/collective_ops.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/ferry.h"
#include "pybind11/stl.h"
#include "rpc/stacks.h"
#include "rpc/value/tensor_builder.h"
#include "tools/python/src/convert.h"
#include "tools/python/src/endpoints.h"
#include "tools/python/src/errors.h"
#include "tools/python/src/pending_op.h"

namespace ferry::python {

namespace {

namespace py = ::pybind11;

// What every op binding starts from: the inputs' leases, the result kind
// and the deadline.
struct Call {
  Staging staging;
  ConvertState state;
  CollectiveOptions options;
  TensorKind fallback;

  std::vector<std::string> into_labels;  // Of the outputs, in order.

  Call(double timeout, TensorKind fallback_kind) : fallback(fallback_kind) {
    state.leases = staging.leases;
    options.timeout = absl::Seconds(timeout);
    staging.timeout = options.timeout;
  }

  Tensor Input(py::handle object, const char* name) {
    Path path{nullptr, name};
    return ValueOrRaise(ToTensor(object, path, &state));
  }

  std::vector<Tensor> Inputs(py::handle list, const char* name) {
    Path path{nullptr, name};
    if (!PyList_Check(list.ptr()) && !PyTuple_Check(list.ptr())) {
      Raise(absl::InvalidArgumentError(
          absl::StrCat(name, ": expected a list of tensors")));
    }
    std::vector<Tensor> out;
    for (py::handle item : list) {
      Path at{&path, nullptr, static_cast<int64_t>(out.size())};
      out.push_back(ValueOrRaise(ToTensor(item, at, &state)));
    }
    return out;
  }

  Value AnyInput(py::handle object, const char* name) {
    Path path{nullptr, name};
    return ValueOrRaise(ToValue(object, path, &state));
  }

  // `object` (a writable tensor) as where the op writes a result itself
  // (into.h): nothing is copied back when it is done.
  TensorOut Into(py::handle object, std::string label) {
    Destination d = ValueOrRaise(ToDestination(object, label));
    into_labels.push_back(std::move(label));
    state.saw_torch |= d.torch;
    state.saw_numpy |= !d.torch;
    // The array stays alive while ferry may write to it (dropped on any
    // thread, without the GIL: py_ref.h).
    auto keep = std::make_shared<PyRef>(d.keep);
    return ValueOrRaise(OutputOver(d.dtype, d.shape, keep, d.data, d.nbytes));
  }

  // Outputs must have the input's dtype: a mistake seen here, raised here
  // (as torch's backends do) naming the output.
  void SameDType(const std::vector<TensorOut>& outs, DType dtype) {
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i]->dtype() == dtype) continue;
      Raise(absl::InvalidArgumentError(
          absl::StrCat(into_labels.at(into_labels.size() - outs.size() + i),
                       " is ", DTypeName(outs[i]->dtype()),
                       " but the input is ", DTypeName(dtype))));
    }
  }

  std::vector<TensorOut> Intos(py::handle list, const char* name) {
    std::vector<TensorOut> out;
    for (py::handle item : list) {
      out.push_back(Into(item, absl::StrCat(name, "[", out.size(), "]")));
    }
    return out;
  }

  // Runs an op that writes its outputs itself (synchronously, or started
  // with async_op) with the GIL released; `norm` gives its result.
  template <typename T, typename Norm>
  PendingOp Start(bool async, std::function<Work<T>()> start, Norm norm) {
    staging.kind = state.KindOr(fallback);
    Future<Value> result;
    {
      py::gil_scoped_release release;
      Work<T> work = start();
      result = work.future().Map(
          [norm](const absl::StatusOr<T>& r) -> absl::StatusOr<Value> {
            if (!r.ok()) return r.status();
            return norm(*r);
          });
      if (!async) {
        // Bounded by the op's own deadline; this is a backstop.
        WaitNote note(work.what());
        result = Future<Value>::Ready(
            result.Wait(options.timeout + absl::Seconds(10)));
      }
    }
    return PendingOp(std::move(result), std::move(staging));
  }

  // Runs the op (synchronously, or started with async_op) with the GIL
  // released; the result as a Value.
  template <typename T, typename Norm>
  PendingOp Launch(bool async, std::function<absl::StatusOr<T>()> sync,
                   std::function<Work<T>()> start, Norm norm) {
    staging.kind = state.KindOr(fallback);
    Future<Value> result;
    {
      py::gil_scoped_release release;
      auto to_value =
          [norm](const absl::StatusOr<T>& r) -> absl::StatusOr<Value> {
        if (!r.ok()) return r.status();
        return norm(*r);
      };
      if (async) {
        result = start().future().Map(to_value);
      } else {
        result = Future<Value>::Ready(to_value(sync()));
      }
    }
    return PendingOp(std::move(result), std::move(staging));
  }
};

Value TensorList(const std::vector<Tensor>& tensors) {
  Value::List out(tensors.begin(), tensors.end());
  return Value(std::move(out));
}
Value ValueList(const std::vector<Value>& values) { return Value(values); }
Value Same(const Value& v) { return v; }
template <typename T>
Value NothingOf(const T&) {
  return Value();
}
constexpr auto Nothing = [](const auto& r) { return NothingOf(r); };

KeyedJaggedTensor Kjt(py::handle d, const char* what, Call& call) {
  if (d.is_none()) return KeyedJaggedTensor();
  py::dict kjt = py::reinterpret_borrow<py::dict>(d);
  std::vector<std::string> keys = kjt["keys"].cast<std::vector<std::string>>();
  std::string where(what);
  Tensor lengths = call.Input(kjt["lengths"], (where + ".lengths").c_str());
  Tensor values = call.Input(kjt["values"], (where + ".values").c_str());
  std::optional<Tensor> weights;
  if (kjt.contains("weights") && !kjt["weights"].is_none()) {
    weights = call.Input(kjt["weights"], (where + ".weights").c_str());
  }
  std::optional<int64_t> stride;
  if (kjt.contains("stride") && !kjt["stride"].is_none()) {
    stride = kjt["stride"].cast<int64_t>();
  }
  return ValueOrRaise(KeyedJaggedTensor::Create(
      std::move(keys), std::move(lengths), std::move(values),
      std::move(weights), stride, what));
}

Value FeaturesValue(const SparseFeatures& f) {
  return Value(Value::Map{{"id_list", f.id_list.ToValue()},
                          {"id_score_list", f.id_score_list.ToValue()}});
}
Value KjtValue(const KeyedJaggedTensor& k) { return k.ToValue(); }

void BindOps(py::module_& m) {
  m.def(
      "all_to_all",
      [](GroupHandle& g, py::handle inputs, py::handle outputs, double timeout,
         bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        std::vector<Tensor> in = c.Inputs(inputs, "input_tensor_list");
        std::vector<TensorOut> out = c.Intos(outputs, "output_tensor_list");
        if (!in.empty()) c.SameDType(out, in[0].dtype());
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<std::vector<Tensor>>(
            async, [&] { return AllToAllIntoAsync(*group, in, out, o); },
            Nothing);
      },
      py::arg("group"), py::arg("inputs"), py::arg("outputs"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "all_to_all_single",
      [](GroupHandle& g, py::handle input, py::handle output,
         std::vector<int64_t> output_splits, std::vector<int64_t> input_splits,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        Tensor in = c.Input(input, "input");
        TensorOut out = c.Into(output, "output");
        c.SameDType({out}, in.dtype());
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Tensor>(
            async,
            [&] {
              return AllToAllSingleIntoAsync(*group, in, out, output_splits,
                                             input_splits, o);
            },
            Nothing);
      },
      py::arg("group"), py::arg("input"), py::arg("output"),
      py::arg("output_splits"), py::arg("input_splits"), py::arg("timeout"),
      py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "all_gather",
      [](GroupHandle& g, py::handle input, py::handle outputs, double timeout,
         bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        Tensor in = c.Input(input, "tensor");
        auto group = g.group;
        CollectiveOptions o = c.options;
        if (outputs.is_none()) {
          c.staging.returns_result = true;
          return c.Launch<std::vector<Tensor>>(
              async, [&] { return AllGather(*group, in, o); },
              [&] { return AllGatherAsync(*group, in, o); }, TensorList);
        }
        std::vector<TensorOut> out = c.Intos(outputs, "tensor_list");
        c.SameDType(out, in.dtype());
        return c.Start<std::vector<Tensor>>(
            async, [&] { return AllGatherIntoAsync(*group, in, out, o); },
            Nothing);
      },
      py::arg("group"), py::arg("input"), py::arg("outputs"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "all_gather_axis",
      [](GroupHandle& g, py::handle value, int64_t axis, double timeout,
         bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        Value in = c.AnyInput(value, "value");
        c.staging.returns_result = true;
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Launch<Value>(
            async, [&] { return AllGather(*group, in, axis, o); },
            [&] { return AllGatherAsync(*group, in, axis, o); }, Same);
      },
      py::arg("group"), py::arg("value"), py::arg("axis"), py::arg("timeout"),
      py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "all_reduce",
      [](GroupHandle& g, py::handle tensor, const std::string& op,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        ReduceOp reduce = ValueOrRaise(ParseReduceOp(op));
        Tensor in = c.Input(tensor, "tensor");
        TensorOut out = c.Into(tensor, "tensor");  // In place.
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Tensor>(
            async,
            [&] { return AllReduceIntoAsync(*group, in, out, reduce, o); },
            Nothing);
      },
      py::arg("group"), py::arg("tensor"), py::arg("op"), py::arg("timeout"),
      py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "reduce_scatter",
      [](GroupHandle& g, py::handle output, py::handle inputs,
         const std::string& op, double timeout, bool async,
         const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        ReduceOp reduce = ValueOrRaise(ParseReduceOp(op));
        std::vector<Tensor> in = c.Inputs(inputs, "input_list");
        TensorOut out = c.Into(output, "output");
        if (!in.empty()) c.SameDType({out}, in[0].dtype());
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Tensor>(
            async,
            [&] { return ReduceScatterIntoAsync(*group, in, out, reduce, o); },
            Nothing);
      },
      py::arg("group"), py::arg("output"), py::arg("inputs"), py::arg("op"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "broadcast",
      [](GroupHandle& g, py::handle tensor, int src, double timeout, bool async,
         const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        Tensor in = c.Input(tensor, "tensor");
        TensorOut out = c.Into(tensor, "tensor");  // In place on src.
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Tensor>(
            async, [&] { return BroadcastIntoAsync(*group, in, out, src, o); },
            Nothing);
      },
      py::arg("group"), py::arg("tensor"), py::arg("src"), py::arg("timeout"),
      py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "scatter",
      [](GroupHandle& g, py::handle output, py::handle inputs, int src,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        std::vector<Tensor> in;
        if (!inputs.is_none()) in = c.Inputs(inputs, "scatter_list");
        TensorOut out = c.Into(output, "tensor");
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Tensor>(
            async, [&] { return ScatterIntoAsync(*group, in, out, src, o); },
            Nothing);
      },
      py::arg("group"), py::arg("output"), py::arg("inputs"), py::arg("src"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "gather",
      [](GroupHandle& g, py::handle input, py::handle outputs, int dst,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        auto group = g.group;
        CollectiveOptions o = c.options;
        if (outputs.is_none()) {
          Value in(c.Input(input, "tensor"));
          c.staging.returns_result = true;
          return c.Launch<std::vector<Value>>(
              async, [&] { return Gather(*group, in, dst, o); },
              [&] { return GatherAsync(*group, in, dst, o); }, ValueList);
        }
        Tensor in = c.Input(input, "tensor");
        std::vector<TensorOut> out = c.Intos(outputs, "gather_list");
        c.SameDType(out, in.dtype());
        return c.Start<std::vector<Tensor>>(
            async, [&] { return GatherIntoAsync(*group, in, out, dst, o); },
            Nothing);
      },
      py::arg("group"), py::arg("input"), py::arg("outputs"), py::arg("dst"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "barrier",
      [](GroupHandle& g, double timeout, bool async) {
        Call c(timeout, TensorKind::kNumpy);
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Launch<Done>(
            async,
            [&]() -> absl::StatusOr<Done> {
              absl::Status s = Barrier(*group, o);
              if (!s.ok()) return s;
              return Done();
            },
            [&] { return BarrierAsync(*group, o); }, Nothing);
      },
      py::arg("group"), py::arg("timeout"), py::arg("async_op"));

  m.def(
      "reduce",
      [](GroupHandle& g, py::handle tensor, int dst, const std::string& op,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        ReduceOp reduce = ValueOrRaise(ParseReduceOp(op));
        Tensor in = c.Input(tensor, "tensor");
        // In place on dst; the others' tensors are left as they are.
        TensorOut out;
        if (g.group->rank() == dst) out = c.Into(tensor, "tensor");
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Tensor>(
            async,
            [&] { return ReduceIntoAsync(*group, in, out, dst, reduce, o); },
            Nothing);
      },
      py::arg("group"), py::arg("tensor"), py::arg("dst"), py::arg("op"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "send",
      [](GroupHandle& g, py::handle tensor, int dst, int64_t tag,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        Tensor in = c.Input(tensor, "tensor");
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Done>(
            async, [&] { return SendAsync(*group, in, dst, tag, o); }, Nothing);
      },
      py::arg("group"), py::arg("tensor"), py::arg("dst"), py::arg("tag"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "recv",
      [](GroupHandle& g, py::handle tensor, int src, int64_t tag,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        TensorOut out = c.Into(tensor, "tensor");
        // The result is the source's group rank (-1: any source).
        c.staging.returns_result = true;
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Start<Received>(
            async, [&] { return RecvAsync(*group, src, tag, out, o); },
            [](const Received& r) { return Value(int64_t{r.src}); });
      },
      py::arg("group"), py::arg("tensor"), py::arg("src"), py::arg("tag"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "sparse_features_all_to_all",
      [](GroupHandle& g, py::handle id_list, py::handle id_score_list,
         std::vector<int64_t> id_list_per_rank,
         std::vector<int64_t> id_score_list_per_rank, int stagger,
         double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        SparseFeatures in{Kjt(id_list, "id_list_features", c),
                          Kjt(id_score_list, "id_score_list_features", c)};
        c.staging.returns_result = true;
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Launch<SparseFeatures>(
            async,
            [&] {
              return SparseFeaturesAllToAll(*group, in, id_list_per_rank,
                                            id_score_list_per_rank, stagger, o);
            },
            [&] {
              return SparseFeaturesAllToAllAsync(*group, in, id_list_per_rank,
                                                 id_score_list_per_rank,
                                                 stagger, o);
            },
            FeaturesValue);
      },
      py::arg("group"), py::arg("id_list"), py::arg("id_score_list"),
      py::arg("id_list_features_per_rank"),
      py::arg("id_score_list_features_per_rank"), py::arg("stagger"),
      py::arg("timeout"), py::arg("async_op"), py::arg("tensor_type"));

  m.def(
      "kjt_all_to_all",
      [](GroupHandle& g, py::handle kjt, std::vector<int64_t> features_per_rank,
         int stagger, double timeout, bool async, const std::string& kind) {
        Call c(timeout, ValueOrRaise(ParseTensorKind(kind)));
        KeyedJaggedTensor in = Kjt(kjt, "kjt", c);
        c.staging.returns_result = true;
        auto group = g.group;
        CollectiveOptions o = c.options;
        return c.Launch<KeyedJaggedTensor>(
            async,
            [&] {
              return KJTAllToAll(*group, in, features_per_rank, stagger, o);
            },
            [&] {
              return KJTAllToAllAsync(*group, in, features_per_rank, stagger,
                                      o);
            },
            KjtValue);
      },
      py::arg("group"), py::arg("kjt"), py::arg("features_per_rank"),
      py::arg("stagger"), py::arg("timeout"), py::arg("async_op"),
      py::arg("tensor_type"));
}

}  // namespace

void BindCollectives(py::module_& m) {
  py::class_<PendingOp>(m, "Work", "A collective in flight (async_op=True).")
      .def("wait", &PendingOp::Wait, py::arg("timeout") = py::none())
      .def("is_completed", &PendingOp::IsCompleted)
      .def("add_done_callback", &PendingOp::AddDoneCallback,
           py::arg("callback"));
  py::class_<DoneQueue, std::shared_ptr<DoneQueue>>(
      m, "DoneQueue", "Collectives done, for the thread that finishes them.")
      .def(py::init<>())
      .def("watch", &DoneQueue::Watch, py::arg("op"), py::arg("id"))
      .def("next", &DoneQueue::Next, py::arg("timeout"));
  BindOps(m);
}

}  // namespace ferry::python
