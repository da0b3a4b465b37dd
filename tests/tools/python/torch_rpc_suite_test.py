"""torch's own RPC tests on ferry.rpc, TensorPipe the reference: a
representative subset at world size 4 (the full selection is `tools/dev
torch-rpc-suite`). tools/python/torch_rpc_suite.py runs it and decides:
none hangs, and every test TensorPipe passes and ferry.rpc fails is a known
one, with its reason."""
import subprocess
import sys

import conftest


def test_torch_rpc_suite_subset_on_ferry_and_tensorpipe():
    r = subprocess.run(
        [sys.executable, conftest.script("tools/python/torch_rpc_suite.py"),
         "--select=subset", "--timeout=90", "--verbose"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1500)
    out = r.stdout.decode(errors="replace")
    print(out)
    assert r.returncode == 0 and "torch RPC suite: PASSED" in out, out
    assert "ferry.rpc hung: 0" in out, out
