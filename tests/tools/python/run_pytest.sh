#!/usr/bin/env bash
# Runs one Python test file with Debian's python3 and pytest, `import ferry`
# from the built package in the runfiles; `--peers FILE`: with the peers
# environment's python (torch 2.x, numpy 2.x: `tools/dev peers` installs it
# and tells bazel where, in FERRY_PEERS_PYTHON).
set -euo pipefail
python=/usr/bin/python3
if [ "$1" = "--peers" ]; then
  python="${FERRY_PEERS_PYTHON:-}"
  if [ -z "$python" ] || [ ! -x "$python" ]; then
    echo "run_pytest: the peers environment is not installed (FERRY_PEERS_PYTHON='$python'): run tools/dev peers" >&2
    exit 1
  fi
  shift
fi
root="${TEST_SRCDIR:?}/ferry"
export PYTHONPATH="$root/tools/python/site:$root/tests/tools/python"
module="$root/tools/python/site/ferry/_ferry.so"
# Under --config=asan the module needs the sanitizer runtimes loaded first
# (python3 itself is not instrumented); Python's own allocations at exit are
# not leaks of ours. GCC's module names libasan; clang's (the everyday
# compiler) names nothing and leaves __asan_* undefined, for clang's shared
# runtime (which carries UBSan's handlers too). (grep reads all of the
# input: with pipefail, `grep -q` could exit first and fail the pipeline by
# the writer's SIGPIPE.)
if ldd "$module" | grep libasan >/dev/null; then
  LD_PRELOAD="$(gcc -print-file-name=libasan.so):$(gcc -print-file-name=libubsan.so)"
elif nm -D --undefined-only "$module" | grep __asan_init >/dev/null; then
  LD_PRELOAD="$(clang -print-file-name=libclang_rt.asan-x86_64.so)"
fi
if [ -n "${LD_PRELOAD:-}" ]; then
  export LD_PRELOAD
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi
cd "$root"
exec "$python" -m pytest -q -p no:cacheprovider \
  --basetemp="${TEST_TMPDIR:?}/pytest" "$root/tests/tools/python/$1"
