#!/usr/bin/env bash
# The ferry package's types, checked by Debian's mypy (python3-mypy) on the
# package as //tools/python:package builds it -- ferry/*.py, the extension's
# stub ferry/_ferry.pyi, ferry/py.typed:
#   1. the package with its own config (tools/python/pyproject.toml's
#      [tool.mypy]: every function annotated, bodies checked, no `type:
#      ignore` that hides nothing);
#   2. typing_usage.py, a program using the public API, with --strict and
#      no config, the package found as an installed one (by its py.typed),
#      as a user's program would see it.
# package_test.py checks the stub against the extension itself.
set -euo pipefail
root="${TEST_SRCDIR:?}/ferry"
site="$root/tools/python/site"
# One cache for the two runs (in the test's own temporary directory): the
# second reuses what the first learned of numpy's and torch's types, the
# larger part of the time.
mypy=(/usr/bin/python3 -m mypy --cache-dir="${TEST_TMPDIR:?}/mypy-cache")

echo "== mypy -p ferry (tools/python/pyproject.toml)"
(cd "$site" && "${mypy[@]}" --config-file pyproject.toml -p ferry)

echo "== mypy --strict typing_usage.py"
cd "${TEST_TMPDIR:?}"
PYTHONPATH="$site" "${mypy[@]}" --config-file "" --strict \
  "$root/tests/tools/python/typing_usage.py"
