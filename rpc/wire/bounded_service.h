// Services whose every request is parsed through BoundedParse
// (rpc/wire/bounded_parse.h): the one place where a worker's gRPC requests
// become generated messages.
//
// gRPC's generated callback services parse a request with protobuf before
// any handler runs, so nothing could be bounded there (and a failed parse
// is answered UNIMPLEMENTED, with no reason). A BoundedService instead
// takes each method's request as raw bytes, walks them with the
// limit-checked BoundedParse, and only then hands the handler the parsed
// request — the same handler signature as a generated callback method. A
// request over a limit is answered with BoundedParse's error (e.g.
// RESOURCE_EXHAUSTED "worker0: RRefs/RenewLease: forks: more than 1048576
// items in one message, … (--max_items=1048576)") before anything is
// built.
//
//   class RRefService final
//       : public BoundedService<proto::RRefs::CallbackService> {
//    public:
//     RRefService(...)
//         : BoundedService(ServiceOf<proto::ForkRequest>("RRefs"), limits,
//                          "worker0") {
//       Bound(&RRefService::AddFork, "AddFork");
//       …  // every method
//     }
//     grpc::ServerUnaryReactor* AddFork(grpc::CallbackServerContext*,
//                                       const proto::ForkRequest*,
//                                       proto::ForkResponse*) override;
//   };
//
// A method that takes raw bytes and reads them with limit-checked code of
// its own (Worker/Call: rpc/wire/wire_reader.h) is declared with ReadsRaw. The
// agent registers only BoundedServiceBase services and refuses to start
// with any method neither bound nor declared (UnboundedMethods).
#ifndef FERRY_RPC_WIRE_BOUNDED_SERVICE_H_
#define FERRY_RPC_WIRE_BOUNDED_SERVICE_H_

#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"
#include "grpcpp/impl/serialization_traits.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "rpc/base/limits.h"
#include "rpc/wire/bounded_parse.h"
#include "rpc/wire/grpc_status.h"

namespace ferry {

// What the agent registers: a gRPC service, and which of its methods parse
// requests without bounds (none, for a worker to start).
class BoundedServiceBase {
 public:
  virtual ~BoundedServiceBase() = default;
  virtual grpc::Service* grpc_service() = 0;
  // "Service/Method" of every method neither Bound nor ReadsRaw.
  virtual std::vector<std::string> UnboundedMethods() const = 0;
};

// Service `name` of the .proto file that defines `Message` (naming one of
// its messages links the file's descriptors in). Aborts if absent: a
// programming error, met at startup.
const google::protobuf::ServiceDescriptor* ServiceIn(
    const google::protobuf::FileDescriptor* file, absl::string_view name);
template <class Message>
const google::protobuf::ServiceDescriptor* ServiceOf(absl::string_view name) {
  return ServiceIn(Message::descriptor()->file(), name);
}

namespace bounded_internal {

// One call's parsed request and its response: gRPC's message holder keeps
// it for the call's life (the handler may use both until it finishes),
// and sends the response.
template <class Request, class Response>
struct Exchange {
  Request request;
  Response response;
};

// The index of `method` of `service`; aborts the process if absent or not
// `Request` → `Response` (a programming error, met at startup).
int MethodIndex(const google::protobuf::ServiceDescriptor& service,
                absl::string_view method,
                const google::protobuf::Descriptor* request,
                const google::protobuf::Descriptor* response);
// The index of `method` (aborts if absent).
int RawMethodIndex(const google::protobuf::ServiceDescriptor& service,
                   absl::string_view method);
// "Service/Method" of the methods not `covered`, by index.
std::vector<std::string> Uncovered(
    const google::protobuf::ServiceDescriptor& service,
    const std::vector<bool>& covered);

}  // namespace bounded_internal

template <class GeneratedService>
class BoundedService : public GeneratedService, public BoundedServiceBase {
 public:
  grpc::Service* grpc_service() override { return this; }

  std::vector<std::string> UnboundedMethods() const override {
    return bounded_internal::Uncovered(*service_, covered_);
  }

 protected:
  // `service`: the generated service's descriptor (ServiceOf); `who`
  // prefixes errors ("worker0").
  BoundedService(const google::protobuf::ServiceDescriptor* service,
                 const Limits& limits, std::string who)
      : service_(service),
        limits_(limits),
        who_(std::move(who)),
        covered_(service->method_count(), false) {}

  // Serves method `name` with `handler` (a member of Derived with a
  // generated callback method's signature), its request parsed through
  // BoundedParse first; a refusal answers the call. The request's bytes
  // are dropped once parsed: a call the handler holds keeps only the
  // parsed request. A handler taking a non-const Request may take its
  // contents too (a held call then keeps none of it).
  template <class Derived, class Request, class Response>
  void Bound(grpc::ServerUnaryReactor* (Derived::*handler)(
                 grpc::CallbackServerContext*, Request*, Response*),
             absl::string_view name) {
    using Message = std::remove_const_t<Request>;
    const int index = bounded_internal::MethodIndex(
        *service_, name, Message::descriptor(), Response::descriptor());
    covered_[index] = true;
    using Messages = bounded_internal::Exchange<Message, Response>;
    Derived* self = static_cast<Derived*>(this);
    const std::string what = absl::StrCat(who_, who_.empty() ? "" : ": ",
                                          service_->name(), "/", name);
    grpc::Service::MarkMethodRawCallback(
        index,
        new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, Messages>(
            [self, handler, what, this](grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        Messages* call) {
              absl::Status parsed =
                  BoundedParse(*request, limits_, what, &call->request);
              // gRPC keeps the bytes (its message holder's) until the call
              // ends; nothing reads them again.
              const_cast<grpc::ByteBuffer*>(request)->Clear();
              if (!parsed.ok()) {
                grpc::ServerUnaryReactor* refused = context->DefaultReactor();
                refused->Finish(ToGrpcStatus(parsed));
                return refused;
              }
              return (self->*handler)(context, &call->request, &call->response);
            }));
  }

  // Method `name` takes raw bytes and reads them with limit-checked code
  // of its own.
  void ReadsRaw(absl::string_view name) {
    covered_[bounded_internal::RawMethodIndex(*service_, name)] = true;
  }

 private:
  const google::protobuf::ServiceDescriptor* const service_;
  const Limits limits_;
  const std::string who_;
  std::vector<bool> covered_;
};

}  // namespace ferry

namespace grpc {

// A bounded call's response goes out as its generated message does.
template <class Request, class Response>
class SerializationTraits<ferry::bounded_internal::Exchange<Request, Response>,
                          void> {
 public:
  static Status Serialize(
      const ferry::bounded_internal::Exchange<Request, Response>& call,
      ByteBuffer* bytes, bool* own_buffer) {
    return SerializationTraits<Response>::Serialize(call.response, bytes,
                                                    own_buffer);
  }
  // Never received: requests arrive as bytes.
  static Status Deserialize(
      ByteBuffer*, ferry::bounded_internal::Exchange<Request, Response>*) {
    return Status(StatusCode::INTERNAL, "a bounded call's reply is not read");
  }
};

}  // namespace grpc

#endif  // FERRY_RPC_WIRE_BOUNDED_SERVICE_H_
