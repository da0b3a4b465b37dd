"""torchrec_reference_test.py's job, on a process group of BACKEND ("ferry"
or "gloo"), 2 ranks started with RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; writes what the rank got to OUT_DIR/BACKEND_RANK.json.

1. The seed page's SparseFeaturesAllToAll example through TorchRec's own
   input distribution (current TorchRec: torchrec.distributed.dist_data.
   KJTAllToAll, one per feature kind, with its splits and tensors
   awaitables), then the same with variable batch per feature (VBE: each
   key its own batch size on each rank, stride_per_key_per_rank); checks
   the page's expected output (and VBE's).
2. An EmbeddingBagCollection of a table-wise and a column-wise sharded
   table (TorchRec offers row-wise on CUDA and TPU only) under
   DistributedModelParallel on CPU, trained 3 steps (SGD fused into the
   backward); its pooled embeddings of a fixed batch before and after.

    torchrec_reference_job.py BACKEND OUT_DIR
"""
import json
import os
import sys

import torch
import torch.distributed as dist
from torchrec import EmbeddingBagCollection, EmbeddingBagConfig
from torchrec.distributed.dist_data import KJTAllToAll
from torchrec.distributed.embeddingbag import EmbeddingBagCollectionSharder
from torchrec.distributed.model_parallel import DistributedModelParallel
from torchrec.distributed.planner import EmbeddingShardingPlanner, Topology
from torchrec.distributed.planner.types import ParameterConstraints
from torchrec.distributed.types import ShardingType
from torchrec.optim.apply_optimizer_in_backward import (
    apply_optimizer_in_backward)
from torchrec.sparse.jagged_tensor import KeyedJaggedTensor

import ferry.distributed  # noqa: F401 -- registers "ferry"

backend, out_dir = sys.argv[1], sys.argv[2]
dist.init_process_group(backend)
pg = dist.group.WORLD
rank = dist.get_rank()
assert dist.get_world_size() == 2, "run with 2 processes"

# The page's X.Vi as numbers: A.V3 is 13; weights are the values / 10.
BASE = {"A": 10, "B": 20, "C": 30, "D": 40}


def kjt(table, weighted=False, strides=None):
    """A KeyedJaggedTensor of {key: samples}, a sample a list or None;
    strides: variable batch per feature (VBE), each key's batch size on
    each rank it came from (stride_per_key_per_rank)."""
    keys = list(table)
    lengths, values = [], []
    for key in keys:
        for sample in table[key]:
            sample = sample or []
            lengths.append(len(sample))
            values += [BASE[key] + i for i in sample]
    values = torch.tensor(values, dtype=torch.int64)
    return KeyedJaggedTensor(
        keys, values, weights=values.float() / 10 if weighted else None,
        lengths=torch.tensor(lengths, dtype=torch.int32),
        stride_per_key_per_rank=strides)


def vbe(table, weighted=False):
    """kjt() with each key's own batch size (this rank's only)."""
    return kjt(table, weighted, [[len(table[k])] for k in table])


def as_json(k):
    shape = ({"stride_per_key_per_rank": k.stride_per_key_per_rank()}
             if k.variable_stride_per_key() else {"stride": k.stride()})
    return {"keys": k.keys(), **shape,
            "lengths": k.lengths().tolist(), "values": k.values().tolist(),
            "weights": (None if k.weights_or_none() is None
                        else k.weights().tolist())}


# 1. The seed page's example, through KJTAllToAll. The page's inputs:
id_list = [
    {"A": [[0], None, [1, 2]], "B": [None, [0], [1]], "C": [[0], [1], None]},
    {"A": [[3], [4], None], "B": [None, [2], [3, 4]], "C": [[2], [3], None]},
][rank]
d = [{"D": [None, [0], None]}, {"D": [[1], [2], [3, 4]]}][rank]
features = {"id_list": (kjt(id_list), [2, 1]),
            "id_score_list": (kjt({**id_list, **d}, weighted=True), [1, 3])}
# Variable batch per feature (VBE): each key its own batch size on each
# rank (A: 1 and 2, B: 3 and 1, C: 2 and 3, D: 0 and 2), the same values.
vbe_list = [
    {"A": [[0]], "B": [None, [0], [1]], "C": [[0], [1]]},
    {"A": [[3], [4]], "B": [[2, 3, 4]], "C": [[2], None, [3]]},
][rank]
vbe_d = [{"D": []}, {"D": [[1], [2]]}][rank]
features["vbe_id_list"] = (vbe(vbe_list), [2, 1])
features["vbe_id_score_list"] = (vbe({**vbe_list, **vbe_d}, weighted=True),
                                 [1, 3])

