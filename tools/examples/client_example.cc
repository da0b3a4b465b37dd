#include <ferry/ferry.h>

#include <iostream>

int main(int argc, char** argv) {
  std::string master = argc > 1 ? argv[1] : "127.0.0.1:29500";
  auto client = ferry::Client::Connect({.master = master});
  if (!client.ok()) return std::cerr << client.status() << "\n", 1;
  // add(tensor([1., 2.]), 3) on worker1: {"dtype":"float32","data":[4,5]}
  auto x = ferry::Tensor::FromVector<float>({1, 2});
  auto sum = (*client)->RpcSync("worker1", "add", {x, 3});
  std::cout << ferry::ToJson(sum.value()) << "\n";
  // worker2 keeps arange(5) as an RRef owned there; fetch it here.
  auto rref = (*client)->Remote("worker2", "arange", {5});
  std::cout << ferry::ToJson(rref->ToHere().value()) << "\n";
}
