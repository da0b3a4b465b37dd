"""TorchRec itself as the reference for ferry's process group (issue 52,
item 3), on a "ferry" process group and on gloo, 2 ranks each
(jobs/torchrec_reference_job.py); both must give the same results:
- the seed page's SparseFeaturesAllToAll example — its keys, lengths and
  expected outputs, which the job checks on each rank — through TorchRec's
  own input distribution (torchrec.distributed.dist_data.KJTAllToAll and
  its awaitables, on TorchRec's KeyedJaggedTensor), and the same with
  variable batch per feature (VBE: stride_per_key_per_rank);
- an EmbeddingBagCollection with a table-wise and a column-wise sharded
  table under DistributedModelParallel on CPU, trained 3 steps: its losses
  and pooled embeddings before and after, bit for bit.
The peers environment's python only (TorchRec 1.9.2 on fbgemm-gpu-cpu
1.9.0): torchrec_reference_test_peers.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

import conftest

JOB = conftest.script("tests/tools/python/jobs/torchrec_reference_job.py")
TIMEOUT = 240  # torch's and TorchRec's imports, 4 processes on 2 cores.
RANKS = (0, 1)
BACKENDS = ("gloo", "ferry")


def start(backend, out_dir):
    """The job's 2 ranks on `backend`, each writing to a file of its own."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(conftest.free_port()), WORLD_SIZE="2")
    procs = []
    for rank in RANKS:
        log = tempfile.TemporaryFile()
        procs.append((subprocess.Popen(
            [sys.executable, JOB, backend, out_dir],
            env=dict(env, RANK=str(rank)), stdout=log,
            stderr=subprocess.STDOUT), log))
    return procs


def finish(backend, procs):
    failed = []
    for rank, (proc, log) in zip(RANKS, procs):
        try:
            proc.wait(timeout=TIMEOUT)
        finally:
            proc.kill()
        log.seek(0)
        out = log.read().decode(errors="replace")
        log.close()
        if proc.returncode != 0:
            failed.append(f"{backend} rank {rank} exited "
                          f"{proc.returncode}:\n{out}")
    return failed


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """backend -> rank -> feature kind -> the KJT it got, as JSON."""
    out_dir = str(tmp_path_factory.mktemp("torchrec"))
    # gloo and ferry at once (their own stores and ports): the imports
    # dominate.
    started = {backend: start(backend, out_dir) for backend in BACKENDS}
    failed = [f for backend, procs in started.items()
              for f in finish(backend, procs)]
    assert not failed, "\n".join(failed)
    got = {}
    for backend in BACKENDS:
        for rank in RANKS:
            path = os.path.join(out_dir, f"{backend}_{rank}.json")
            with open(path) as f:
                got.setdefault(backend, {})[rank] = json.load(f)
    return got


KINDS = ("id_list", "id_score_list", "vbe_id_list", "vbe_id_score_list",
         "dmp")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("rank", RANKS)
def test_ferry_matches_gloo(results, kind, rank):
    assert results["ferry"][rank][kind] == results["gloo"][rank][kind]


def test_the_pages_keys_and_batches(results):
    """What the page shows (the job checked every length and value): rank
    0 gets A, B (ids) and A (scores), rank 1 C and B, C, D, six samples per
    key; with VBE each key has each source rank's own batch size."""
    for backend in BACKENDS:
        r0, r1 = results[backend][0], results[backend][1]
        assert r0["id_list"]["keys"] == ["A", "B"]
        assert r1["id_list"]["keys"] == ["C"]
        assert r0["id_score_list"]["keys"] == ["A"]
        assert r1["id_score_list"]["keys"] == ["B", "C", "D"]
        assert r0["id_list"]["stride"] == 6
        assert r0["id_list"]["lengths"] == [1, 0, 2, 1, 1, 0,
                                            0, 1, 1, 0, 1, 2]
        assert r0["id_list"]["values"] == [10, 11, 12, 13, 14,
                                           20, 21, 22, 23, 24]
        assert r1["id_score_list"]["weights"] is not None
        assert r0["vbe_id_list"]["stride_per_key_per_rank"] == [[1, 2],
                                                                [3, 1]]
        assert r1["vbe_id_score_list"]["stride_per_key_per_rank"] == [
            [3, 1], [2, 3], [0, 2]]


def test_dmp_sharded_and_trained(results):
    """The plan is the one asked for (row-wise is CUDA/TPU-only in TorchRec
    1.9, so column-wise in two shards), and training moved the tables."""
    for backend in BACKENDS:
        for rank in RANKS:
            dmp = results[backend][rank]["dmp"]
            assert dmp["plan"] == {"t_tw": ["table_wise", 1],
                                   "t_cw": ["column_wise", 2]}, dmp["plan"]
            assert len(dmp["losses"]) == 3
            assert dmp["before"] != dmp["after"], (backend, rank)
