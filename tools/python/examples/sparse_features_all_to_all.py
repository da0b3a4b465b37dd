"""TorchRec's SparseFeaturesAllToAll documentation example, on 2 workers.

    tools/dev python -m ferry.launch -n 2 tools/python/examples/sparse_features_all_to_all.py

The page's features, with X.Vi written as numbers (A.V3 is 13, D.V1 is 41;
an id-score's weight is its id / 10). Rank 0 gets keys A, B of the id lists
and A of the id-score lists; rank 1 the rest; per key, both ranks' batches.
"""
import torch

import ferry

ferry.init()
rank = ferry.rank()
assert ferry.world_size() == 2, "run with 2 workers"

BASE = {"A": 10, "B": 20, "C": 30, "D": 40}


def kjt(table, weighted=False):
    """{key: [per-sample [value index, ...] or None]} → KeyedJaggedTensor."""
    keys = list(table)
    lengths, values = [], []
    for key in keys:
        for sample in table[key]:
            sample = sample or []
            lengths.append(len(sample))
            values += [BASE[key] + i for i in sample]
    values = torch.tensor(values, dtype=torch.int64)
    return ferry.KeyedJaggedTensor.from_lengths_sync(
        keys, values, torch.tensor(lengths, dtype=torch.int64),
        weights=values.float() / 10 if weighted else None)


id_list = [
    {"A": [[0], None, [1, 2]], "B": [None, [0], [1]], "C": [[0], [1], None]},
    {"A": [[3], [4], None], "B": [None, [2], [3, 4]], "C": [[2], [3], None]},
][rank]
d = [{"D": [None, [0], None]}, {"D": [[1], [2], [3, 4]]}][rank]
rank_input = ferry.SparseFeatures(
    id_list_features=kjt(id_list),
    id_score_list_features=kjt({**id_list, **d}, weighted=True))

id_list_features_per_rank = [2, 1]
id_score_list_features_per_rank = [1, 3]
sfa2a = ferry.SparseFeaturesAllToAll(
    None, id_list_features_per_rank, id_score_list_features_per_rank)
awaitable = sfa2a(rank_input)
rank_output = awaitable.wait()
print(f"id_list_features: {rank_output.id_list_features}")
print(f"id_score_list_features: {rank_output.id_score_list_features}")

both = {  # Every key's six samples: rank 0's batch, then rank 1's.
    "A": [[0], None, [1, 2], [3], [4], None],
    "B": [None, [0], [1], None, [2], [3, 4]],
    "C": [[0], [1], None, [2], [3], None],
    "D": [None, [0], None, [1], [2], [3, 4]],
}
expected_id_list = [["A", "B"], ["C"]][rank]
expected_id_score_list = [["A"], ["B", "C", "D"]][rank]
for got, keys, weighted in [
        (rank_output.id_list_features, expected_id_list, False),
        (rank_output.id_score_list_features, expected_id_score_list, True)]:
    want = kjt({k: both[k] for k in keys}, weighted)
    assert got.keys() == want.keys(), (got.keys(), want.keys())
    assert got.stride() == 6
    assert torch.equal(got.lengths(), want.lengths())
    assert torch.equal(got.values(), want.values())
    if weighted:
        assert torch.equal(got.weights(), want.weights())
    else:
        assert got.weights_or_none() is None

ferry.shutdown()
