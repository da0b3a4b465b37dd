"""The failure matrix, side by side on torch 2.x: 3 ranks on "ferry" and on
"gloo", rank 2 killed, stopped (SIGSTOP) or never joining an all_reduce;
what ranks 0 and 1 see (error type, get_error(), whether the message names
rank 2), how long until they see it, and whether the job goes on without
restarting (reconfigure to the two survivors). jobs/failure_matrix_job.py
is the job. Prints README's table ("When a rank dies"); asserts ferry's
rows, records gloo's.

    tools/dev python --peers -m pytest -s tests/tools/python/torch_failure_matrix_test.py
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import conftest

JOB = conftest.script("tests/tools/python/jobs/failure_matrix_job.py")
CASES = ["killed", "stopped", "never_joins"]
TIMEOUT = 20.0  # The group's timeout, seconds (ferry's heartbeat: 10 s).


def run_case(backend, case, tmp_path):
    """The survivors' rows of one case; the victim is killed at the end
    (stopped, or still leaving)."""
    store = str(tmp_path / f"{backend}-{case}")
    procs = [subprocess.Popen(
        [sys.executable, JOB, backend, case, store, str(TIMEOUT)],
        env=dict(os.environ, RANK=str(r), WORLD_SIZE="3"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for r in range(3)]
    outs = []
    try:
        for p in procs[:2]:
            outs.append(p.communicate(timeout=120 + 2 * TIMEOUT)[0].decode(
                errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
    rows = []
    for r, out in enumerate(outs):
        lines = [line for line in out.splitlines() if line.startswith("{")]
        assert lines, f"{backend} {case}: rank {r} printed no row:\n{out}"
        rows.append(json.loads(lines[-1]))
    return rows


def table(rows):
    head = ("| case | backend | survivors raise | get_error() | names rank 2 "
            "| seconds | goes on (reconfigure) |\n|---|---|---|---|---|---|---|")
    lines = [head]
    for case in CASES:
        for backend in ["ferry", "gloo"]:
            rs = [r for r in rows if (r["case"], r["backend"]) ==
                  (case, backend)]
            # (gloo's messages begin with its source path on torch's CI.)
            message = re.sub(r"^\[/\S*/third_party/", "[",
                             rs[0].get("message", ""))
            lines.append(
                f"| {case.replace('_', ' ')} | {backend} | "
                f"{rs[0]['raised']}: `{message[:170]}` | "
                f"{rs[0]['get_error']} | "
                f"{'yes' if all(r['names_rank'] for r in rs) else 'no'} | "
                f"{max(r['seconds'] for r in rs):.2f} | "
                f"{'yes' if all(r['went_on'] for r in rs) else 'no'} |")
    return "\n".join(lines)


def test_failure_matrix(tmp_path):
    rows = []
    for case in CASES:
        for backend in ["ferry", "gloo"]:
            start = time.monotonic()
            rows += run_case(backend, case, tmp_path)
            print(f"{backend} {case}: {time.monotonic() - start:.1f} s")
    text = table(rows)
    print(text)
    out_dir = os.environ.get("TEST_UNDECLARED_OUTPUTS_DIR")
    if out_dir:
        with open(os.path.join(out_dir, "failure_matrix.md"), "w") as f:
            f.write(text + "\n")
    expected = {"killed": {"REMOTE_ERROR"},
                # The heartbeat (10 s) names it dead before the op's
                # timeout (20 s) on a quiet machine; either names rank 2.
                "stopped": {"REMOTE_ERROR", "TIMEOUT"},
                "never_joins": {"TIMEOUT"}}
    for row in rows:
        if row["backend"] != "ferry":
            continue
        assert row["raised"] == "DistBackendError", row
        assert row["names_rank"], row
        assert row["get_error"] in expected[row["case"]], row
        assert row["went_on"], row
