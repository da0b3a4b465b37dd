"""The failure matrix, side by side on torch 2.x: 3 ranks on "ferry" and on
"gloo", rank 2 killed, stopped (SIGSTOP), cut off by a network partition
(each rank on a host of its own: network namespaces joined by a bridge,
tests/testing/netns.h through test_network_tool; rank 2's link taken
down, so nothing reaches it and nobody gets a reset) or never joining an
all_reduce;
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
CASES = ["killed", "stopped", "partitioned", "never_joins"]
NET_TOOL = conftest.script("tests/testing/test_network_tool")
TIMEOUT = 20.0  # The group's timeout, seconds (ferry's heartbeat: 10 s).


class Unavailable(Exception):
    """No network namespaces here (not root, no `ip`)."""


class Network:
    """Three test hosts (a, b, c: one per rank) from test_network_tool;
    closing it destroys them and kills what runs there."""

    def __init__(self):
        self.tool = subprocess.Popen([NET_TOOL], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        answer = self.ask("create a b c")
        if answer.startswith("error:"):
            self.close()
            raise Unavailable(answer)
        self.hosts = [json.loads(answer)[h] for h in "abc"]

    def ask(self, line):
        self.tool.stdin.write(line + "\n")
        self.tool.stdin.flush()
        return self.tool.stdout.readline().strip()

    def close(self):
        self.tool.stdin.close()
        self.tool.wait(timeout=60)


def certificates(directory, addresses):
    """A CA and one server certificate for every address (ca.pem,
    cert.pem, key.pem in `directory`), made with openssl."""
    directory.mkdir(exist_ok=True)
    d = str(directory)

    def openssl(*args):
        subprocess.run(["openssl", *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=matrix-ca", "-keyout", f"{d}/ca.key",
            "-out", f"{d}/ca.pem")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=matrix",
            "-keyout", f"{d}/key.pem", "-out", f"{d}/cert.csr")
    with open(f"{d}/ext.cnf", "w") as f:
        f.write("subjectAltName=" + ",".join(f"IP:{a}" for a in addresses)
                + "\n")
    openssl("x509", "-req", "-in", f"{d}/cert.csr", "-CA", f"{d}/ca.pem",
            "-CAkey", f"{d}/ca.key", "-CAcreateserial", "-days", "2",
            "-extfile", f"{d}/ext.cnf", "-out", f"{d}/cert.pem")
    return d


def run_case(backend, case, tmp_path):
    """The survivors' rows of one case; the victim is killed at the end
    (stopped, cut off, or still leaving)."""
    store = str(tmp_path / f"{backend}-{case}")
    net = Network() if case == "partitioned" else None
    procs, outs = [], []
    try:
        tls = net and certificates(tmp_path / f"tls-{backend}",
                                   [h["address"] for h in net.hosts])
        for r in range(3):
            env = dict(os.environ, RANK=str(r), WORLD_SIZE="3")
            cmd = [sys.executable, JOB, backend, case, store, str(TIMEOUT)]
            if net is not None:  # Rank r on host r, reached at its address.
                env.update(FERRY_HOST=net.hosts[r]["address"],
                           GLOO_SOCKET_IFNAME="eth0", TLS_DIR=tls)
                cmd = ["ip", "netns", "exec", net.hosts[r]["netns"]] + cmd
            procs.append(subprocess.Popen(cmd, env=env,
                                          stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        if net is not None:
            deadline = time.monotonic() + 120
            while not os.path.exists(store + ".ready"):
                if time.monotonic() > deadline or procs[2].poll() is not None:
                    for p in procs:
                        p.kill()
                    raise AssertionError("rank 2 never got ready:\n" + "\n".join(
                        p.communicate()[0].decode(errors="replace")[-3000:]
                        for p in procs))
                time.sleep(0.02)
            assert net.ask("partition c") == "ok"
            open(store + ".cut", "w").close()
        for p in procs[:2]:
            outs.append(p.communicate(timeout=120 + 2 * TIMEOUT)[0].decode(
                errors="replace"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            p.wait()
        if net is not None:
            net.close()
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
            if not rs:
                lines.append(f"| {case} | {backend} | not run here |||||")
                continue
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
            try:
                rows += run_case(backend, case, tmp_path)
            except Unavailable as e:  # Recorded, not failed: the others run.
                print(f"{backend} {case}: not run: {e}")
                continue
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
                "partitioned": {"REMOTE_ERROR", "TIMEOUT"},
                "never_joins": {"TIMEOUT"}}
    for row in rows:
        if row["backend"] != "ferry":
            continue
        assert row["raised"] == "DistBackendError", row
        assert row["names_rank"], row
        assert row["get_error"] in expected[row["case"]], row
    # Every survivor's, at once: one that failed to go on makes its peer
    # fail too (it left).
    stuck = [(r["case"], r["rank"], r.get("went_on_error")) for r in rows
             if r["backend"] == "ferry" and not r["went_on"]]
    assert not stuck, stuck
