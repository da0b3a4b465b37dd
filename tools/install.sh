#!/usr/bin/env bash
# Installs ferry's commands, library and public headers under PREFIX:
#
#   PREFIX/bin/ferryd, ferryctl
#   PREFIX/lib/libferry.so, libferry.a
#   PREFIX/include/ferry/ferry.h and exactly the headers it includes, as
#                     ferry/<their path> (an older install's are removed)
#   PREFIX/lib/pkgconfig/ferry.pc
#   PREFIX/lib/python3/dist-packages/ferry/   the Python package, if built
#                                            (PYTHONPATH=PREFIX/lib/python3/dist-packages)
#   PREFIX/lib/python3/dist-packages/ferry.dist-info/   its metadata (entry
#                                            points: torchrun's ferry-etcd)
#
# Usage: install.sh PREFIX BUILT
#   BUILT    where Bazel put tools/ferryd, tools/ferryctl, libferry.a,
#            libferry.so, ferry_headers/include (//:ferry_headers) and
#            tools/python/site/ferry (bazel-bin)
# `tools/dev install` builds (optimized) and runs this.
set -euo pipefail

prefix=$1 built=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# The Abseil libraries ferry's headers and library use (their pkg-config
# names; each brings what it needs).
ABSL="absl_status absl_statusor absl_synchronization absl_time absl_strings
      absl_str_format absl_cord absl_hash absl_raw_hash_set absl_random_random
      absl_flags_parse"

install -d "$prefix/bin" "$prefix/lib/pkgconfig" "$prefix/include"
install -m 0755 "$built/tools/ferryd" "$built/tools/ferryctl" "$prefix/bin/"
install -m 0644 "$built/libferry.a" "$prefix/lib/"
install -m 0755 "$built/libferry.so" "$prefix/lib/"
rm -rf "$prefix/include/ferry"
(cd "$built/ferry_headers/include" && find -L ferry -type f -name '*.h') |
  while IFS= read -r header; do
    install -D -m 0644 "$built/ferry_headers/include/$header" "$prefix/include/$header"
  done
# A library built under the sanitizers (--config=asan) links only into a
# program built with them too: its runtime must come first in the process.
sanitize=""
if nm -u "$built/libferry.so" 2>/dev/null | grep '__asan_init' >/dev/null; then
  sanitize="-fsanitize=address,undefined"
fi
# The version ferryd was built with (tools/python/ferry/_version.py).
version=$("$built/tools/ferryd" --version)
version=${version#ferryd }
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" \
  -e "s|@ABSL@|$(echo $ABSL)|" -e "s|@SANITIZE@|$sanitize|g" \
  "$here/ferry.pc.in" >"$prefix/lib/pkgconfig/ferry.pc"
if [ -d "$built/tools/python/site/ferry" ]; then
  site="$built/tools/python/site"
  python_dir="$prefix/lib/python3/dist-packages/ferry"
  install -d "$python_dir" "$python_dir/rpc" "$python_dir.dist-info"
  # The modules (ferry.rpc's too), the extension's types and the typed
  # marker (PEP 561).
  install -m 0644 "$site"/ferry/*.py "$site/ferry/_ferry.pyi" \
    "$site/ferry/py.typed" "$python_dir/"
  install -m 0644 "$site"/ferry/rpc/*.py "$python_dir/rpc/"
  install -m 0755 "$site/ferry/_ferry.so" "$python_dir/"
  # Its metadata: torchrun finds --rdzv-backend=ferry-etcd there.
  install -m 0644 "$site"/ferry.dist-info/* "$python_dir.dist-info/"
fi
echo "installed ferry under $prefix (pkg-config: PKG_CONFIG_PATH=$prefix/lib/pkgconfig; Python: PYTHONPATH=$prefix/lib/python3/dist-packages)"
