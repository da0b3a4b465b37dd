#include "rpc/wire/bounded_service.h"

#include <cstdio>
#include <cstdlib>

namespace ferry {

namespace {

// A service's wiring does not match its .proto: a programming error.
[[noreturn]] void Miswired(absl::string_view service, absl::string_view method,
                           absl::string_view why) {
  std::fprintf(stderr, "BoundedService %.*s/%.*s: %.*s\n",
               static_cast<int>(service.size()), service.data(),
               static_cast<int>(method.size()), method.data(),
               static_cast<int>(why.size()), why.data());
  std::abort();
}

}  // namespace

const google::protobuf::ServiceDescriptor* ServiceIn(
    const google::protobuf::FileDescriptor* file, absl::string_view name) {
  const google::protobuf::ServiceDescriptor* s =
      file->FindServiceByName(std::string(name));
  if (s == nullptr) Miswired(name, "", "no such service in its file");
  return s;
}

namespace bounded_internal {

int MethodIndex(const google::protobuf::ServiceDescriptor& service,
                absl::string_view method,
                const google::protobuf::Descriptor* request,
                const google::protobuf::Descriptor* response) {
  const int index = RawMethodIndex(service, method);
  const google::protobuf::MethodDescriptor* m = service.method(index);
  if (m->input_type() != request || m->output_type() != response) {
    Miswired(service.name(), method,
             "the handler's types are not the method's");
  }
  if (m->client_streaming() || m->server_streaming()) {
    Miswired(service.name(), method, "a streaming method");
  }
  return index;
}

int RawMethodIndex(const google::protobuf::ServiceDescriptor& service,
                   absl::string_view method) {
  const google::protobuf::MethodDescriptor* m =
      service.FindMethodByName(std::string(method));
  if (m == nullptr) Miswired(service.name(), method, "no such method");
  return m->index();
}

std::vector<std::string> Uncovered(
    const google::protobuf::ServiceDescriptor& service,
    const std::vector<bool>& covered) {
  std::vector<std::string> out;
  for (int i = 0; i < service.method_count(); ++i) {
    if (!covered[i]) {
      out.push_back(
          absl::StrCat(service.name(), "/", service.method(i)->name()));
    }
  }
  return out;
}

}  // namespace bounded_internal
}  // namespace ferry
