#!/usr/bin/env bash
# Runs one Python test file with Debian's python3 and pytest, `import ferry`
# from the built package in the runfiles.
set -euo pipefail
root="${TEST_SRCDIR:?}/ferry"
export PYTHONPATH="$root/tools/python/site:$root/tests/tools/python"
cd "$root"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider \
  --basetemp="${TEST_TMPDIR:?}/pytest" "$root/tests/tools/python/$1"
