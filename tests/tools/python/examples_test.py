"""The seed pages' examples (tools/python/examples/), each on the number of
Python workers its page uses, with torch tensors; and README's Python
example."""
import os
import subprocess
import sys

import pytest

import conftest


@pytest.mark.parametrize("example, workers", [
    ("all_to_all.py", 4),
    ("sparse_features_all_to_all.py", 2),
    ("all_gather_tf.py", 2),
    ("rpc_remote.py", 2),
    ("rpc_parameter_server.py", 3),
    ("rpc_pipeline.py", 3),
])
def test_example(example, workers):
    conftest.launch(conftest.script("tools/python/examples", example), workers)


def test_readme_python_block_is_the_quickstart_and_runs():
    marker = "<!-- readme-test: python "
    lines = open(conftest.script("README.md")).read().split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith(marker)]
    assert len(starts) == 1
    path = lines[starts[0]][len(marker):-len(" -->")]
    assert lines[starts[0] + 1] == "```python"
    end = lines.index("```", starts[0] + 2)
    block = "\n".join(lines[starts[0] + 2:end]) + "\n"
    assert block == open(conftest.script(path)).read(), (
        f"README's Python block differs from {path}")
    out = conftest.launch(conftest.script(path), 2)
    assert "[0] tensor([3., 3.])" in out and "[0] tensor([0, 1, 2, 3])" in out
    assert os.path.basename(path) == "quickstart.py"


def test_the_seed_torchscript_example_fails_as_on_torch():
    """The page's TorchScript example passes 3 where its function takes a
    tensor (TorchScript types unannotated parameters as Tensor): torch
    refuses that call on the caller, TensorPipe or not; ferry.rpc's callee
    ran its own my_script_add, found by name, which refuses it the same
    way -- a RuntimeError with TorchScript's message."""
    cmd = [sys.executable, "-m", "ferry.launch", "-n", "2", "--timeout",
           "120", conftest.script("tools/python/examples",
                                  "rpc_remote_script.py")]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=150)
    out = r.stdout.decode(errors="replace")
    assert r.returncode != 0, out
    assert ("[0] ferry.rpc.InternalError: worker1: __main__:my_script_add: "
            "RuntimeError: my_script_add() Expected a value of type 'Tensor "
            "(inferred)' for argument 't2' but instead found type 'int'."
            in out), out
