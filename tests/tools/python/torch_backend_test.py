"""The "ferry" backend of torch.distributed (ferry/distributed.py): every
init method, every op on 2 and 3 ranks (jobs/torch_job.py has the checks),
the ranks as a ferry job, a bounded barrier timeout."""
import os
import socket
import subprocess
import sys

import pytest

import conftest

JOB = conftest.script("tests/tools/python/jobs/torch_job.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_job(init, checks, world, env=None):
    outs = conftest.run_ranks([sys.executable, JOB, init, *checks], world, env=env)
    for out in outs:
        for c in checks:
            assert f"{c} passed" in out, out
    return outs


@pytest.mark.parametrize("world", [2, 3])
def test_every_op_on_file_init(tmp_path, world):
    torch_job(f"file://{tmp_path}/init",
              ["collectives", "p2p", "objects", "groups", "ferry_job"], world)


def test_env_init(tmp_path):
    torch_job("env", ["collectives", "elastic"], 2,
              env={"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())})


def test_tcp_init():
    torch_job(f"tcp://127.0.0.1:{free_port()}", ["p2p"], 2)


def test_explicit_store(tmp_path):
    torch_job(f"store:{tmp_path}/store", ["groups", "ferry_job"], 2)


def test_a_barrier_nobody_joins_times_out_naming_who(tmp_path):
    torch_job(f"file://{tmp_path}/init", ["timeout"], 2)


def test_torch_distributed_debug_detail(tmp_path):
    # TORCH_DISTRIBUTED_DEBUG=DETAIL: torch 2.x wrapped the backend in its
    # C++ checker, which asks a Backend its name where a Python one has
    # none, and every op failed an internal assert ("getBackendName is not
    # implemented"): the default group's and a new group's, p2p and object
    # collectives alike (torch's test_all_gather_object_subgroup).
    torch_job(f"file://{tmp_path}/init", ["p2p", "objects", "groups"], 2,
              env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})


@pytest.mark.parametrize("world", [2, 3])
def test_works_and_monitored_barrier_as_on_gloo(tmp_path, world):
    torch_job(f"file://{tmp_path}/init", ["works"], world)


def env_init():
    return {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}


def test_ddp_example_ends_with_gloos_parameters(tmp_path):
    import torch
    example = conftest.script("tools/python/examples/ddp.py")
    for backend in ("ferry", "gloo"):
        outs = conftest.run_ranks([sys.executable, example, f"--backend={backend}",
                          "--steps=12", f"--out={tmp_path}/{backend}.pt"], 2,
                         env=env_init())
        assert all(f"done on {backend}" in out for out in outs), outs
    on_ferry = torch.load(f"{tmp_path}/ferry.pt")
    on_gloo = torch.load(f"{tmp_path}/gloo.pt")
    assert on_ferry.keys() == on_gloo.keys()
    for name in on_ferry:
        # The same sums, maybe added in another order: float tolerance.
        torch.testing.assert_close(on_ferry[name], on_gloo[name],
                                   rtol=1e-5, atol=1e-6)


def test_torchrec_input_distribution_equals_ferrys_native_kjt_all_to_all():
    example = conftest.script("tools/python/examples/torchrec_input_dist.py")
    outs = conftest.run_ranks([sys.executable, example], 2, env=env_init())
    for out in outs:
        assert "equals ferry's native KJT all-to-all" in out, out


def test_readme_two_lines_are_the_ddp_examples():
    readme = open(conftest.script("README.md")).read()
    block = readme.split("## torch.distributed", 1)[1].split("```python\n")[1]
    block = block.split("```")[0]
    statements = [line.split("#")[0].strip() for line in block.splitlines()]
    example = open(conftest.script("tools/python/examples/ddp.py")).read()
    code = [line.split("#")[0].strip() for line in example.splitlines()]
    assert statements == ["import ferry.distributed",
                          'dist.init_process_group(backend="ferry")']
    # The example takes the backend from its flag, to run on gloo too.
    assert statements[0] in code
    assert "dist.init_process_group(backend=args.backend)" in code


def test_readme_torchrun_command_starts_the_ddp_example(tmp_path):
    """README's torchrun command, as written (on this test's torch: 1.13
    and the peers environment's 2.x), with a free port and 2 steps."""
    readme = open(conftest.script("README.md")).read()
    block = readme.split("<!-- torchrun:", 1)[1].split("```sh\n", 1)[1]
    words = block.split("```")[0].split()
    assert words[:2] == ["tools/dev", "python"], words
    args = [sys.executable, *words[2:], "--steps=2"]
    args.insert(args.index("--nproc_per_node=2") + 1,
                f"--master_port={free_port()}")
    r = subprocess.run(args, cwd=conftest.ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=240)
    out = r.stdout.decode(errors="replace")
    assert r.returncode == 0, out
    assert "rank 0: done on ferry" in out and "rank 1: done on ferry" in out
