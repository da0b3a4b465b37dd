"""DistributedDataParallel on ferry: an unmodified torch training loop,
switched to ferry with two lines (the import and backend="ferry").

    tools/dev python -m torch.distributed.run --nproc_per_node=2 \\
        --redirects=2 --tee=2 \\
        tools/python/examples/ddp.py --backend=ferry --steps=20

A small MLP trained for --steps steps from one seed; each rank draws its
own batches. With --out, rank 0 saves the final parameters there (the same
run on gloo ends with the same parameters, to float tolerance).
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ferry.distributed  # noqa: F401 -- line 1 of 2: registers "ferry"

p = argparse.ArgumentParser()
p.add_argument("--backend", default="ferry")
p.add_argument("--steps", type=int, default=20)
p.add_argument("--out")
args = p.parse_args()

dist.init_process_group(backend=args.backend)  # line 2 of 2: was "gloo"
rank, world = dist.get_rank(), dist.get_world_size()

torch.manual_seed(0)  # The same initial model everywhere.
model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64),
                          nn.ReLU(), nn.Linear(64, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
data = torch.Generator().manual_seed(1000 + rank)  # This rank's batches.
for step in range(args.steps):
    x = torch.randn(16, 32, generator=data)
    y = torch.randint(0, 4, (16,), generator=data)
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()  # Gradients averaged over the ranks by DDP.
    opt.step()
    if rank == 0 and step % 5 == 0:
        print(f"step {step}: loss {loss.item():.4f}")

if rank == 0 and args.out:
    torch.save({k: v.detach().clone() for k, v in
                model.module.state_dict().items()}, args.out)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: done on {args.backend}")
