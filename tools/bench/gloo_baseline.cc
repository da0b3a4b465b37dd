#include "tools/bench/gloo_baseline.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/alltoall.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/hash_store.h"
#include "gloo/transport/tcp/device.h"

namespace ferry {
namespace bench {

namespace {

constexpr std::chrono::milliseconds kTimeout(60000);

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Runs `fn`, turning Gloo's exceptions into a status.
absl::Status Guarded(const std::function<void()>& fn) {
  try {
    fn();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("gloo: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooGroup>> GlooGroup::Connect(int world) {
  std::unique_ptr<GlooGroup> group(new GlooGroup());
  gloo::rendezvous::HashStore store;
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  std::shared_ptr<gloo::transport::Device> device;
  absl::Status made =
      Guarded([&] { device = gloo::transport::tcp::CreateDevice(attr); });
  if (!made.ok()) return made;
  group->contexts_.resize(world);
  std::vector<absl::Status> connected(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      connected[r] = Guarded([&] {
        auto context = std::make_shared<gloo::rendezvous::Context>(r, world);
        context->setTimeout(kTimeout);
        context->connectFullMesh(store, device);
        group->contexts_[r] = std::move(context);
      });
    });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : connected) {
    if (!s.ok()) return s;
  }
  return group;
}

GlooGroup::~GlooGroup() = default;

absl::StatusOr<std::function<absl::Status()>> GlooGroup::Op(
    const std::string& op, int64_t bytes, int rank) {
  std::shared_ptr<gloo::rendezvous::Context> context = contexts_[rank];
  const int n = size();
  if (op == "all_reduce") {
    auto data = std::make_shared<std::vector<float>>(
        std::max<int64_t>(bytes / 4, 1), 1.0f);
    return std::function<absl::Status()>([context, data] {
      return Guarded([&] {
        gloo::AllreduceOptions o(context);
        o.setOutput(data->data(), data->size());
        o.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
        gloo::allreduce(o);
      });
    });
  }
  if (op == "reduce_scatter") {
    // Gloo's reduce-scatter reduces one buffer in place; rank r's part is
    // its r-th chunk (halving-doubling; worlds 2 and 4 are powers of two).
    const int64_t chunk = std::max<int64_t>(bytes / 4 / n, 1);
    auto data = std::make_shared<std::vector<float>>(chunk * n, 1.0f);
    auto algorithm =
        std::make_shared<gloo::ReduceScatterHalvingDoubling<float>>(
            context, std::vector<float*>{data->data()},
            static_cast<int>(chunk * n),
            std::vector<int>(n, static_cast<int>(chunk)));
    return std::function<absl::Status()>(
        [data, algorithm] { return Guarded([&] { algorithm->run(); }); });
  }
  if (op == "all_gather") {
    auto in = std::make_shared<std::vector<uint8_t>>(bytes, 1);
    auto out = std::make_shared<std::vector<uint8_t>>(bytes * n);
    return std::function<absl::Status()>([context, in, out] {
      return Guarded([&] {
        gloo::AllgatherOptions o(context);
        o.setInput(in->data(), in->size());
        o.setOutput(out->data(), out->size());
        gloo::allgather(o);
      });
    });
  }
  if (op == "all_to_all_single") {
    auto in = std::make_shared<std::vector<uint8_t>>(bytes, 1);
    auto out = std::make_shared<std::vector<uint8_t>>(bytes);
    return std::function<absl::Status()>([context, in, out] {
      return Guarded([&] {
        gloo::AlltoallOptions o(context);
        o.setInput(in->data(), in->size());
        o.setOutput(out->data(), out->size());
        gloo::alltoall(o);
      });
    });
  }
  if (op == "broadcast") {
    auto data = std::make_shared<std::vector<uint8_t>>(bytes, 1);
    return std::function<absl::Status()>([context, data] {
      return Guarded([&] {
        gloo::BroadcastOptions o(context);
        o.setOutput(data->data(), data->size());
        o.setRoot(0);
        gloo::broadcast(o);
      });
    });
  }
  return absl::InvalidArgumentError(absl::StrCat("gloo baseline: no op ", op));
}

}  // namespace bench
}  // namespace ferry
