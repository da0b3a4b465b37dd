"""all_gather over a tcp:// init method, as torch's docs show it: each
rank contributes its rank + 1 as a 2-element tensor and prints the list.

    python tcp_all_gather.py BACKEND    (RANK, WORLD_SIZE, MASTER_PORT set)
"""
import os
import sys

import torch
import torch.distributed as dist

import ferry.distributed  # noqa: F401 -- line 1 of 2

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group(sys.argv[1],  # line 2 of 2: the backend
                        init_method=f"tcp://127.0.0.1:{os.environ['MASTER_PORT']}",
                        rank=rank, world_size=world)
tensor_list = [torch.zeros(2, dtype=torch.int64) for _ in range(world)]
tensor = torch.arange(2, dtype=torch.int64) + 1 + 2 * rank
dist.all_gather(tensor_list, tensor)
print(f"rank {rank}: {[t.tolist() for t in tensor_list]}")
dist.destroy_process_group()
