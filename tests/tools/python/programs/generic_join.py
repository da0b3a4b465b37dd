"""pytorch/tutorials' generic_join (Join with DDP, uneven inputs), as a
user runs it on another backend: the tutorial's model and loop with
DDP under torch.distributed.algorithms.Join, divide_by_initial_world_size
False; rank r has 5 + r inputs. Prints every rank's final weights.

    python generic_join.py BACKEND      (RANK, WORLD_SIZE, MASTER_ADDR/PORT)
"""
import sys

import torch
import torch.distributed as dist
from torch.distributed.algorithms.join import Join
from torch.nn.parallel import DistributedDataParallel as DDP

import ferry.distributed  # noqa: F401 -- line 1 of 2

BACKEND = sys.argv[1]


def worker():
    dist.init_process_group(BACKEND)  # line 2 of 2: was "gloo"
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(1, 1))
    num_inputs = 5 + rank
    inputs = [torch.tensor([float(i + rank)]) for i in range(num_inputs)]
    with Join([model], divide_by_initial_world_size=False):
        for x in inputs:
            loss = model(x).sum()
            loss.backward()
    weight = [p.grad.tolist() for p in model.parameters()]
    print(f"rank {rank} grads {weight}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    worker()