# All four started before any is waited on, as TorchRec's input dist does:
# forward() starts the splits all-to-all, the first wait() the tensors', the
# second wait() gives the KeyedJaggedTensor.
splits = {name: KJTAllToAll(pg, per_rank)(k)
          for name, (k, per_rank) in features.items()}
tensors = {name: a.wait() for name, a in splits.items()}
got = {name: a.wait() for name, a in tensors.items()}

# The page's output: every key's six samples, rank 0's then rank 1's.
both = {
    "A": [[0], None, [1, 2], [3], [4], None],
    "B": [None, [0], [1], None, [2], [3, 4]],
    "C": [[0], [1], None, [2], [3], None],
    "D": [None, [0], None, [1], [2], [3, 4]],
}
want = {"id_list": [["A", "B"], ["C"]][rank],
        "id_score_list": [["A"], ["B", "C", "D"]][rank]}
for name, keys in want.items():
    page = kjt({k: both[k] for k in keys}, name == "id_score_list")
    assert as_json(got[name]) == as_json(page), (name, got[name], page)
# VBE: each key's samples from rank 0 then rank 1, and its batch sizes.
vbe_both = {
    "A": ([[0], [3], [4]], [1, 2]),
    "B": ([None, [0], [1], [2, 3, 4]], [3, 1]),
    "C": ([[0], [1], [2], None, [3]], [2, 3]),
    "D": ([[1], [2]], [0, 2]),
}
for name, keys in want.items():
    weighted = name == "id_score_list"
    expected = kjt({k: vbe_both[k][0] for k in keys}, weighted,
                   [vbe_both[k][1] for k in keys])
    got_vbe = got["vbe_" + name]
    assert as_json(got_vbe) == as_json(expected), (name, got_vbe, expected)

results = {name: as_json(k) for name, k in got.items()}


# 2. Sharded embeddings under DistributedModelParallel.

def batch(seed):
    """A batch of 4 samples of f_tw and f_cw, 0-2 ids each (this rank's)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, 3, (2 * 4,), generator=g)
    values = torch.randint(0, 10, (int(lengths.sum()),), generator=g)
    return KeyedJaggedTensor.from_lengths_sync(["f_tw", "f_cw"], values,
                                               lengths)


def pooled(model, kjt):
    out = model(kjt)
    out = out.wait() if hasattr(out, "wait") else out  # A LazyAwaitable.
    return out


torch.manual_seed(0)  # The tables' initial weights, the same on both.
ebc = EmbeddingBagCollection(device=torch.device("meta"), tables=[
    EmbeddingBagConfig(name="t_tw", embedding_dim=4, num_embeddings=10,
                       feature_names=["f_tw"]),
    EmbeddingBagConfig(name="t_cw", embedding_dim=8, num_embeddings=10,
                       feature_names=["f_cw"])])
apply_optimizer_in_backward(torch.optim.SGD, ebc.parameters(), {"lr": 0.1})
sharders = [EmbeddingBagCollectionSharder()]
planner = EmbeddingShardingPlanner(
    topology=Topology(world_size=2, compute_device="cpu"), constraints={
        "t_tw": ParameterConstraints(
            sharding_types=[ShardingType.TABLE_WISE.value]),
        # Two column shards of 4, one per rank.
        "t_cw": ParameterConstraints(
            sharding_types=[ShardingType.COLUMN_WISE.value],
            min_partition=4)})
plan = planner.collective_plan(ebc, sharders, pg)
model = DistributedModelParallel(ebc, device=torch.device("cpu"),
                                 plan=plan, sharders=sharders)
fixed = batch(7 + rank)
with torch.no_grad():
    before = pooled(model, fixed)
losses = []
for step in range(3):
    out = pooled(model, batch(100 * step + rank)).values()
    loss = (out * torch.arange(out.numel()).view_as(out)).sum()
    loss.backward()
    losses.append(loss.item())
with torch.no_grad():
    after = pooled(model, fixed)
results["dmp"] = {
    "plan": {t: [s.sharding_type, len(s.ranks)] for t, s in
             plan.get_plan_for_module("").items()},
    "losses": losses,
    "before": {k: before[k].tolist() for k in before.keys()},
    "after": {k: after[k].tolist() for k in after.keys()}}

with open(os.path.join(out_dir, f"{backend}_{rank}.json"), "w") as f:
    json.dump(results, f)
dist.destroy_process_group()
