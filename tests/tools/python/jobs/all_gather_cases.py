"""The cases of tf_reference_test.py: tf.distribute.ReplicaContext.
all_gather's documentation examples (the seed page) and what the page says
tf refuses, as numpy values by rank, for a 2-rank job. all_gather_tf_job.py
runs them on tf.distribute, all_gather_ferry_job.py on ferry; both write
what each rank got with save()."""
import json
import os

import numpy as np


def _i32(x):
    return np.array(x, dtype=np.int32)


def _value(rank, *by_rank):
    return by_rank[rank]


# name -> (axis, value of rank 0, value of rank 1). Tensors are int32 as tf's
# tf.constant of Python ints makes them.
CASES = {
    # The page's single tensor.
    "single": (0, _i32([1, 2, 3]), _i32([1, 2, 3])),
    # The page's nested list.
    "nest": (0, [_i32([1, 2, 3]), _i32([[1, 2], [3, 4]])],
             [_i32([1, 2, 3]), _i32([[1, 2], [3, 4]])]),
    # The page's uneven dict (its printed 'a' is [1, 2] by mistake).
    "uneven": (0, {"a": _i32([0]), "b": _i32([[0, 1]])},
               {"a": _i32([1]), "b": _i32([[2, 3], [4, 5]])}),
    # The page's shapes (1, 2, 3) and (1, 3, 3): allowed along axis 1.
    "axis1": (1, np.arange(6, dtype=np.float32).reshape(1, 2, 3),
              -np.arange(9, dtype=np.float32).reshape(1, 3, 3)),
    # A tuple along axis 2: a float64 tensor uneven along it.
    "axis2": (2, (_i32([[[0], [1]]]), np.float64([[[1.5, 2.5]]])),
              (_i32([[[2], [3]]]), np.float64([[[3.5]]]))),
}

# What tf refuses, run after the cases above (a failed collective may leave
# a tf group unusable): a rank-0 value, and the page's shapes (1, 2, 3) and
# (1, 3, 3) along axis 0 (they differ off the axis).
REFUSED = {
    "scalar": (0, _i32(5), _i32(7)),
    "off_axis": (0, np.zeros((1, 2, 3), np.float32),
                 np.ones((1, 3, 3), np.float32)),
}

# Run once more after REFUSED, saved as "after".
AFTER = "single"


def flatten(value, path=""):
    """(path, array) for every tensor of a nest, in a fixed order."""
    if isinstance(value, dict):
        for k in sorted(value):
            yield from flatten(value[k], f"{path}/{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from flatten(v, f"{path}/{i}")
    else:
        yield path, np.asarray(value)


def save(out_dir, who, rank, results, errors):
    """results: case -> nest of arrays; errors: case -> (type, message)."""
    arrays = {f"{case}{path}": a for case, nest in results.items()
              for path, a in flatten(nest)}
    np.savez(os.path.join(out_dir, f"{who}_{rank}.npz"), **arrays)
    with open(os.path.join(out_dir, f"{who}_{rank}.json"), "w") as f:
        json.dump({case: {"type": t, "message": m}
                   for case, (t, m) in errors.items()}, f)
