"""A replica of torchft_test: data-parallel training under torchft's
Manager, on ferry
(ferry.torchft.ProcessGroupFerry) or on gloo (torchft's
ProcessGroupGloo), one rank per replica group.

    torchft_job.py BACKEND REPLICA REPLICAS READY_DIR LIGHTHOUSE STEPS [DIE_AT]

Trains once all REPLICAS replicas' managers are up (a file each in
READY_DIR), so the first quorum has them all: until the manager's committed step reaches STEPS, printing each
step; with DIE_AT, SIGKILLs itself in that step, after the quorum and the
forward pass, before the backward pass's all_reduce."""
import datetime
import os
import signal
import socket
import sys
import time

import torch
from torch import nn, optim
from torch.distributed import TCPStore
from torchft.manager import Manager
from torchft.optim import OptimizerWrapper
from torchft.process_group import ProcessGroupGloo

from ferry.torchft import ProcessGroupFerry


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    backend, replica, replicas = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ready, lighthouse, steps = sys.argv[4], sys.argv[5], int(sys.argv[6])
    die_at = int(sys.argv[7]) if len(sys.argv) > 7 else -1
    timeout = datetime.timedelta(seconds=15)
    # The replica group's own store (torchft's design: its rank 0 serves it).
    port = free_port()
    store = TCPStore("127.0.0.1", port, is_master=True,  # noqa: F841
                     wait_for_workers=False)
    pg = (ProcessGroupFerry(timeout=timeout) if backend == "ferry"
          else ProcessGroupGloo(timeout=timeout))
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    optimizer = optim.SGD(model.parameters(), lr=0.05)

    def state_dict():
        return {"model": model.state_dict(), "optim": optimizer.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        optimizer.load_state_dict(sd["optim"])

    manager = Manager(
        pg=pg, min_replica_size=1, load_state_dict=load_state_dict,
        state_dict=state_dict, replica_id=f"replica{replica}",
        store_addr="127.0.0.1", store_port=port, rank=0, world_size=1,
        lighthouse_addr=lighthouse, timeout=timeout,
        quorum_timeout=datetime.timedelta(seconds=60),
        connect_timeout=timeout)
    # Every replica's manager heartbeats to the lighthouse before the first
    # quorum is asked for, so that quorum waits for them all.
    open(os.path.join(ready, str(replica)), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(ready)) < replicas:
        assert time.monotonic() < deadline, "the other replicas never came"
        time.sleep(0.05)
    opt = OptimizerWrapper(manager, optimizer)
    data = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    target = data.sum(dim=1, keepdim=True)
    failed = 0
    while manager.current_step() < steps:
        step = manager.current_step()
        opt.zero_grad()  # Starts the step's quorum.
        rows = slice(8 * (step % 8), 8 * (step % 8) + 8)
        loss = nn.functional.mse_loss(model(data[rows]), target[rows])
        if step == die_at:
            manager.wait_quorum()  # Counted in, then gone.
            print(f"replica {replica}: killing myself in step {step}",
                  flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        loss.backward()
        # Data parallel: each gradient averaged over the quorum's replicas
        # by the manager (a failed all_reduce is reported to it and the
        # step is not committed). Not torchft's DistributedDataParallel:
        # in torchft 0.2.0 its comm hook fails an assertion when an
        # all_reduce fails (on gloo as on ferry), nor its
        # PureDistributedDataParallel, which never waits for them.
        for w in [manager.allreduce(p.grad) for p in model.parameters()]:
            w.wait()
        opt.step()
        committed = manager.current_step() > step
        failed += not committed
        print(f"replica {replica}: step {step} participants "
              f"{manager.num_participants()} loss {loss.item():.6f} "
              f"committed {committed}", flush=True)
    weights = [round(v, 5) for v in torch.cat(
        [p.detach().flatten() for p in model.parameters()]).tolist()]
    print(f"replica {replica}: done at step {manager.current_step()}, "
          f"{failed} steps not committed, weights {weights}", flush=True)
    manager.shutdown(wait=False)


if __name__ == "__main__":
    main()
