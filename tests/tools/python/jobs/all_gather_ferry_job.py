"""tf_reference_test.py's ferry job: all_gather_cases.py's cases in
ferry.all_gather(value, axis) on 2 workers (numpy values, as tf's are
numpy-backed); saves what each rank got to OUT_DIR.

    python -m ferry.launch -n 2 all_gather_ferry_job.py OUT_DIR
"""
import sys

import ferry

import all_gather_cases as cases

out_dir = sys.argv[1]
ferry.init(timeout=60)
rank = ferry.rank()
assert ferry.world_size() == 2, "run with 2 workers"

results, errors = {}, {}
for name, (axis, *by_rank) in cases.CASES.items():
    results[name] = ferry.all_gather(by_rank[rank], axis=axis)
for name, (axis, *by_rank) in cases.REFUSED.items():
    try:
        results[name] = ferry.all_gather(by_rank[rank], axis=axis)
    except ferry.Error as e:  # What ferry raises is what the test records.
        errors[name] = (type(e).__name__, str(e))
# The first case again: whether the group goes on after the refusals.
axis, *by_rank = cases.CASES[cases.AFTER]
try:
    results["after"] = ferry.all_gather(by_rank[rank], axis=axis)
except ferry.Error as e:
    errors["after"] = (type(e).__name__, str(e))
cases.save(out_dir, "ferry", rank, results, errors)
ferry.shutdown()
