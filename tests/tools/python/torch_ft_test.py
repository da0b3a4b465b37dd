"""torch 2.x's fault-tolerance Backend API on "ferry" (ferry/_torch_ft.py),
each method in a job of its own (jobs/torch_ft_job.py has the checks), and
end to end: DDP on 4 ranks, one SIGKILLed, the survivors told
REMOTE_ERROR for it, reconfigured to 3 without restarting, finishing with
the losses of a 3-rank run from the same state (jobs/ddp_reconfigure_job.py).
Runs under the peers environment's torch (NAME_peers)."""
import re
import sys

import pytest

import conftest

JOB = conftest.script("tests/tools/python/jobs/torch_ft_job.py")
DDP_JOB = conftest.script("tests/tools/python/jobs/ddp_reconfigure_job.py")


@pytest.mark.parametrize("scenario,world,killed", [
    ("reconfigure", 3, ()),
    ("abort", 3, ()),
    ("kill", 3, (2,)),
    ("timeout", 2, ()),
    ("hooks", 2, ()),
    ("split", 4, ()),
    ("merge", 4, ()),
])
def test_method(tmp_path, scenario, world, killed):
    outs = conftest.run_ranks(
        [sys.executable, JOB, scenario, str(tmp_path / "s")], world,
        killed=killed)
    for rank, out in enumerate(outs):
        if rank not in killed:
            assert f"{scenario} passed" in out, out


def losses(outs):
    """{(step, rank): loss} from the jobs' lines."""
    found = {}
    for out in outs:
        for m in re.finditer(r"^step (\d+) rank (\d+) loss (\S+)$", out,
                             re.M):
            found[(int(m.group(1)), int(m.group(2)))] = float(m.group(3))
    return found


def test_ddp_survives_a_death_by_reconfigure(tmp_path):
    state = str(tmp_path / "model.pt")
    killed = conftest.run_ranks(
        [sys.executable, DDP_JOB, "kill", str(tmp_path / "k"), state], 4,
        killed=(3,))
    for out in killed[:3]:
        assert "get_error REMOTE_ERROR rank 3" in out, out
        assert "rank 3 (worker3) died" in out, out
        assert "kill finished" in out, out
    reference = conftest.run_ranks(
        [sys.executable, DDP_JOB, "reference", str(tmp_path / "r"), state], 3)
    after, expected = losses(killed), losses(reference)
    # Steps 3 to 7 of ranks 0 to 2: after the death, as a 3-rank run.
    assert set(expected) == {(s, r) for s in range(3, 8) for r in range(3)}
    for key, loss in expected.items():
        assert after[key] == pytest.approx(loss, rel=1e-6), key
