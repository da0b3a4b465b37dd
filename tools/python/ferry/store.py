"""ferry as torch's store and rendezvous: ``import ferry.store`` (or
``ferry.distributed``) lets any torch.distributed program -- gloo groups
included -- rendezvous on ferry's membership instead of a TCPStore on rank
0:

    dist.init_process_group("gloo", init_method="ferry://10.0.0.1:29500",
                            rank=rank, world_size=n)
    dist.init_process_group("gloo", init_method=
                            "etcd://10.0.0.1:2379,10.0.0.2:2379/train1", ...)

``ferry://HOST:PORT[/NAME]``: the key-value store of the ferry job whose
master (rank 0, embedded membership) is HOST:PORT -- a job started with
``ferryctl up`` or ``ferryd`` -- with keys under NAME/ (default "torch/"),
so several torch jobs can share one ferry job. Its token: ``?token_file=``,
env ``FERRY_TOKEN_FILE``, or the job this user's ferryctl started there.

``etcd://HOST:PORT[,HOST:PORT...]/JOB``: keys in etcd under
/ferry/JOB/store/, no ferry process needed; the store lives as long as
etcd does, on every member (no single point of failure). TLS and a user:
``?etcd_ca=&etcd_cert=&etcd_key=&etcd_user=&etcd_password_file=`` (or the
``FERRY_ETCD_*`` environment).

``FerryStore(url)`` is the store itself, a ``torch.distributed.Store``.
Every wait is bounded by the store's timeout (``set_timeout``, or the
process group's).
"""

from __future__ import annotations

import datetime
import importlib
import os
from typing import Any, Iterator
from urllib.parse import parse_qs, urlparse

import torch.distributed as dist

from . import _ferry

__all__ = ["FerryStore"]

# torch's C++ keeps only the C++ half of a Python store.
_alive: list[FerryStore] = []


def _options(query: str, timeout: datetime.timedelta) -> dict[str, Any]:
    o: dict[str, Any] = {k: v[-1] for k, v in parse_qs(query).items()}
    for key in ("token_file", "etcd_ca", "etcd_cert", "etcd_key",
                "etcd_user"):
        o.setdefault(key, os.environ.get(f"FERRY_{key.upper()}"))
    password_file = o.pop("etcd_password_file", None) or os.environ.get(
        "FERRY_ETCD_PASSWORD_FILE")
    if password_file:
        with open(password_file) as f:
            o["etcd_password"] = f.readline().rstrip("\n")
    o["timeout"] = timeout.total_seconds()
    return o


class FerryStore(dist.Store):
    """A torch Store kept by ferry: ``FerryStore("ferry://HOST:PORT")`` or
    ``FerryStore("etcd://HOST:PORT[,...]/JOB")`` (see the module)."""

    def __init__(self, url: str,
                 timeout: datetime.timedelta = datetime.timedelta(minutes=5)
                 ) -> None:
        super().__init__()
        self._timeout = timeout
        parsed = urlparse(url)
        options = _options(parsed.query, timeout)
        if parsed.scheme == "ferry":
            name = parsed.path.strip("/") or "torch"
            self._prefix = name + "/"
            self._store = _ferry.Store.connect_master(parsed.netloc, options)
        elif parsed.scheme == "etcd":
            self._prefix = ""
            self._store = _ferry.Store.connect_etcd(
                f"etcd://{parsed.netloc}{parsed.path}", options)
        else:
            raise ValueError(f"FerryStore: {url!r} is no ferry:// or etcd:// "
                             "URL")
        _alive.append(self)

    def _k(self, key: str) -> str:
        return self._prefix + key

    def _wait(self) -> float:
        return self._timeout.total_seconds()

    def set(self, key: str, value: str | bytes) -> None:
        if isinstance(value, str):
            value = value.encode()
        self._store.set(self._k(key), bytes(value))

    def get(self, key: str) -> bytes:
        return self._store.get(self._k(key), self._wait())

    def add(self, key: str, amount: int) -> int:
        return self._store.add(self._k(key), int(amount))

    def compare_set(self, key: str, expected: str | bytes,
                    desired: str | bytes) -> bytes:
        as_bytes = lambda v: v.encode() if isinstance(v, str) else bytes(v)
        return self._store.compare_set(self._k(key), as_bytes(expected),
                                       as_bytes(desired))

    def delete_key(self, key: str) -> bool:
        return self._store.delete(self._k(key))

    def check(self, keys: list[str]) -> bool:
        return self._store.check([self._k(k) for k in keys])

    def wait(self, keys: list[str],
             timeout: datetime.timedelta | None = None) -> None:
        seconds = self._wait() if timeout is None else timeout.total_seconds()
        self._store.wait([self._k(k) for k in keys], seconds)

    def num_keys(self) -> int:
        return self._store.num_keys()

    def set_timeout(self, timeout: datetime.timedelta) -> None:
        self._timeout = timeout


def _handler(url: str,
             timeout: datetime.timedelta = datetime.timedelta(minutes=5),
             **kwargs: Any) -> Iterator[tuple[FerryStore, int, int]]:
    """torch's rendezvous handler for ferry:// and etcd:// URLs (rank and
    world_size in the query, as torch adds them)."""
    del kwargs
    parsed = urlparse(url)
    query = parse_qs(parsed.query)
    if "rank" not in query or "world_size" not in query:
        raise ValueError(f"{parsed.scheme}:// rendezvous: rank and "
                         "world_size are needed")
    rank, world = int(query["rank"][-1]), int(query["world_size"][-1])
    store = FerryStore(url, timeout)
    yield (store, rank, world)
    raise RuntimeError(f"{parsed.scheme}:// rendezvous does not "
                       "re-rendezvous")


def _env_handler(url: str,
                 timeout: datetime.timedelta = datetime.timedelta(minutes=5),
                 **kwargs: Any) -> Iterator[tuple[dist.Store, int, int]]:
    """env:// in a worker that ``torchrun --rdzv-backend=ferry-etcd``
    started (``ferry.torchrun``): the store is etcd's, under the
    rendezvous round; anywhere else, torch's own env://."""
    store_url = os.environ.get("FERRY_TORCHRUN_STORE")
    if not store_url:
        yield from _torch_env(url, timeout=timeout, **kwargs)
        return
    query = {k: v[-1] for k, v in parse_qs(urlparse(url).query).items()}
    try:
        rank = int(query.get("rank") or os.environ["RANK"])
        world = int(query.get("world_size") or os.environ["WORLD_SIZE"])
    except KeyError as e:
        raise ValueError(f"env:// rendezvous: {e.args[0]} is not set") from e
    round_ = os.environ.get("FERRY_TORCHRUN_ROUND", "0")
    store = dist.PrefixStore(f"torchrun/round_{round_}/",
                             FerryStore(store_url, timeout))
    yield (store, rank, world)
    raise RuntimeError("env:// rendezvous on etcd does not re-rendezvous")


for _scheme in ("ferry", "etcd"):
    try:
        dist.register_rendezvous_handler(_scheme, _handler)
    except RuntimeError:
        pass  # Registered already (a reload).

# torch registers env:// itself and refuses a second handler for a scheme:
# ours goes in its place in torch's table, and hands every worker that
# torchrun did not start through ferry to torch's. (A reload runs this in
# the same namespace: torch's is kept from the first time.)
# (torch.distributed.rendezvous is also a function's name: the module is
# found by its full name.)
_handlers = importlib.import_module(
    "torch.distributed.rendezvous")._rendezvous_handlers
if "_torch_env" not in globals():
    _torch_env = _handlers["env"]
    _handlers["env"] = _env_handler
