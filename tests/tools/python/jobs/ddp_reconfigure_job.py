"""DDP on "ferry" through a death, with torch 2.x's fault-tolerance API:

  kill       4 ranks train; before step KILL_STEP the last rank is
             SIGKILLed; the survivors' backward raises, get_error() says
             REMOTE_ERROR naming that rank, they reconfigure to the 3 of
             them (the handles they exchanged at the start), rank 0 saves
             the model, and they train the remaining steps.
  reference  3 ranks load that model and train the same steps.

Both print "step S rank R loss L" for the steps after the death: the test
compares them. Usage: ddp_reconfigure_job.py MODE STORE_FILE STATE_FILE
(RANK, WORLD_SIZE in the environment)."""
import datetime
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ErrorType
from torch.nn.parallel import DistributedDataParallel as DDP

import ferry.distributed  # noqa: F401 -- registers "ferry"

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
STEPS = 8
KILL_STEP = 3
TIMEOUT = datetime.timedelta(seconds=60)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                               torch.nn.Linear(16, 1))


def batch(step, rank):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(4, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True)


def step(ddp, opt, s):
    x, y = batch(s, dist.get_rank())
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(ddp(x), y)
    loss.backward()
    opt.step()
    print(f"step {s} rank {dist.get_rank()} loss {loss.item():.9g}",
          flush=True)


def train(module, first):
    ddp = DDP(module)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for s in range(first, STEPS):
        step(ddp, opt, s)


def kill(store, state_file):
    dist.init_process_group("ferry", rank=RANK, world_size=WORLD,
                            store=store, timeout=TIMEOUT,
                            enable_reconfigure=True)
    store.set(f"handle/{RANK}", dist._get_reconfigure_handle())
    handles = [store.get(f"handle/{r}").decode() for r in range(WORLD)]
    dist._reconfigure(1, handles).wait()
    backend = dist.get_backend_impl(dist.group.WORLD, torch.device("cpu"))
    module = model()
    ddp = DDP(module)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    for s in range(KILL_STEP):
        step(ddp, opt, s)
    last = WORLD - 1
    if RANK == last:
        os.kill(os.getpid(), signal.SIGKILL)
    try:
        step(ddp, opt, KILL_STEP)
        raise AssertionError("the step with a dead rank succeeded")
    except RuntimeError as e:
        print(f"raised: {e}", flush=True)
    assert backend.get_error() == ErrorType.REMOTE_ERROR, backend.failure()
    assert backend.failure().rank == last, backend.failure()
    print(f"get_error {backend.get_error().name} rank "
          f"{backend.failure().rank}", flush=True)
    # The survivors' parameters are those after step KILL_STEP - 1 (the
    # failed step did not reach opt.step()); a fresh module from them.
    del ddp, opt
    dist._reconfigure(2, handles[:last]).wait()
    assert dist.get_world_size() == WORLD - 1 and dist.get_rank() == RANK
    assert backend.get_error() == ErrorType.SUCCESS
    if RANK == 0:
        torch.save(module.state_dict(), state_file)
    dist.barrier()
    fresh = model()
    fresh.load_state_dict(module.state_dict())
    train(fresh, KILL_STEP)


def reference(store, state_file):
    dist.init_process_group("ferry", rank=RANK, world_size=WORLD,
                            store=store, timeout=TIMEOUT)
    module = model()
    module.load_state_dict(torch.load(state_file))
    train(module, KILL_STEP)


def main():
    mode, store_file, state_file = sys.argv[1:4]
    store = dist.FileStore(store_file, WORLD)
    {"kill": kill, "reference": reference}[mode](store, state_file)
    print(f"{mode} finished", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
