"""Seeing inside running jobs (README "Observing a job"), end to end with
real processes: a mismatched collective named by the op and by `ferryctl
analyze` over the dumps the workers wrote; a rank stuck in a function shown
by `ferryctl status` and `ferryctl stacks`; a nested call's span tree from
`ferryctl call --trace`; metrics accepted by promtool and scraped by a real
Prometheus server."""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

import conftest

JOB = conftest.script("tests/tools/python/jobs/observe_job.py")


def ctl(ferryctl, *args, stdin=None, check=True):
    r = subprocess.run([ferryctl, *args], input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    if check:
        assert r.returncode == 0, f"ferryctl {args}: {r.stderr}"
    return r


def wait_until(what, probe, seconds=90):
    """probe() until it returns a true value, within `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        got = probe()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Job:
    """Three Python workers running observe_job.py in `mode`."""

    def __init__(self, tmp_path, mode, env=None):
        self.address_file = str(tmp_path / f"{mode}.master")
        self.logs = [open(tmp_path / f"{mode}{r}.log", "w+") for r in range(3)]
        self.procs = []
        base = dict(os.environ, WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                    **(env or {}))
        rank0_address = str(tmp_path / f"{mode}.rank0")
        self._start(0, dict(base, RANK="0", MASTER_PORT="0",
                            FERRY_ADDRESS_FILE=rank0_address), mode)
        port = self._wait_file(rank0_address).rsplit(":", 1)[1]
        for r in (1, 2):
            self._start(r, dict(base, RANK=str(r), MASTER_PORT=port), mode)
        self.master = self._wait_file(self.address_file)

    def _start(self, rank, env, mode):
        self.procs.append(subprocess.Popen(
            [sys.executable, JOB, mode, self.address_file], env=env,
            stdout=self.logs[rank], stderr=subprocess.STDOUT))

    def _wait_file(self, path):
        def ready():
            for p in self.procs:
                assert p.poll() in (None, 0), self.output()
            return os.path.exists(path) and open(path).read().strip()
        return wait_until(path, ready)

    def output(self):
        out = []
        for r, log in enumerate(self.logs):
            log.seek(0)
            out.append(f"--- rank {r}\n{log.read()}")
        return "\n".join(out)

    def wait(self, seconds=120):
        for p in self.procs:
            assert p.wait(seconds) == 0, self.output()

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.fixture
def jobs():
    started = []
    yield lambda *a, **k: started.append(Job(*a, **k)) or started[-1]
    for job in started:
        job.kill()


def test_a_mismatched_collective_is_named_and_analyzed(tmp_path, jobs,
                                                       ferryctl):
    dumps = tmp_path / "dumps"
    job = jobs(tmp_path, "mismatch", env={"FERRY_DUMP_DIR": str(dumps)})
    job.wait()
    out = job.output()
    for r in range(3):
        assert f"rank {r}: INVALID_ARGUMENT" in out, out
    assert "all_gather" in out and "all_reduce" in out, out
    # Every worker wrote its dump (before it stopped).
    assert sorted(os.listdir(dumps)) == [
        "worker0.json", "worker1.json", "worker2.json"]
    dump = json.load(open(dumps / "worker2.json"))
    failed = [e for e in dump["entries"] if e["state"] == "failed"]
    assert [(e["profiling_name"], e["collective_seq_id"]) for e in failed] == [
        ("ferry:all_gather", 1)]
    text = ctl(ferryctl, "analyze", str(dumps)).stdout
    assert "first mismatch: op 1 (world/1): op differs" in text, text
    assert "rank 2 (worker2) ran all_gather" in text, text
    assert "ranks 0 (worker0), 1 (worker1) ran all_reduce" in text, text
    report = json.loads(ctl(ferryctl, "analyze", "--format=json",
                            str(dumps)).stdout)
    mismatch = report["groups"][0]["mismatch"]
    assert mismatch["seq"] == 1
    assert [(s["value"], s["ranks"]) for s in mismatch["sides"]] == [
        ("all_reduce", [0, 1]), ("all_gather", [2])]


def test_a_stuck_rank_shows_in_status_and_stacks(tmp_path, jobs, ferryctl):
    job = jobs(tmp_path, "stuck")
    master = f"--master={job.master}"

    def blocked():
        status = json.loads(ctl(ferryctl, master, "status",
                                "--format=json").stdout)
        workers = {w["name"]: w for w in status["workers"]}
        blocking = workers["worker2"].get("blocking", [])
        return (blocking and sorted(blocking[0]["waiting"]) == [
            "worker0", "worker1"] and (workers, blocking[0]))
    workers, blocking = wait_until("worker2 to hold up the others", blocked)
    assert blocking["op"] == "all_reduce" and blocking["seq"] == 1
    assert blocking["began"] is False  # It never began op 1.
    waiting = workers["worker0"]["groups"][0]["waiting"]
    assert waiting["op"] == "all_reduce" and waiting["waiting_for"] == [
        "worker2"]
    table = ctl(ferryctl, master, "status", "--format=table").stdout
    assert ("worker2 holds up all_reduce op 1 of world (world/1): worker0, "
            "worker1 wait for it; it has not begun it") in table, table

    stacks = json.loads(ctl(ferryctl, master, "stacks", "--format=json",
                            "worker2").stdout)
    # The call it is stuck in (and the one asking for the stacks).
    assert "stall" in [c["function"] for c in stacks["calls"]], stacks
    frames = [f for t in stacks["python"] for f in t["frames"]]
    sleeping = [f for f in frames if f["function"] == "stall"]
    assert sleeping and "time.sleep(seconds)" in sleeping[0]["code"], stacks
    assert any(t["frames"] for t in stacks["threads"])  # Native stacks too.
    # On a waiting rank: the collective, and whom it waits for.
    theirs = json.loads(ctl(ferryctl, master, "stacks", "--format=json",
                            "worker0").stdout)
    assert theirs["collectives"][0]["waiting_for"] == ["worker2"], theirs
    assert any("all_reduce op world/1" in t.get("waiting", "")
               for t in theirs["threads"]), theirs
    text = ctl(ferryctl, master, "stacks", "--format=text", "worker2").stdout
    assert "executing stall for worker2" in text, text


def test_a_traced_nested_call_gives_one_tree(tmp_path, jobs, ferryctl):
    job = jobs(tmp_path, "trace")
    master = f"--master={job.master}"
    r = ctl(ferryctl, master, "call", "--trace", "worker0", "relay0")
    traced = json.loads(r.stdout)
    assert traced["result"] == 42
    [root] = traced["spans"]
    assert (root["worker"], root["name"]) == ("worker0", "relay0")
    [middle] = root["children"]
    assert (middle["worker"], middle["name"]) == ("worker1", "relay1")
    assert middle["parent_span_id"] == root["span_id"]
    [leaf] = middle["children"]
    assert (leaf["worker"], leaf["name"]) == ("worker2", "leaf")
    assert leaf["parent_span_id"] == middle["span_id"]
    assert leaf["children"] == []
    for span in (root, middle, leaf):
        assert span["trace_id"] == traced["trace_id"]
        assert span["status"] == "OK"
    assert "    relay1 on worker1 for worker0 OK" in r.stderr, r.stderr
    ctl(ferryctl, master, "down")
    job.wait()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def daemons(tmp_path, ferryctl, ferryd):
    up = json.loads(ctl(ferryctl, "up", "--world_size=3", "--port=0",
                        f"--dir={tmp_path / 'job'}", "--",
                        "--metrics_listen=127.0.0.1:0").stdout)
    # The job's own token (this sandbox keeps no record of the job).
    flags = [f"--master={up['master']}", f"--token_file={up['dir']}/token"]
    yield flags
    ctl(ferryctl, *flags, "down", check=False)


def test_metrics_pass_promtool_and_a_real_prometheus_scrapes_them(
        tmp_path, ferryctl, daemons):
    master = daemons  # --master and --token_file
    for _ in range(5):
        assert ctl(ferryctl, *master, "call", "worker1", "echo",
                   "[7]").stdout.strip() == "7"
    ctl(ferryctl, *master, "collective", "all_reduce",
        stdin='{"ranks":[{"dtype":"int32","data":[1]},'
              '{"dtype":"int32","data":[2]},{"dtype":"int32","data":[3]}]}')
    merged = ctl(ferryctl, *master, "status", "--format=prometheus").stdout
    check = subprocess.run(["promtool", "check", "metrics"], input=merged,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    assert ('ferry_rpc_server_calls_finished_total{code="OK",'
            'function="echo",worker="worker1"} 5') in merged, merged
    for family in ("ferry_rpc_server_calls_started_total",
                   "ferry_rpc_server_call_duration_seconds_bucket",
                   "ferry_peer_sent_bytes_total",
                   "ferry_peer_received_bytes_total",
                   "ferry_collectives_total",
                   "ferry_collective_duration_seconds_bucket",
                   "ferry_rrefs_owned", "ferry_rref_forks_held",
                   "ferry_mailbox_bytes", "ferry_peers",
                   "ferry_heartbeat_rtt_seconds_count"):
        assert f"\n{family}{{" in merged, family

    status = json.loads(ctl(ferryctl, *master, "status",
                            "--format=json").stdout)
    targets = [w["metrics_address"] for w in status["workers"]]
    assert all(targets), status
    served = urllib.request.urlopen(f"http://{targets[1]}/metrics",
                                    timeout=30).read().decode()
    check = subprocess.run(["promtool", "check", "metrics"], input=served,
                           capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr

    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n"
        "scrape_configs:\n  - job_name: ferry\n    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n")
    log = open(tmp_path / "prometheus.log", "w+")
    prometheus = subprocess.Popen(
        ["prometheus", f"--config.file={config}",
         f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT)
    def query(q):
        """The value of instant query `q` (its first series), or None."""
        assert prometheus.poll() is None, open(log.name).read()
        url = (f"http://127.0.0.1:{port}/api/v1/query?"
               + urllib.parse.urlencode({"query": q}))
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                result = json.load(r)["data"]["result"]
        except OSError:
            return None  # Not listening yet.
        return result[0]["value"][1] if result else None

    try:
        calls = ('ferry_rpc_server_calls_finished_total{worker="worker1",'
                 'function="echo",code="OK"}')
        assert wait_until("Prometheus to scrape worker1",
                          lambda: query(calls)) == "5"
        wait_until("every worker scraped",
                   lambda: query('sum(up{job="ferry"})') == "3")
    finally:
        prometheus.terminate()
        prometheus.wait(30)
