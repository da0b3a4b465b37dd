"""The seed pages' examples (tools/python/examples/), each on the number of
Python workers its page uses, with torch tensors."""
import pytest

import conftest


@pytest.mark.parametrize("example, workers", [
    ("all_to_all.py", 4),
    ("sparse_features_all_to_all.py", 2),
    ("all_gather_tf.py", 2),
    ("rpc_remote.py", 2),
])
def test_example(example, workers):
    conftest.launch(conftest.script("tools/python/examples", example), workers)
