"""A program using ferry's public API, never run: mypy_test.sh type-checks
it with --strict against the built package, found as an installed one (by
its py.typed), as a user's program would be. Each `# type: ignore[...]`
marks a mistake the annotations must catch: --strict fails on an ignore
that hides nothing, so types that decayed to Any fail the test."""

import datetime
from typing import Any

import numpy
import numpy.typing
import torch
import torch.distributed as dist

import ferry
import ferry.distributed
import ferry.launch
import ferry.store


@ferry.register("scale")
def scale(t: torch.Tensor, k: float) -> torch.Tensor:
    return t * k


async def later(x: int) -> int:
    return x


def rpc() -> None:
    version: str = ferry.__version__
    info: ferry.WorkerInfo = ferry.init(rank=0, world_size=1,
                                        tensor_type="torch", timeout=5)
    name: str = info.name
    rank: int = info.id
    doubled: torch.Tensor = scale(torch.ones(2), 2.0)  # Still the function.
    ferry.register("later", later, doc="a coroutine")
    x = ferry.rpc_sync(info, "scale", args=(torch.ones(2), 3))
    fut: ferry.Future = ferry.rpc_async("worker0", scale, args=[x, 1])
    y = fut.then(lambda f: f.wait()).wait(timeout=1.0)
    ref: ferry.RRef = ferry.remote(0, "ones", args=([2],))
    owner: ferry.WorkerInfo = ref.owner()
    confirmed: bool = ref.confirmed_by_owner()
    z = ref.rpc_sync(timeout=1).scale(2.0)
    names: list[str] = ferry.workers()
    status: dict[str, object] = ferry.status()
    bits = ferry.BFloat16.from_float(numpy.ones(3, dtype=numpy.float32))
    widened: numpy.typing.NDArray[numpy.float32] = bits.to_float()
    stopped: bool = ferry.serve(timeout=0.1)
    with ferry.connect("127.0.0.1:29500", timeout=1.0) as client:
        functions: list[dict[str, str]] = client.functions("worker0")
        client.shutdown_job()
    try:
        ferry.shutdown(graceful=True)
    except ferry.DeadlineExceededError as e:
        code: str = e.code
        print(code)
    print(version, name, rank, doubled, y, owner, confirmed, z, names, status,
          widened, stopped, functions)

    ferry.init(rank="0")  # type: ignore[arg-type]
    ferry.init(tensor_type="jax")  # type: ignore[arg-type]
    ferry.rpc_sync("worker0", 42)  # type: ignore[arg-type]
    ferry.rpc_sync("worker0", "f", args="no tuple")  # type: ignore[arg-type]
    ferry.serve(timeout="soon")  # type: ignore[arg-type]
    ferry.Future().then(1)  # type: ignore[arg-type]


def collectives() -> None:
    t = torch.ones(4)
    ferry.all_reduce(t, op=ferry.ReduceOp.MAX)
    ferry.all_reduce(t, op=dist.ReduceOp.SUM, timeout=1.0)
    work = ferry.all_reduce(numpy.ones(4), async_op=True)
    if work is not None:
        done: bool = work.is_completed()
        work.wait(timeout=2.0)
    group: ferry.Group = ferry.new_group([0, 1])
    members: list[int] = group.ranks
    ferry.broadcast(t, src=0, group=group)
    outputs = [torch.empty(1) for _ in range(4)]
    ferry.all_to_all(outputs, list(t.chunk(4)))
    gathered: list[torch.Tensor] = []
    ferry.all_gather(gathered, t)
    ferry.gather(t, gathered, dst=0)
    sender: int = ferry.recv(t, src=None, tag=3)
    ferry.barrier()
    kjt = ferry.KeyedJaggedTensor.from_lengths_sync(
        ["a"], torch.arange(3), torch.tensor([1, 2]))
    values: list[torch.Tensor | numpy.typing.NDArray[Any]] = kjt["a"]
    a2a = ferry.SparseFeaturesAllToAll(None, [1], [0])
    pending = a2a(ferry.SparseFeatures(id_list_features=kjt))
    agreed: bool
    took_part: list[int]
    agreed, took_part = ferry.agree(False, group=group, timeout=5.0)
    ferry.revoke_group(group, reason="a member died")
    live: ferry.Group = ferry.shrink_group(group, timeout=5.0)
    ferry.barrier(group=ferry.shrink_group())
    again: ferry.Group = ferry.grow_group(live, timeout=5.0)
    ferry.barrier(group=again)
    print(done, members, sender, values, pending, agreed, took_part, live)

    ferry.all_reduce([1.0, 2.0])  # type: ignore[arg-type]
    ferry.all_reduce(t, async_op="yes")  # type: ignore[arg-type]
    ferry.broadcast(t, src="0")  # type: ignore[arg-type]
    ferry.new_group(["a"])  # type: ignore[list-item]
    ferry.revoke_group(reason=3)  # type: ignore[arg-type]
    rank_list: list[str] = ferry.agree()[1]  # type: ignore[assignment]


def torch_backend() -> None:
    ferry.distributed.configure(listen="127.0.0.1:0")
    backend: str = ferry.distributed.BACKEND
    master: str = ferry.distributed.master()
    store = ferry.store.FerryStore("ferry://127.0.0.1:29500",
                                   datetime.timedelta(seconds=5))
    store.set("k", "v")
    got: bytes = store.get("k")
    added: int = store.add("n", 1)
    status: int = ferry.launch.run(2, ["python3", "job.py"], timeout=10)
    print(backend, master, got, added, status)

    store.wait(["k"], timeout=5)  # type: ignore[arg-type]
    ferry.launch.run("2", ["job.py"])  # type: ignore[arg-type]


def torch_rpc() -> None:
    import ferry.rpc as trpc

    @trpc.functions.async_execution
    def later_add(x: torch.Tensor) -> torch.futures.Future[torch.Tensor]:
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(x + 1)
        return fut

    options = trpc.TensorPipeRpcBackendOptions(
        rpc_timeout=10, init_method="env://", num_worker_threads=4,
        allow=[ferry.store, "ferry.launch"])
    trpc.init_rpc("worker0", rank=0, world_size=1,
                  rpc_backend_options=options)
    trpc.allow_module(ferry.store)
    info: trpc.WorkerInfo = trpc.get_worker_info()
    x = trpc.rpc_sync("worker0", torch.add, args=(torch.ones(2), 1),
                      kwargs={"alpha": 2}, timeout=trpc.UNSET_RPC_TIMEOUT)
    fut: torch.futures.Future[Any] = trpc.rpc_async(0, later_add,
                                                    args=(x,))
    y = fut.wait()
    rref: trpc.RRef = trpc.remote(info, torch.ones, args=(2,), timeout=0)
    here = rref.to_here(timeout=1.0)
    owner: trpc.WorkerInfo = rref.owner()
    mine = trpc.RRef(torch.zeros(1))
    local = mine.local_value()
    z = mine.rpc_sync(timeout=1).add(1)
    trpc._set_rpc_timeout(5.0)
    seconds: float = trpc.get_rpc_timeout()
    trpc.shutdown(graceful=True, timeout=10)
    print(y, here, owner, local, z, seconds)

    trpc.init_rpc(3)  # type: ignore[arg-type]
    trpc.rpc_sync("worker0", torch.add, args="no tuple")  # type: ignore[arg-type]
    trpc.shutdown(graceful="yes")  # type: ignore[arg-type]
