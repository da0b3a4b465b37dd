"""torch's own distributed test suite (distributed_test.py) on ferry, gloo
the reference: a representative subset at world sizes 2 and 3 (the full
selection is `tools/dev torch-suite`). tools/python/torch_suite.py runs it
and decides: ferry passes at least 90 % of what gloo passes, none hangs,
and every gloo-passing test ferry fails is a known one."""
import subprocess
import sys

import conftest


def test_torch_suite_subset_on_ferry_and_gloo():
    r = subprocess.run(
        [sys.executable, conftest.script("tools/python/torch_suite.py"),
         "--select=subset", "--timeout=90", "--verbose"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1500)
    out = r.stdout.decode(errors="replace")
    print(out)
    assert r.returncode == 0 and "torch suite: PASSED" in out, out
