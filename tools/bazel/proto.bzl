"""C++ (and gRPC) code generation from .proto files with Debian's protoc.

Bazel 4.2.3's own proto rules would fetch protobuf's sources; offline we run
the system `protoc` and `grpc_cpp_plugin` from a genrule instead.
"""

def ferry_cc_proto_library(name, srcs, proto_deps = [], deps = [], grpc = False, visibility = None):
    """Generates and compiles C++ for `srcs`.

    Args:
      name: the cc_library's name.
      srcs: .proto files of this package.
      proto_deps: .proto files (labels) that `srcs` import.
      deps: cc_library targets generated from `proto_deps`.
      grpc: also generate gRPC service stubs.
      visibility: passed to the cc_library.
    """
    bases = [s[:-len(".proto")] for s in srcs]
    hdrs = [b + ".pb.h" for b in bases]
    ccs = [b + ".pb.cc" for b in bases]
    plugin_flags = ""
    if grpc:
        hdrs += [b + ".grpc.pb.h" for b in bases]
        ccs += [b + ".grpc.pb.cc" for b in bases]
        plugin_flags = "--grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin "
    native.genrule(
        name = name + "_gen",
        srcs = srcs + proto_deps,
        outs = hdrs + ccs,
        cmd = "/usr/bin/protoc -I. --cpp_out=$(GENDIR) " + plugin_flags +
              " ".join(["$(location %s)" % s for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = ccs,
        hdrs = hdrs,
        deps = deps + (["@system//:grpc"] if grpc else ["@system//:protobuf"]),
        visibility = visibility,
    )
