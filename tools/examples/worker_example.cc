#include <ferry/ferry.h>

#include <cstdlib>
#include <iostream>
#include <vector>

// One worker of a job: worker_example RANK WORLD_SIZE HOST:PORT, once per
// rank (rank 0 listens on HOST:PORT; the others join it there).
int main(int argc, char** argv) {
  if (argc != 4) return std::cerr << "usage: RANK WORLD_SIZE HOST:PORT\n", 2;
  ferry::Worker worker({.rank = std::atoi(argv[1]),
                        .world_size = std::atoi(argv[2]),
                        .master = argv[3]});
  // scale(t, k): callable by name from every worker, client and ferryctl.
  absl::Status registered = worker.Register(
      "scale",
      [](const ferry::Tensor& t, double k) -> absl::StatusOr<ferry::Tensor> {
        if (t.dtype() != ferry::DType::kFloat32) {
          return absl::InvalidArgumentError("scale: t must be float32");
        }
        std::vector<float> v = t.ToVector<float>();
        for (float& x : v) x *= k;
        return ferry::Tensor::FromVector(v);
      });
  if (!registered.ok()) return std::cerr << registered << "\n", 1;
  absl::Status started = worker.Start();  // Returns once every rank joined.
  if (!started.ok()) return std::cerr << started << "\n", 1;
  if (worker.rank() == 0) {
    // scale(tensor([1., 2.]), 3) on worker1: {"dtype":"float32","data":[3,6]}
    auto x = ferry::Tensor::FromVector<float>({1, 2});
    auto scaled = worker.RpcSync("worker1", "scale", {x, 3});
    std::cout << ferry::ToJson(scaled.value()) << "\n";
  }
  // Every rank gives rank + 1; each gets the sum (with 2: [3]).
  auto mine = ferry::Tensor::FromVector<float>({worker.rank() + 1.0f});
  auto sum = ferry::AllReduce(worker.world(), mine);
  std::cout << ferry::ToJson(sum.value()) << "\n";
  return worker.Shutdown().ok() ? 0 : 1;  // Collective: waits for the others.
}
