"""A hostile caller of the job's store from Python (issue 49, R4): the
callers without a credential — ``ferry.store``, torch's ``ferry://``
rendezvous — fill only their own share of the store (8 MiB of keys and
values), and the workers' agreements keep working, their keys in a share
no client can take. On 1dde932 one caller's ~90 Sets of 1 MiB filled the
job's 64 MiB, and then every ``ferry.agree`` failed."""
import datetime

import pytest

import conftest
import ferry
import ferry.store


@pytest.fixture
def master():
    """This process as a job of one: its master's address."""
    address = f"127.0.0.1:{conftest.free_port()}"
    ferry.init(rank=0, world_size=1, master=address, timeout=30)
    yield address
    ferry.shutdown()


def test_one_caller_fills_only_its_share(master):
    store = ferry.store.FerryStore(f"ferry://{master}/hostile",
                                   datetime.timedelta(seconds=10))
    value = b"x" * ((1 << 20) - 64)  # Just under the 1 MiB value limit.
    for i in range(8):
        store.set(f"fill{i}", value)
    with pytest.raises(ferry.ResourceExhaustedError,
                       match="callers without a credential would hold"):
        store.set("fill8", value)
    # The workers' agreements decide in their own share.
    assert ferry.agree() == (True, [0])
    assert ferry.agree(False) == (False, [0])
    assert len(ferry.shrink_group().ranks) == 1
    # What the caller gives back it may take again.
    assert store.delete_key("fill0")
    store.set("fill8", value)
