"""TorchRec's input distribution, as TorchRec does it, on a ferry process
group: the seed page's SparseFeaturesAllToAll example, with the jagged
all-to-all written the way TorchRec's KJTAllToAll writes it — all_to_all of
the split sizes, then of lengths, values and weights with those splits
(``dist.all_to_all_single`` on the "ferry" backend), then TorchRec's
``_recat`` permutation — checked against ferry's native KJT all-to-all
(``ferry.SparseFeaturesAllToAll(pg, ...)``, one call) and the page's
expected output.

    tools/dev python -m torch.distributed.run --nproc_per_node=2 \\
        --redirects=2 --tee=2 \\
        tools/python/examples/torchrec_input_dist.py
"""
import torch
import torch.distributed as dist

import ferry
import ferry.distributed  # noqa: F401 -- registers "ferry"

dist.init_process_group("ferry")
pg = dist.group.WORLD
rank, world = dist.get_rank(), dist.get_world_size()
assert world == 2, "run with 2 processes"


# ---- TorchRec's KJTAllToAll, in plain torch over a ProcessGroup ----

def _recat(local_split, num_splits, stagger=1):
    """TorchRec's permutation of received (source, feature) rows into
    (feature, source) order, sources in the staggered order."""
    order = [x + num_splits // stagger * y
             for x in range(num_splits // stagger) for y in range(stagger)]
    return [i + j * local_split for i in range(local_split) for j in order]


def _permute_rows(rows, lengths, values, weights):
    """Rows (one per (source, feature), each `lengths` row's values) in the
    order `rows` (fbgemm's permute_2D_sparse_data, written out)."""
    per_row = lengths.sum(dim=1)
    starts = torch.cumsum(per_row, 0) - per_row
    pick = [torch.arange(int(starts[r]), int(starts[r] + per_row[r]))
            for r in rows]
    index = torch.cat(pick) if pick else torch.zeros(0, dtype=torch.int64)
    return (lengths[rows], values[index],
            None if weights is None else weights[index])


def kjt_all_to_all(kjt, features_per_rank, group, stagger=1):
    """Rank r gets features_per_rank[r] consecutive keys of every rank's
    KJT, batches concatenated: TorchRec's KJTAllToAll."""
    world = dist.get_world_size(group)
    me = dist.get_rank(group)
    stride = kjt.stride()
    cut = [0]
    for f in features_per_rank:
        cut.append(cut[-1] + f)
    lengths = kjt.lengths().view(-1, stride)  # A row per key.
    weights = kjt.weights_or_none()
    # What goes to each rank: its keys' lengths rows and their values.
    length_splits = [(cut[r + 1] - cut[r]) * stride for r in range(world)]
    value_splits = [int(lengths[cut[r]:cut[r + 1]].sum())
                    for r in range(world)]
    # 1. The split sizes, so each rank knows what it will receive.
    splits_in = torch.tensor([[length_splits[r], value_splits[r]]
                              for r in range(world)], dtype=torch.int64)
    splits_out = torch.empty_like(splits_in)
    dist.all_to_all_single(splits_out, splits_in, group=group)
    out_lengths, out_values = splits_out[:, 0].tolist(), \
        splits_out[:, 1].tolist()
    # 2. Lengths, values (and weights), uneven, with those splits.
    got_lengths = torch.empty(sum(out_lengths), dtype=lengths.dtype)
    dist.all_to_all_single(got_lengths, lengths.flatten(), out_lengths,
                           length_splits, group=group)
    got_values = torch.empty(sum(out_values), dtype=kjt.values().dtype)
    dist.all_to_all_single(got_values, kjt.values(), out_values,
                           value_splits, group=group)
    got_weights = None
    if weights is not None:
        got_weights = torch.empty(sum(out_values), dtype=weights.dtype)
        dist.all_to_all_single(got_weights, weights, out_values,
                               value_splits, group=group)
    # 3. TorchRec's recat: (source, feature) rows to (feature, source).
    mine = features_per_rank[me]
    rows = _recat(mine, world, stagger)
    got_lengths = got_lengths.view(world * mine, stride)
    lengths_r, values_r, weights_r = _permute_rows(rows, got_lengths,
                                                   got_values, got_weights)
    keys = kjt.keys()[cut[me]:cut[me + 1]]
    return ferry.KeyedJaggedTensor.from_lengths_sync(
        keys, values_r, lengths_r.flatten(), weights=weights_r)


# ---- The seed page's features (X.Vi written as numbers, as in
# sparse_features_all_to_all.py) ----

BASE = {"A": 10, "B": 20, "C": 30, "D": 40}


def kjt(table, weighted=False):
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
id_list_features = kjt(id_list)
id_score_list_features = kjt({**id_list, **d}, weighted=True)
id_list_features_per_rank = [2, 1]
id_score_list_features_per_rank = [1, 3]

# TorchRec's way, through dist.all_to_all_single on the ferry group.
by_torch = (
    kjt_all_to_all(id_list_features, id_list_features_per_rank, pg),
    kjt_all_to_all(id_score_list_features, id_score_list_features_per_rank,
                   pg))
# ferry's native jagged all-to-all on the same group.
native = ferry.SparseFeaturesAllToAll(
    pg, id_list_features_per_rank, id_score_list_features_per_rank)(
        ferry.SparseFeatures(id_list_features=id_list_features,
                             id_score_list_features=id_score_list_features)
    ).wait()

both = {  # The page's output: every key's six samples, rank 0's then 1's.
    "A": [[0], None, [1, 2], [3], [4], None],
    "B": [None, [0], [1], None, [2], [3, 4]],
    "C": [[0], [1], None, [2], [3], None],
    "D": [None, [0], None, [1], [2], [3, 4]],
}
expected = ([["A", "B"], ["C"]][rank], [["A"], ["B", "C", "D"]][rank])
for torch_way, ferry_way, keys, weighted in [
        (by_torch[0], native.id_list_features, expected[0], False),
        (by_torch[1], native.id_score_list_features, expected[1], True)]:
    want = kjt({k: both[k] for k in keys}, weighted)
    for got in (torch_way, ferry_way):
        assert got.keys() == want.keys(), (got.keys(), want.keys())
        assert torch.equal(got.lengths(), want.lengths())
        assert torch.equal(got.values(), want.values())
        if weighted:
            assert torch.equal(got.weights(), want.weights())
print(f"rank {rank}: TorchRec's all_to_all_single way on the ferry group "
      f"equals ferry's native KJT all-to-all: {native.id_list_features}")
dist.destroy_process_group()
