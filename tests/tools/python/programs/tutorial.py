"""pytorch/tutorials' dist_tuto template (intermediate/dist_tuto): a
function run on 2 processes started with torch.multiprocessing, the
backend given on the command line; "ferry" adds the two documented lines
(the import below and the backend name). The port comes from MASTER_PORT
(the tutorial's 29500 by default); the parent exits non-zero if a child
failed.

    python tutorial.py BACKEND FUNCTION     (FUNCTION: see RUNS)
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ferry.distributed  # noqa: F401 -- line 1 of 2


def blocking_p2p(rank, size):
    """Blocking point-to-point communication."""
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        dist.send(tensor=tensor, dst=1)
    else:
        # Receive tensor from process 0
        dist.recv(tensor=tensor, src=0)
    print('Rank ', rank, ' has data ', tensor[0])


def non_blocking_p2p(rank, size):
    """Non-blocking point-to-point communication."""
    tensor = torch.zeros(1)
    req = None
    if rank == 0:
        tensor += 1
        # Send the tensor to process 1
        req = dist.isend(tensor=tensor, dst=1)
        print('Rank 0 started sending')
    else:
        # Receive tensor from process 0
        req = dist.irecv(tensor=tensor, src=0)
        print('Rank 1 started receiving')
    req.wait()
    print('Rank ', rank, ' has data ', tensor[0])


def all_reduce(rank, size):
    """All-Reduce example."""
    group = dist.new_group([0, 1])
    tensor = torch.ones(1)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    print('Rank ', rank, ' has data ', tensor[0])


def objects(rank, size):
    """Object collectives, as the docs show them."""
    if rank == 0:
        objs = ["foo", 12, {1: 2}]
    else:
        objs = [None, None, None]
    dist.broadcast_object_list(objs, src=0)
    gathered = [None] * size
    dist.all_gather_object(gathered, {"rank": rank, "sq": rank * rank})
    print('Rank ', rank, ' has ', objs, gathered)


RUNS = {f.__name__: f for f in (blocking_p2p, non_blocking_p2p, all_reduce,
                                objects)}


def init_process(rank, size, fn, backend='gloo'):
    """ Initialize the distributed environment. """
    os.environ['MASTER_ADDR'] = '127.0.0.1'
    os.environ['MASTER_PORT'] = os.environ.get('MASTER_PORT', '29500')
    dist.init_process_group(backend, rank=rank, world_size=size)  # line 2
    fn(rank, size)


if __name__ == "__main__":
    size = 2
    processes = []
    mp.set_start_method("spawn")
    for rank in range(size):
        p = mp.Process(target=init_process,
                       args=(rank, size, RUNS[sys.argv[2]], sys.argv[1]))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
    sys.exit(max(abs(p.exitcode) for p in processes))
