#include "tools/python/src/endpoints.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pybind11/stl.h"
#include "tools/python/src/errors.h"
#include "tools/python/src/futures.h"
#include "tools/python/src/py_ref.h"
#include "tools/python/src/rref_handle.h"

namespace ferry::python {

namespace {

// Drops `value` (which may hold RRefs) with the GIL released.
template <typename T>
void DropWithoutGil(T value) {
  py::gil_scoped_release release;
  T dropped = std::move(value);
}

std::vector<Value> Args(py::handle args, ConvertState* state) {
  DrainDeferred();
  Path path{nullptr, "args"};
  return ValueOrRaise(ToValues(args, path, state));
}

// A call's keyword arguments: None or a dict with str keys (each value as
// an argument); empty when none.
Value::Map Kwargs(py::handle kwargs, ConvertState* state) {
  if (kwargs.is_none()) return {};
  if (!PyDict_Check(kwargs.ptr())) {
    Raise(absl::InvalidArgumentError(absl::StrCat(
        "kwargs: expected a dict, got ",
        std::string(py::str(py::type::handle_of(kwargs).attr("__name__"))))));
  }
  if (PyDict_GET_SIZE(kwargs.ptr()) == 0) return {};
  Path path{nullptr, "kwargs"};
  Value v = ValueOrRaise(ToValue(kwargs, path, state));
  return std::move(v.as_map());
}

// The result of a synchronous call, as Python.
py::object Result(absl::StatusOr<Value> result, TensorKind kind) {
  if (!result.ok()) Raise(result.status());
  py::object out = FromValue(*result, kind);
  DropWithoutGil(std::move(result));
  return out;
}

// The calls workers and clients share (ferry::Worker and ferry::Client
// have the same call methods).
// (Calls without keyword arguments take the API's plain overloads: the
// common case pays nothing for them.)
template <typename Api>
py::object RpcSync(Api& api, TensorKind fallback, const std::string& to,
                   const std::string& fn, py::handle args, py::handle kwargs,
                   std::optional<double> timeout) {
  ConvertState state;
  std::vector<Value> values = Args(args, &state);
  Value::Map keywords = Kwargs(kwargs, &state);
  absl::StatusOr<Value> r;
  {
    py::gil_scoped_release release;
    r = keywords.empty()
            ? api.RpcSync(to, fn, std::move(values), Timeout(timeout))
            : api.RpcSync(to, fn, std::move(values), std::move(keywords),
                          Timeout(timeout));
  }
  return Result(std::move(r), state.KindOr(fallback));
}

template <typename Api>
void RpcAsync(Api& api, TensorKind fallback, const std::string& to,
              const std::string& fn, py::handle args, py::handle kwargs,
              std::optional<double> timeout, py::handle settle) {
  ConvertState state;
  std::vector<Value> values = Args(args, &state);
  Value::Map keywords = Kwargs(kwargs, &state);
  PyRef callback(settle);
  TensorKind kind = state.KindOr(fallback);
  py::gil_scoped_release release;
  Settle(keywords.empty()
             ? api.RpcAsync(to, fn, std::move(values), Timeout(timeout))
             : api.RpcAsync(to, fn, std::move(values), std::move(keywords),
                            Timeout(timeout)),
         kind, std::move(callback));
}

template <typename Api>
RRefHandle Remote(Api& api, TensorKind fallback, const std::string& to,
                  const std::string& fn, py::handle args, py::handle kwargs,
                  std::optional<double> timeout) {
  ConvertState state;
  std::vector<Value> values = Args(args, &state);
  Value::Map keywords = Kwargs(kwargs, &state);
  absl::StatusOr<RRef> r;
  {
    py::gil_scoped_release release;
    r = keywords.empty()
            ? api.Remote(to, fn, std::move(values), Timeout(timeout))
            : api.Remote(to, fn, std::move(values), std::move(keywords),
                         Timeout(timeout));
  }
  return RRefHandle(ValueOrRaise(std::move(r)), state.KindOr(fallback));
}

template <typename Handle, typename Get>
void BindCalls(py::class_<Handle>& c, Get get) {
  c.def(
       "rpc_sync",
       [get](Handle& h, const std::string& to, const std::string& fn,
             py::handle args, py::handle kwargs,
             std::optional<double> timeout) {
         return RpcSync(get(h), h.kind, to, fn, args, kwargs, timeout);
       },
       py::arg("to"), py::arg("fn"), py::arg("args"), py::arg("kwargs"),
       py::arg("timeout"))
      .def(
          "rpc_async",
          [get](Handle& h, const std::string& to, const std::string& fn,
                py::handle args, py::handle kwargs,
                std::optional<double> timeout, py::handle settle) {
            RpcAsync(get(h), h.kind, to, fn, args, kwargs, timeout, settle);
          },
          py::arg("to"), py::arg("fn"), py::arg("args"), py::arg("kwargs"),
          py::arg("timeout"), py::arg("settle"))
      .def(
          "remote",
          [get](Handle& h, const std::string& to, const std::string& fn,
                py::handle args, py::handle kwargs,
                std::optional<double> timeout) {
            return Remote(get(h), h.kind, to, fn, args, kwargs, timeout);
          },
          py::arg("to"), py::arg("fn"), py::arg("args"), py::arg("kwargs"),
          py::arg("timeout"))
      .def_property_readonly("name", [get](Handle& h) { return get(h).name(); })
      .def("workers",
           [get](Handle& h) {
             py::gil_scoped_release release;
             return get(h).workers();
           })
      .def_property(
          "tensor_type",
          [](Handle& h) {
            return h.kind == TensorKind::kTorch ? "torch" : "numpy";
          },
          [](Handle& h, const std::string& kind) {
            h.kind = ValueOrRaise(ParseTensorKind(kind));
          });
}

py::dict StatusDict(const WorkerStatus& s) {
  py::dict d;
  d["name"] = s.name;
  d["rank"] = s.rank;
  d["address"] = s.address;
  d["pid"] = s.pid;
  d["state"] = s.state;
  d["uptime_ms"] = s.uptime_ms;
  d["inflight_incoming"] = s.inflight_incoming;
  d["inflight_outgoing"] = s.inflight_outgoing;
  d["calls_served"] = s.calls_served;
  d["functions"] = s.functions;
  d["dead_peers"] = s.dead_peers;
  d["owned_rrefs"] = s.owned_rrefs;
  d["user_rrefs"] = s.user_rrefs;
  d["pending_forks"] = s.pending_forks;
  d["pending_deletes"] = s.pending_deletes;
  d["parked_requests"] = s.parked_requests;
  d["collectives_inflight"] = s.collectives_inflight;
  d["mailbox_bytes"] = s.mailbox_bytes;
  d["heap_bytes"] = s.heap_bytes;
  d["membership_lease_ms"] = s.membership_lease_ms;
  d["limits"] = s.limits;
  return d;
}

absl::Duration Seconds(double s) { return absl::Seconds(s); }

SecurityOptions Security(const py::dict& o) {
  SecurityOptions s;
  auto get = [&o](const char* key) {
    return o.contains(key) && !o[key].is_none() ? o[key].cast<std::string>()
                                                : std::string();
  };
  s.tls_cert_file = get("tls_cert");
  s.tls_key_file = get("tls_key");
  s.tls_ca_file = get("tls_ca");
  s.tls_server_name = get("tls_server_name");
  s.token_file = get("token_file");
  return s;
}

// The Python function `fn` as a ferry function: each call runs, with the
// GIL, `invoke(fn, args, kwargs, promise, caller)` (ferry/_rpc.py; kwargs
// a dict, or None for none), which settles the promise at once or, for
// coroutines and futures, later — holding no ferry thread meanwhile.
AsyncFunction PythonFunction(PyRef fn, PyRef invoke, TensorKind kind) {
  return [fn = std::move(fn), invoke = std::move(invoke), kind](
             const CallContext& ctx, std::vector<Value> args) {
    if (!PythonAlive()) {
      return Future<Value>::Ready(
          absl::UnavailableError("the Python interpreter is exiting"));
    }
    Promise<Value> promise;
    py::gil_scoped_acquire gil;
    DrainDeferred();
    try {
      py::list py_args = FromValues(args, kind);
      py::object py_kwargs = py::none();
      if (ctx.kwargs != nullptr)
        py_kwargs = FromValue(Value(*ctx.kwargs), kind);
      invoke.object()(fn.object(), py_args, py_kwargs, PromiseHandle(promise),
                      ctx.caller);
    } catch (py::error_already_set& e) {
      // Nobody has the future yet: setting it runs no callback.
      promise.Set(StatusFromException(e.value()));
    }
    return promise.future();
  };
}

std::unique_ptr<WorkerHandle> NewWorker(const py::dict& o) {
  WorkerOptions w;
  w.name = o["name"].is_none() ? "" : o["name"].cast<std::string>();
  w.rank = o["rank"].cast<int>();
  w.world_size = o["world_size"].cast<int>();
  w.master = o["master"].cast<std::string>();
  w.listen = o["listen"].is_none() ? "" : o["listen"].cast<std::string>();
  w.default_timeout = Seconds(o["timeout"].cast<double>());
  w.startup_timeout = Seconds(o["startup_timeout"].cast<double>());
  w.shutdown_timeout = Seconds(o["shutdown_timeout"].cast<double>());
  w.heartbeat_timeout = Seconds(o["heartbeat_timeout"].cast<double>());
  w.executor_threads = o["executor_threads"].cast<int>();
  w.rref_lease = Seconds(o["rref_lease"].cast<double>());
  w.security = Security(o);
  if (o.contains("shared_memory")) {
    w.shared_memory = o["shared_memory"].cast<bool>();
  }
  // Observing the job (ferry.init's flight_recorder_entries, dump_dir,
  // metrics_listen, trace_file).
  auto text = [&o](const char* key) {
    return o.contains(key) && !o[key].is_none() ? o[key].cast<std::string>()
                                                : std::string();
  };
  w.rendezvous = text("rendezvous");
  w.etcd_ca_file = text("etcd_ca");
  w.etcd_cert_file = text("etcd_cert");
  w.etcd_key_file = text("etcd_key");
  w.etcd_user = text("etcd_user");
  w.etcd_password_file = text("etcd_password_file");
  if (o.contains("flight_recorder_entries")) {
    w.collectives.flight_recorder_entries =
        o["flight_recorder_entries"].cast<int64_t>();
  }
  w.collectives.dump_dir = text("dump_dir");
  w.telemetry.metrics_listen = text("metrics_listen");
  w.telemetry.trace_file = text("trace_file");
  auto h = std::make_unique<WorkerHandle>();
  h->kind = ValueOrRaise(ParseTensorKind(o["tensor_type"].cast<std::string>()));
  h->worker = std::make_unique<Worker>(std::move(w));
  return h;
}

std::unique_ptr<ClientHandle> Connect(const py::dict& o) {
  ClientOptions c;
  c.master = o["master"].cast<std::string>();
  c.description = o["description"].cast<std::string>();
  c.connect_timeout = Seconds(o["connect_timeout"].cast<double>());
  c.default_timeout = Seconds(o["timeout"].cast<double>());
  c.security = Security(o);
  auto h = std::make_unique<ClientHandle>();
  h->kind = ValueOrRaise(ParseTensorKind(o["tensor_type"].cast<std::string>()));
  absl::StatusOr<std::unique_ptr<Client>> client;
  {
    py::gil_scoped_release release;
    client = Client::Connect(std::move(c));
  }
  h->client = ValueOrRaise(std::move(client));
  return h;
}

void BindWorker(py::module_& m) {
  py::class_<WorkerHandle> c(m, "Worker");
  c.def(py::init(&NewWorker), py::arg("options"));
  BindCalls(c, [](WorkerHandle& h) -> Worker& { return *h.worker; });
  c.def(
       "register",
       [](WorkerHandle& h, std::string name, py::handle fn,
          std::string signature, std::string doc, const std::string& kind,
          py::handle invoke) {
         ThrowIfError(h.worker->RegisterAsync(
             std::move(name),
             PythonFunction(PyRef(fn), PyRef(invoke),
                            ValueOrRaise(ParseTensorKind(kind))),
             std::move(signature), {.doc = std::move(doc), .keywords = true}));
       },
       py::arg("name"), py::arg("fn"), py::arg("signature"), py::arg("doc"),
       py::arg("tensor_type"), py::arg("invoke"))
      .def("listen",
           [](WorkerHandle& h) {
             absl::StatusOr<std::string> a;
             {
               py::gil_scoped_release release;
               a = h.worker->Listen();
             }
             return ValueOrRaise(std::move(a));
           })
      .def("start",
           [](WorkerHandle& h) {
             absl::Status s;
             {
               py::gil_scoped_release release;
               s = h.worker->Start();
             }
             ThrowIfError(s);
           })
      .def_property_readonly("rank",
                             [](WorkerHandle& h) { return h.worker->rank(); })
      .def_property_readonly(
          "world_size", [](WorkerHandle& h) { return h.worker->world_size(); })
      .def_property_readonly(
          "address", [](WorkerHandle& h) { return h.worker->address(); })
      .def_property_readonly(
          "master_address",
          [](WorkerHandle& h) { return h.worker->master_address(); })
      .def(
          "wrap",
          [](WorkerHandle& h, py::handle value) {
            ConvertState state;
            Path path{nullptr, "value"};
            Value v = ValueOrRaise(ToValue(value, path, &state));
            absl::StatusOr<RRef> r;
            {
              py::gil_scoped_release release;
              r = h.worker->Wrap(std::move(v));
            }
            return RRefHandle(ValueOrRaise(std::move(r)), state.KindOr(h.kind));
          },
          py::arg("value"))
      .def(
          "world",
          [](WorkerHandle& h) {
            // Not owned: the world lives as long as the worker, which the
            // handle keeps alive (keep_alive below).
            return GroupHandle{std::shared_ptr<ProcessGroup>(
                std::shared_ptr<void>(), &h.worker->world())};
          },
          py::keep_alive<0, 1>())
      .def(
          "new_group",
          [](WorkerHandle& h, std::vector<int> ranks) {
            absl::StatusOr<std::shared_ptr<ProcessGroup>> g;
            {
              py::gil_scoped_release release;
              g = h.worker->NewGroup(std::move(ranks));
            }
            return GroupHandle{ValueOrRaise(std::move(g))};
          },
          py::keep_alive<0, 1>(), py::arg("ranks"))
      .def(
          "instance_group",
          [](WorkerHandle& h, std::vector<int> ranks, uint64_t instance) {
            absl::StatusOr<std::shared_ptr<ProcessGroup>> g;
            {
              py::gil_scoped_release release;
              g = h.worker->InstanceGroup(std::move(ranks), instance);
            }
            return GroupHandle{ValueOrRaise(std::move(g))};
          },
          py::keep_alive<0, 1>(), py::arg("ranks"), py::arg("instance"))
      .def("status",
           [](WorkerHandle& h) {
             WorkerStatus s;
             {
               py::gil_scoped_release release;
               s = h.worker->status();
             }
             return StatusDict(s);
           })
      .def(
          "shutdown",
          [](WorkerHandle& h, std::optional<double> timeout) {
            absl::Status s;
            {
              py::gil_scoped_release release;
              s = h.worker->Shutdown(Timeout(timeout));
            }
            ThrowIfError(s);
          },
          py::arg("timeout"))
      .def(
          "wait_stopped",
          [](WorkerHandle& h, double timeout) {
            py::gil_scoped_release release;
            return h.worker->WaitStopped(absl::Seconds(timeout));
          },
          py::arg("timeout"))
      .def("stop", [](WorkerHandle& h) {
        py::gil_scoped_release release;
        h.worker->Stop();
      });
}

void BindClient(py::module_& m) {
  py::class_<ClientHandle> c(m, "Client");
  c.def_static("connect", &Connect, py::arg("options"));
  BindCalls(c, [](ClientHandle& h) -> Client& { return *h.client; });
  c.def(
       "status",
       [](ClientHandle& h, const std::string& worker,
          std::optional<double> timeout) {
         absl::StatusOr<WorkerStatus> s;
         {
           py::gil_scoped_release release;
           s = h.client->GetStatus(worker, Timeout(timeout));
         }
         return StatusDict(ValueOrRaise(std::move(s)));
       },
       py::arg("worker"), py::arg("timeout"))
      .def(
          "functions",
          [](ClientHandle& h, const std::string& worker,
             std::optional<double> timeout) {
            absl::StatusOr<std::vector<FunctionInfo>> f;
            {
              py::gil_scoped_release release;
              f = h.client->ListFunctions(worker, Timeout(timeout));
            }
            py::list out;
            for (const FunctionInfo& i : ValueOrRaise(std::move(f))) {
              py::dict d;
              d["name"] = i.name;
              d["signature"] = i.signature;
              d["doc"] = i.doc;
              out.append(d);
            }
            return out;
          },
          py::arg("worker"), py::arg("timeout"))
      .def(
          "run_collective",
          [](ClientHandle& h, const std::string& op, py::handle request) {
            ConvertState state;
            Path path{nullptr, "request"};
            Value req = ValueOrRaise(ToValue(request, path, &state));
            absl::StatusOr<Value> r;
            {
              py::gil_scoped_release release;
              r = h.client->RunCollective(op, req);
            }
            return Result(std::move(r), state.KindOr(h.kind));
          },
          py::arg("op"), py::arg("request"))
      .def(
          "shutdown_job",
          [](ClientHandle& h, double timeout) {
            absl::Status s;
            {
              py::gil_scoped_release release;
              s = h.client->ShutdownJob(absl::Seconds(timeout));
            }
            ThrowIfError(s);
          },
          py::arg("timeout"))
      .def("close", [](ClientHandle& h) {
        py::gil_scoped_release release;
        h.client->Close();
      });
}

void BindRRef(py::module_& m) {
  py::class_<RRefHandle>(m, "RRefHandle")
      .def_property_readonly(
          "id", [](RRefHandle& h) { return GlobalIdString(h.ref.id()); })
      .def_property_readonly("owner_name",
                             [](RRefHandle& h) { return h.ref.owner_name(); })
      .def_property_readonly("owner_rank",
                             [](RRefHandle& h) { return h.ref.owner_rank(); })
      .def_property(
          "tensor_type",
          [](RRefHandle& h) {
            return h.kind == TensorKind::kTorch ? "torch" : "numpy";
          },
          [](RRefHandle& h, const std::string& kind) {
            h.kind = ValueOrRaise(ParseTensorKind(kind));
          })
      .def("is_owner",
           [](RRefHandle& h) {
             py::gil_scoped_release release;
             return h.ref.IsOwner();
           })
      .def("confirmed_by_owner",
           [](RRefHandle& h) {
             py::gil_scoped_release release;
             return h.ref.ConfirmedByOwner();
           })
      .def(
          "to_here",
          [](RRefHandle& h, std::optional<double> timeout) {
            absl::StatusOr<Value> v;
            {
              py::gil_scoped_release release;
              v = h.ref.ToHere(Timeout(timeout));
            }
            return Result(std::move(v), h.kind);
          },
          py::arg("timeout"))
      .def(
          "to_here_async",
          [](RRefHandle& h, std::optional<double> timeout, py::handle settle) {
            PyRef callback(settle);
            py::gil_scoped_release release;
            Settle(h.ref.ToHereAsync(Timeout(timeout)), h.kind,
                   std::move(callback));
          },
          py::arg("timeout"), py::arg("settle"))
      .def("local_value",
           [](RRefHandle& h) {
             absl::StatusOr<Value> v;
             {
               py::gil_scoped_release release;
               v = h.ref.LocalValue();
             }
             return Result(std::move(v), h.kind);
           })
      .def(
          "rpc_sync",
          [](RRefHandle& h, const std::string& fn, py::handle args,
             std::optional<double> timeout) {
            ConvertState state;
            std::vector<Value> values = Args(args, &state);
            absl::StatusOr<Value> r;
            {
              py::gil_scoped_release release;
              r = h.ref.RpcSync(fn, std::move(values), Timeout(timeout));
            }
            return Result(std::move(r), state.KindOr(h.kind));
          },
          py::arg("fn"), py::arg("args"), py::arg("timeout"))
      .def(
          "rpc_async",
          [](RRefHandle& h, const std::string& fn, py::handle args,
             std::optional<double> timeout, py::handle settle) {
            ConvertState state;
            std::vector<Value> values = Args(args, &state);
            PyRef callback(settle);
            TensorKind kind = state.KindOr(h.kind);
            py::gil_scoped_release release;
            Settle(h.ref.RpcAsync(fn, std::move(values), Timeout(timeout)),
                   kind, std::move(callback));
          },
          py::arg("fn"), py::arg("args"), py::arg("timeout"), py::arg("settle"))
      .def(
          "remote",
          [](RRefHandle& h, const std::string& fn, py::handle args,
             std::optional<double> timeout) {
            ConvertState state;
            std::vector<Value> values = Args(args, &state);
            absl::StatusOr<RRef> r;
            {
              py::gil_scoped_release release;
              r = h.ref.Remote(fn, std::move(values), Timeout(timeout));
            }
            return RRefHandle(ValueOrRaise(std::move(r)), state.KindOr(h.kind));
          },
          py::arg("fn"), py::arg("args"), py::arg("timeout"));
}

}  // namespace

std::optional<absl::Duration> Timeout(std::optional<double> seconds) {
  if (!seconds.has_value() || *seconds < 0) return std::nullopt;
  return absl::Seconds(*seconds);
}

WorkerHandle::~WorkerHandle() {
  if (worker != nullptr && PyGILState_Check()) {
    py::gil_scoped_release release;
    worker.reset();
  }
}

ClientHandle::~ClientHandle() {
  if (client != nullptr && PyGILState_Check()) {
    py::gil_scoped_release release;
    client.reset();
  }
}

void BindEndpoints(py::module_& m) {
  BindRRef(m);
  BindWorker(m);
  BindClient(m);
  py::class_<GroupHandle>(m, "Group")
      .def_property_readonly("rank",
                             [](GroupHandle& g) { return g.group->rank(); })
      .def_property_readonly("size",
                             [](GroupHandle& g) { return g.group->size(); })
      .def_property_readonly("members",
                             [](GroupHandle& g) { return g.group->members(); })
      .def_property_readonly("name",
                             [](GroupHandle& g) { return g.group->name(); });
}

}  // namespace ferry::python
