"""tf_reference_test.py's tf worker: one of two MultiWorkerMirroredStrategy
workers on CPU (TF_CONFIG names both); runs all_gather_cases.py's cases in
ReplicaContext.all_gather and saves what it got to OUT_DIR.

    all_gather_tf_job.py OUT_DIR   (TF_CONFIG in the environment)
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

import all_gather_cases as cases

out_dir = sys.argv[1]
rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
strategy = tf.distribute.MultiWorkerMirroredStrategy()
assert strategy.num_replicas_in_sync == 2, strategy.num_replicas_in_sync
# A refused gather fails rather than waits (the group's collectives time out).
options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=60)


def gather(axis, value):
    @tf.function
    def run():
        ctx = tf.distribute.get_replica_context()
        return ctx.all_gather(tf.nest.map_structure(tf.constant, value),
                              axis=axis, options=options)
    got = strategy.experimental_local_results(strategy.run(run))
    assert len(got) == 1, got  # One replica per worker.
    return tf.nest.map_structure(lambda t: t.numpy(), got[0])


results, errors = {}, {}
for name, (axis, *by_rank) in cases.CASES.items():
    results[name] = gather(axis, by_rank[rank])
for name, (axis, *by_rank) in cases.REFUSED.items():
    try:
        results[name] = gather(axis, by_rank[rank])
    except Exception as e:  # What tf raises is what the test records.
        errors[name] = (type(e).__name__, str(e))
# The first case again: whether the group goes on after the refusals.
axis, *by_rank = cases.CASES[cases.AFTER]
try:
    results["after"] = gather(axis, by_rank[rank])
except Exception as e:
    errors["after"] = (type(e).__name__, str(e))
cases.save(out_dir, "tf", rank, results, errors)
