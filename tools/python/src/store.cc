#include "tools/python/src/store.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pybind11/stl.h"
#include "rpc/auth/security.h"
#include "rpc/membership/rendezvous_url.h"
#include "rpc/membership/store_client.h"
#include "tools/python/src/errors.h"
#include "tools/runtime/job_dir.h"

namespace ferry::python {

namespace {

namespace py = ::pybind11;

struct StoreHandle {
  std::unique_ptr<KeyValueStore> store;
};

std::string Get(const py::dict& o, const char* key) {
  return o.contains(key) && !o[key].is_none() ? o[key].cast<std::string>()
                                              : std::string();
}

StoreClientOptions ClientOptions(const py::dict& o) {
  StoreClientOptions options;
  if (o.contains("timeout") && !o["timeout"].is_none()) {
    options.call_timeout = absl::Seconds(o["timeout"].cast<double>());
  }
  return options;
}

// The job at `master`, reached with the token and TLS files in `o` (the
// token of a job this user's ferryctl started there, without one).
StoreHandle ConnectMaster(const std::string& master, const py::dict& o) {
  SecurityOptions s;
  s.token_file = Get(o, "token_file");
  if (s.token_file.empty()) {
    if (std::optional<std::string> dir = jobs::FindJob(master)) {
      s.token_file = *dir + "/token";
    }
  }
  s.tls_cert_file = Get(o, "tls_cert");
  s.tls_key_file = Get(o, "tls_key");
  s.tls_ca_file = Get(o, "tls_ca");
  s.tls_server_name = Get(o, "tls_server_name");
  std::shared_ptr<const Security> security =
      s.token_file.empty() && s.tls_ca_file.empty()
          ? Security::Insecure()
          : ValueOrRaise(Security::Load(s));
  StoreHandle h;
  h.store = ValueOrRaise(
      ConnectMasterStore(master, std::move(security), ClientOptions(o)));
  return h;
}

// The store of etcd job `url` ("etcd://HOST:PORT[,…]/JOB").
StoreHandle ConnectEtcd(const std::string& url, const py::dict& o) {
  EtcdRendezvous r = ValueOrRaise(ParseRendezvousUrl(url));
  EtcdOptions etcd;
  etcd.endpoints = r.endpoints;
  etcd.tls_ca_file = Get(o, "etcd_ca");
  etcd.tls_cert_file = Get(o, "etcd_cert");
  etcd.tls_key_file = Get(o, "etcd_key");
  etcd.user = Get(o, "etcd_user");
  etcd.password = Get(o, "etcd_password");
  StoreHandle h;
  py::gil_scoped_release release;
  absl::StatusOr<std::unique_ptr<KeyValueStore>> store =
      ConnectEtcdStore(std::move(etcd), r.job, ClientOptions(o));
  py::gil_scoped_acquire gil;
  h.store = ValueOrRaise(std::move(store));
  return h;
}

// Runs `fn` on the store with the GIL released; its value or an error.
template <typename F>
auto Released(StoreHandle& h, F fn) {
  decltype(fn(*h.store)) r = absl::UnknownError("not run");
  {
    py::gil_scoped_release release;
    r = fn(*h.store);
  }
  return r;
}

absl::Duration Wait(double seconds) {
  return seconds < 0 ? absl::InfiniteDuration() : absl::Seconds(seconds);
}

}  // namespace

void BindStore(py::module_& m) {
  py::class_<StoreHandle>(m, "Store", "A job's key-value store.")
      .def_static("connect_master", &ConnectMaster, py::arg("master"),
                  py::arg("options"))
      .def_static("connect_etcd", &ConnectEtcd, py::arg("url"),
                  py::arg("options"))
      .def("set",
           [](StoreHandle& h, const std::string& key, py::bytes value) {
             std::string v = value;
             ThrowIfError(
                 Released(h, [&](KeyValueStore& s) { return s.Set(key, v); }));
           })
      .def("get",
           [](StoreHandle& h, const std::string& key, double wait) {
             return py::bytes(ValueOrRaise(Released(
                 h, [&](KeyValueStore& s) { return s.Get(key, Wait(wait)); })));
           })
      .def("add",
           [](StoreHandle& h, const std::string& key, int64_t amount) {
             return ValueOrRaise(Released(
                 h, [&](KeyValueStore& s) { return s.Add(key, amount); }));
           })
      .def("compare_set",
           [](StoreHandle& h, const std::string& key, py::bytes expected,
              py::bytes desired) {
             std::string e = expected, d = desired;
             return py::bytes(ValueOrRaise(Released(h, [&](KeyValueStore& s) {
               return s.CompareSet(key, e, d);
             })));
           })
      .def("delete",
           [](StoreHandle& h, const std::string& key) {
             return ValueOrRaise(
                 Released(h, [&](KeyValueStore& s) { return s.Delete(key); }));
           })
      .def("wait",
           [](StoreHandle& h, std::vector<std::string> keys, double wait) {
             ThrowIfError(Released(h, [&](KeyValueStore& s) {
               return s.Wait(keys, Wait(wait));
             }));
           })
      .def("check",
           [](StoreHandle& h, std::vector<std::string> keys) {
             return ValueOrRaise(
                 Released(h, [&](KeyValueStore& s) { return s.Check(keys); }));
           })
      .def("num_keys", [](StoreHandle& h) {
        return ValueOrRaise(
            Released(h, [&](KeyValueStore& s) { return s.NumKeys(); }));
      });
}

}  // namespace ferry::python
