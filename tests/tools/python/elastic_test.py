"""Elastic groups from Python (ferry.agree, ferry.revoke_group,
ferry.shrink_group over collectives/elastic/elastic.h) on 3 workers
(jobs/elastic_job.py has the checks), and on a world of one.

A shrink after a worker's death is not here: the package has no helper to
kill a worker of a launched job (ferry.launch stops the job at the first
non-zero exit); tests/collectives/elastic/elastic_test.cc covers it in C++."""
import pytest
import torch

import conftest
import ferry


def test_agree_revoke_shrink_on_three_workers():
    out = conftest.launch(
        conftest.script("tests/tools/python/jobs/elastic_job.py"), 3)
    assert out.count("elastic groups passed") == 3, out


@pytest.fixture
def alone():
    ferry.init(rank=0, world_size=1, timeout=30)
    yield
    ferry.shutdown()


def test_a_world_of_one(alone):
    assert ferry.agree(False) == (False, [0])
    assert ferry.agree(timeout=5) == (True, [0])
    ferry.revoke_group(reason="alone")
    assert ferry.agree() == (True, [0])  # Works on a revoked group.
    live = ferry.shrink_group()
    assert isinstance(live, ferry.Group)
    assert live.ranks == [0] and live.rank() == 0 and live.size() == 1
    ferry.barrier(group=live)
    t = torch.ones(2)
    ferry.all_reduce(t, group=live)
    assert torch.equal(t, torch.ones(2))


def test_a_revoked_world_of_one_refuses_ops(alone):
    ferry.revoke_group(reason="alone")
    with pytest.raises(ferry.AbortedError, match="revoked.*alone"):
        ferry.barrier()
    with pytest.raises(ferry.AbortedError, match="revoked.*alone"):
        ferry.all_reduce(torch.ones(1))
