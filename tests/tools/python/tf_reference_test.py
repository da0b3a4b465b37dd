"""TensorFlow as the reference for ferry's all_gather(value, axis) (issue
52, item 4): the seed page's tf.distribute.ReplicaContext.all_gather
examples (a single tensor, a nested list, the uneven nested dict, the
page's (1, 2, 3) / (1, 3, 3) shapes along axis 1; a tuple along axis 2)
and what the page says
tf refuses (a rank-0 value; shapes differing off the axis) and a gather
after those (tf's group is aborted, ferry's goes on), run once on
real tf.distribute (MultiWorkerMirroredStrategy on CPU: two worker
processes, TF_CONFIG on loopback ports) and once on ferry (2 workers),
both at the same time; each rank's results, saved as npz/JSON
(jobs/all_gather_cases.py), are compared value by value, dtype by dtype
and shape by shape. The peers environment's python only (tensorflow-cpu):
tf_reference_test_peers.
"""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import conftest

JOBS = conftest.script("tests/tools/python/jobs")
sys.path.insert(0, JOBS)
import all_gather_cases as cases  # noqa: E402

TIMEOUT = 240  # tf's import alone is 10-20 s per process, more when loaded.
RANKS = (0, 1)


def start_tf(out_dir):
    """The two tf workers, started; their output goes to files."""
    ports = [conftest.free_port()]
    while len(ports) < len(RANKS):  # Each freed port could come back.
        port = conftest.free_port()
        if port not in ports:
            ports.append(port)
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    procs = []
    for rank in RANKS:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": {
                       "type": "worker", "index": rank}}))
        log = open(os.path.join(out_dir, f"tf_{rank}.log"), "wb")
        procs.append((subprocess.Popen(
            [sys.executable, os.path.join(JOBS, "all_gather_tf_job.py"),
             out_dir], env=env, stdout=log, stderr=subprocess.STDOUT), log))
    return procs


def wait_tf(procs, out_dir):
    for rank, (proc, log) in zip(RANKS, procs):
        try:
            proc.wait(timeout=TIMEOUT)
        finally:
            proc.kill()
            log.close()
        with open(os.path.join(out_dir, f"tf_{rank}.log"), "rb") as f:
            out = f.read().decode(errors="replace")
        assert proc.returncode == 0, f"tf worker {rank} failed:\n{out}"


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """who -> rank -> (arrays by 'case/path', errors by case)."""
    out_dir = str(tmp_path_factory.mktemp("all_gather"))
    procs = start_tf(out_dir)
    try:
        conftest.launch(os.path.join(JOBS, "all_gather_ferry_job.py"), 2,
                        out_dir, timeout=TIMEOUT)
    finally:
        wait_tf(procs, out_dir)
    got = {}
    for who in ("tf", "ferry"):
        for rank in RANKS:
            base = os.path.join(out_dir, f"{who}_{rank}")
            with np.load(base + ".npz") as npz:
                arrays = {k: npz[k] for k in npz.files}
            with open(base + ".json") as f:
                got.setdefault(who, {})[rank] = (arrays, json.load(f))
    return got


def case_arrays(arrays, case):
    return {k: v for k, v in arrays.items() if k.split("/")[0] == case}


@pytest.mark.parametrize("case", sorted(cases.CASES))
@pytest.mark.parametrize("rank", RANKS)
def test_ferry_gathers_what_tf_gathers(results, case, rank):
    tf_arrays = case_arrays(results["tf"][rank][0], case)
    ferry_arrays = case_arrays(results["ferry"][rank][0], case)
    assert tf_arrays, f"tf produced nothing for {case}"
    assert sorted(ferry_arrays) == sorted(tf_arrays)
    for key, want in tf_arrays.items():
        got = ferry_arrays[key]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), key
        np.testing.assert_array_equal(got, want, err_msg=key)


def test_results_are_the_pages(results):
    """The page's printed results (its 'a' corrected to [0, 1]), on every
    rank of both: the comparison above is against the documented ones."""
    page = {
        "single": np.int32([1, 2, 3, 1, 2, 3]),
        "nest/0": np.int32([1, 2, 3, 1, 2, 3]),
        "nest/1": np.int32([[1, 2], [3, 4], [1, 2], [3, 4]]),
        "uneven/a": np.int32([0, 1]),
        "uneven/b": np.int32([[0, 1], [2, 3], [4, 5]]),
    }
    for who in ("tf", "ferry"):
        for rank in RANKS:
            arrays = results[who][rank][0]
            for key, want in page.items():
                got = arrays[key]
                assert got.dtype == want.dtype, (who, rank, key)
                np.testing.assert_array_equal(got, want,
                                              err_msg=f"{who} {rank} {key}")
            assert arrays["axis1"].shape == (1, 5, 3), (who, rank)


@pytest.mark.parametrize("rank", RANKS)
def test_both_refuse_a_rank_0_value(results, rank):
    tf_error = results["tf"][rank][1]["scalar"]
    ferry_error = results["ferry"][rank][1]["scalar"]
    # tf fails building the gather's transpose of a scalar (its check is
    # shape inference's); ferry names the rank and the rule.
    assert tf_error["type"] == "ValueError", tf_error
    assert "Requires start <= limit" in tf_error["message"], tf_error
    assert ferry_error["type"] == "InvalidArgumentError", ferry_error
    assert "0-d tensor" in ferry_error["message"], ferry_error
    assert "rank >= 1" in ferry_error["message"], ferry_error
    assert "scalar" not in results["ferry"][rank][0]


@pytest.mark.parametrize("rank", RANKS)
def test_both_refuse_shapes_differing_off_the_axis(results, rank):
    tf_error = results["tf"][rank][1]["off_axis"]
    ferry_error = results["ferry"][rank][1]["off_axis"]
    # tf's collective fails on the padded shapes ([2, 3, 3] vs [2, 2, 3])
    # and aborts the group; ferry compares the values' metadata first.
    assert tf_error["type"] == "InvalidArgumentError", tf_error
    assert "Shape mismatch" in tf_error["message"], tf_error
    assert ferry_error["type"] == "InvalidArgumentError", ferry_error
    message = ferry_error["message"]
    assert "[1, 3, 3]" in message and "[1, 2, 3]" in message, message
    assert "shapes may differ only along axis 0" in message, message


@pytest.mark.parametrize("rank", RANKS)
def test_after_the_refusals(results, rank):
    """The page's single tensor once more: tf's group was aborted by the
    shape mismatch ("Restart your program to reset"); ferry's refused
    before any data moved, and its group goes on."""
    tf_error = results["tf"][rank][1]["after"]
    assert tf_error["type"] == "InvalidArgumentError", tf_error
    assert "Collective ops is aborted" in tf_error["message"], tf_error
    arrays, errors = results["ferry"][rank]
    assert "after" not in errors, errors
    assert arrays["after"].dtype == arrays[cases.AFTER].dtype
    np.testing.assert_array_equal(arrays["after"], arrays[cases.AFTER])
