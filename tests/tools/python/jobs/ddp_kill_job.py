"""One rank of a DDP job in which the last rank is killed (SIGKILL) during
a training step (started by torch_failure_test.py; RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT set).

    ddp_kill_job.py BACKEND TIMEOUT_SECONDS

Every step: forward, backward (DDP all-reduces the gradients), step. At
step 3 the last rank kills itself after its forward, so the others are
inside the backward's all_reduce when it dies. Each survivor prints one
line: "raised after S s: MESSAGE" or "finished" (it should not). A
survivor that raised then holds its process (and so its worker) until its
stdin closes: the test closes it once every survivor printed, so the killed
rank is the only death each survivor can see. (Exiting at once, one
survivor's exit was a second death the other could see first.)
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ferry.distributed  # noqa: F401 -- registers "ferry"

backend, seconds = sys.argv[1], float(sys.argv[2])
dist.init_process_group(backend,
                        timeout=datetime.timedelta(seconds=seconds))
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 8)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    x = torch.randn(32, 64)
    loss = model(x).square().mean()
    if step == 3 and rank == world - 1:
        print("killing myself mid-step", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        opt.zero_grad()
        loss.backward()
        opt.step()
    except RuntimeError as e:
        took = time.monotonic() - start
        print(f"raised after {took:.1f} s: {e}".replace("\n", " "),
              flush=True)
        sys.stdin.read()  # Until the test lets go.
        os._exit(3)  # Nothing more to do with the job.
print("finished", flush=True)
