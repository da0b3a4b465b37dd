"""pytorch/examples' distributed pipeline parallelism
(distributed/rpc/pipeline/main.py) on ferry.rpc, on CPU.

    tools/dev python -m ferry.launch -n 3 tools/python/examples/rpc_pipeline.py

The model is split in two shards, each an object on its own worker
(rpc.remote(worker, Shard, ...)); the master splits every batch into
micro-batches and pipelines them: shard 1's output stays on worker1 as an
RRef (p1_rref.remote().forward(x_rref)), which shard 2 fetches from there
(p2_rref.rpc_async().forward(y_rref)), so micro-batches overlap.

Changed from the original, beyond `import ferry.rpc as rpc` (README,
"torch.distributed.rpc"):
- the forward pass only: the original trains with distributed autograd
  and DistributedOptimizer, which ferry.rpc does not have;
- two small convolutional shards instead of ResNet50's (torchvision's
  blocks), on the CPU ("cpu" where the original says "cuda:0"/"cuda:1"),
  seeded so the master can check the result against the same shards run
  locally;
- the processes come from ferry.launch (RANK, WORLD_SIZE, MASTER_ADDR,
  MASTER_PORT) instead of mp.spawn with a fixed port, once: the master
  runs each micro-batch size in turn, where the original starts the
  processes again for each.
"""
import os
import threading

import torch
import torch.nn as nn

import ferry.rpc as rpc
from ferry.rpc import RRef

num_classes = 10
batch_size, image_w, image_h = 12, 32, 32
num_batches = 2


class ShardBase(nn.Module):
    def __init__(self, device, seed):
        super(ShardBase, self).__init__()
        torch.manual_seed(seed)
        self.device = device
        self._lock = threading.Lock()

    def parameter_rrefs(self):
        return [RRef(p.detach()) for p in self.parameters()]


class Shard1(ShardBase):
    """The first part of the model."""

    def __init__(self, device, seed=1):
        super(Shard1, self).__init__(device, seed)
        self.seq = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, kernel_size=3, stride=2, padding=1),
            nn.ReLU(inplace=True),
        ).to(self.device).eval()

    def forward(self, x_rref):
        x = x_rref.to_here().to(self.device)
        with self._lock:
            out = self.seq(x)
        return out.cpu()


class Shard2(ShardBase):
    """The second part of the model."""

    def __init__(self, device, seed=2):
        super(Shard2, self).__init__(device, seed)
        self.seq = nn.Sequential(
            nn.Conv2d(32, 64, kernel_size=3, stride=2, padding=1),
            nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((1, 1)),
        ).to(self.device).eval()
        self.fc = nn.Linear(64, num_classes).to(self.device)

    def forward(self, x_rref):
        x = x_rref.to_here().to(self.device)
        with self._lock:
            out = self.fc(torch.flatten(self.seq(x), 1))
        return out.cpu()


class DistModel(nn.Module):
    """Assemble two parts as an nn.Module and define pipelining logic"""

    def __init__(self, split_size, workers, *args, **kwargs):
        super(DistModel, self).__init__()

        self.split_size = split_size

        # Put the first part of the model on workers[0]
        self.p1_rref = rpc.remote(
            workers[0],
            Shard1,
            args=("cpu",) + args,
            kwargs=kwargs
        )

        # Put the second part of the model on workers[1]
        self.p2_rref = rpc.remote(
            workers[1],
            Shard2,
            args=("cpu",) + args,
            kwargs=kwargs
        )

    def forward(self, xs):
        # Split the input batch xs into micro-batches, and collect async RPC
        # futures into a list
        out_futures = []
        for x in iter(xs.split(self.split_size, dim=0)):
            x_rref = RRef(x)
            y_rref = self.p1_rref.remote().forward(x_rref)
            z_fut = self.p2_rref.rpc_async().forward(y_rref)
            out_futures.append(z_fut)

        # collect and cat all output tensors into one tensor.
        return torch.cat(torch.futures.wait_all(out_futures))

    def parameter_rrefs(self):
        remote_params = []
        remote_params.extend(self.p1_rref.remote().parameter_rrefs().to_here())
        remote_params.extend(self.p2_rref.remote().parameter_rrefs().to_here())
        return remote_params


def run_master(num_splits):
    for num_split in num_splits:
        run_split(batch_size // num_split)


def run_split(split_size):
    # put the two model parts on worker1 and worker2 respectively
    model = DistModel(split_size, ["worker1", "worker2"])
    # Not the original's: the same shards, here, to check against.
    local1, local2 = Shard1("cpu"), Shard2("cpu")
    for i in range(num_batches):
        print(f"Processing batch {i}")
        # generate random inputs
        inputs = torch.randn(batch_size, 3, image_w, image_h)
        with torch.no_grad():
            outputs = model(inputs)
            expected = local2.fc(torch.flatten(
                local2.seq(local1.seq(inputs)), 1))
        assert outputs.shape == (batch_size, num_classes)
        assert torch.allclose(outputs, expected, atol=1e-5)
    params = model.parameter_rrefs()
    assert len(params) == len(list(local1.parameters())) + len(
        list(local2.parameters()))
    print(f"pipelined {num_batches} batches in micro-batches of "
          f"{split_size}: the same as the shards run locally")


def run_worker(rank, world_size, num_split):
    options = rpc.TensorPipeRpcBackendOptions(num_worker_threads=256,
                                              rpc_timeout=300)

    if rank == 0:
        rpc.init_rpc(
            "master",
            rank=rank,
            world_size=world_size,
            rpc_backend_options=options
        )
        run_master(num_split)
    else:
        rpc.init_rpc(
            f"worker{rank}",
            rank=rank,
            world_size=world_size,
            rpc_backend_options=options
        )
        pass

    # block until all rpcs finish
    rpc.shutdown()


if __name__ == "__main__":
    world_size = int(os.environ["WORLD_SIZE"])
    assert world_size == 3, "run with 3 workers"
    run_worker(int(os.environ["RANK"]), world_size, [1, 2, 4])
