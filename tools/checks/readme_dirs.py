#!/usr/bin/env python3
"""Fails if README.md's directory table misses a library package, or names
a directory that does not exist.

The table (README, "Read more") has one row per place a concept lives:
each row's first cell names directories in backquotes (`rpc/auth/`), and
its text may name sub-directories the same way (`etcd/`, relative to the
row's). Every Bazel package of the library (a directory with a BUILD file
under the top-level source folders, tests and tools' own build plumbing
excepted) must be named, or lie inside a named directory that is a
package itself only for tools (tools/…).

  python3 tools/checks/readme_dirs.py [REPO_ROOT]   # exit 1 on a mismatch
"""
import os
import re
import sys

LIBRARY_ROOTS = ("collectives", "proto", "rpc", "rref")
HEADER = "| directory | what |"


def table_dirs(readme):
    rows = readme.split(HEADER, 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    named = set()
    for row in rows:
        cells = row.split("|")
        if len(cells) < 3:
            continue
        first = re.findall(r"`([\w/.-]+/)`", cells[1])
        named.update(d.rstrip("/") for d in first)
        for base in first:
            for sub in re.findall(r"`([\w.-]+/)`", cells[2]):
                named.add(os.path.join(base, sub).rstrip("/"))
            for full in re.findall(r"`([\w.-]+/[\w/.-]+/)`", cells[2]):
                named.add(full.rstrip("/"))
    return named


def library_packages(root):
    found = set()
    for top in LIBRARY_ROOTS:
        for d, _, files in os.walk(os.path.join(root, top)):
            if "BUILD" in files:
                found.add(os.path.relpath(d, root))
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    with open(os.path.join(root, "README.md")) as f:
        named = table_dirs(f.read())
    problems = [f"README's directory table names {d}/, which does not exist"
                for d in sorted(named) if not os.path.isdir(os.path.join(root, d))]
    problems += [f"package {p}/ is not in README's directory table"
                 for p in sorted(library_packages(root)) if p not in named]
    for p in problems:
        print(p)
    print(f"{len(named)} directories named, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
