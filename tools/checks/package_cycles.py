#!/usr/bin/env python3
"""Fails if the library's Bazel packages include each other in a cycle.

A package is a directory with a BUILD file; package A uses package B when
a file of A includes a header of B ("#include "rpc/auth/node_key.h"").
Bazel forbids cycles between targets, not between packages: two packages
can still lean on each other through different targets, and then neither
can be understood, moved or tested without the other. This walks the
include graph of the library's packages (the project's top-level source
folders, tests excluded: they may use anything; a sub-directory with no
BUILD of its own belongs to its package) and prints every cycle with one
include that makes each of its edges.

  python3 tools/checks/package_cycles.py [REPO_ROOT]   # exit 1 on a cycle
"""
import os
import re
import sys

SOURCE_ROOTS = ("collectives", "proto", "rpc", "rref", "tools")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def packages(root):
    found = set()
    for top in SOURCE_ROOTS:
        for d, _, files in os.walk(os.path.join(root, top)):
            if "BUILD" in files or "BUILD.bazel" in files:
                found.add(os.path.relpath(d, root))
    return found


def package_of(path, pkgs):
    d = os.path.dirname(path)
    while d and d not in pkgs:
        d = os.path.dirname(d)
    return d or None


def package_files(root, pkgs):
    """The .h and .cc files of the packages (with their sub-directories that
    are no package of their own: tools/ferryd/ belongs to tools)."""
    for pkg in pkgs:
        for d, dirs, files in os.walk(os.path.join(root, pkg)):
            rel = os.path.relpath(d, root)
            dirs[:] = [x for x in dirs
                       if os.path.join(rel, x) not in pkgs and not x.startswith(".")]
            for name in files:
                if name.endswith((".h", ".cc")):
                    yield os.path.join(rel, name)


def include_edges(root, pkgs):
    """{(from_pkg, to_pkg): "file:line"} for each package edge, one example."""
    edges = {}
    for path in sorted(package_files(root, pkgs)):
        pkg = package_of(path, pkgs)
        with open(os.path.join(root, path), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m or not os.path.exists(os.path.join(root, m.group(1))):
                    continue
                to = package_of(m.group(1), pkgs)
                if to is not None and to != pkg:
                    edges.setdefault((pkg, to), f"{path}:{n}")
    return edges


def cycles(pkgs, edges):
    """Strongly connected components of more than one package (Tarjan)."""
    graph = {p: sorted(b for (a, b) in edges if a == p) for p in pkgs}
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for p in sorted(pkgs):
        if p not in index:
            visit(p)
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    pkgs = packages(root)
    edges = include_edges(root, pkgs)
    found = cycles(pkgs, edges)
    for component in found:
        print("packages that include each other: " + ", ".join(component))
        for (a, b), where in sorted(edges.items()):
            if a in component and b in component:
                print(f"  {a} -> {b}  ({where})")
    print(f"{len(pkgs)} packages, {len(edges)} package edges, "
          f"{len(found)} cycles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
