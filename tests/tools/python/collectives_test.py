"""Every collective from Python on 3 workers (jobs/collectives_job.py has
the checks), and a job of one worker."""
import numpy as np
import torch

import conftest
import ferry


def test_collectives_on_three_workers():
    out = conftest.launch(
        conftest.script("tests/tools/python/jobs/collectives_job.py"), 3)
    assert out.count("all collectives passed") == 3, out


def test_a_world_of_one():
    ferry.init(rank=0, world_size=1, timeout=30)
    try:
        t = torch.arange(3.0)
        ferry.all_reduce(t)
        assert torch.equal(t, torch.arange(3.0))  # in place, itself
        out = [np.empty(3, np.float64)]
        ferry.all_to_all(out, [np.arange(3.0)])
        np.testing.assert_array_equal(out[0], np.arange(3.0))
        ferry.barrier()
        assert ferry.get_rank() == 0 and ferry.get_world_size() == 1
    finally:
        ferry.shutdown()
