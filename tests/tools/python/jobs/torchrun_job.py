"""A worker of torchrun_test: torchrun (--rdzv-backend=ferry-etcd) starts
it. It joins the default group over env:// (ferry's, on etcd), prints who
it is, then all_reduces: 3 steps and exits once the world has
FINISH_AT_WORLD ranks after FINISH_AFTER_RESTART restarts or more; until
then, forever (the test kills a node, or a node joins)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

import ferry.distributed  # noqa: F401 -- the backend, and env:// on etcd


def main():
    node = os.environ["NODE"]
    finish_world = int(os.environ["FINISH_AT_WORLD"])
    finish_restart = int(os.environ["FINISH_AFTER_RESTART"])
    restart = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("ferry", timeout=datetime.timedelta(seconds=30))
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"node {node}: rank {rank} of {world}, restart {restart}, round "
          f"{os.environ['FERRY_TORCHRUN_ROUND']}", flush=True)
    finish = world == finish_world and restart >= finish_restart
    step = 0
    while True:
        t = torch.ones(1)
        dist.all_reduce(t)
        assert t.item() == world, (t, world)
        print(f"node {node}: rank {rank} of {world}: step {step}", flush=True)
        step += 1
        if finish and step >= 3:
            break
        time.sleep(0.2)
    dist.destroy_process_group()
    print(f"node {node}: done in a world of {world}", flush=True)


if __name__ == "__main__":
    main()
