#!/usr/bin/env python3
"""Writes the installed form of a public header: ROOT and exactly the
project headers it includes, transitively, under OUT/PREFIX/, each
`#include "path"` of a project header rewritten to `#include "PREFIX/path"`
(so a program needs only -I<include dir>, and the installed files cannot
collide with another project's `rpc/…` or `tools/…`).

    install_headers.py OUT PREFIX ROOT HEADER…

HEADERS are the project's source headers ROOT may reach (its library's
compilation context, by their paths in the source tree); an include that
names one is followed. Fails, naming the header and line, if a header in
the closure includes gRPC or protobuf or a generated header (.pb.h), or a
project path that is not among HEADERS: what is installed must compile
with the system's Abseil alone. Other includes (Abseil, the standard
library) are left as they are.

The closure is read from the text (every #include line, conditional or
not); tests/ferry_h_test checks it is what the compiler opens.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
FORBIDDEN = re.compile(r"(^|/)grpc|^google/protobuf/|\.pb\.h$")


def closure(root, headers):
    """The project headers `root` includes, transitively (with `root`)."""
    tops = {h.split("/", 1)[0] for h in headers if "/" in h}
    seen, todo = [root], [root]
    while todo:
        header = todo.pop()
        with open(header) as f:
            lines = f.read().splitlines()
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            path = m.group(2)
            where = "%s:%d: #include %s" % (header, number, path)
            if FORBIDDEN.search(path):
                sys.exit("%s: gRPC, protobuf or generated; the installed "
                         "headers must not include it" % where)
            if path in headers:
                if path not in seen:
                    seen.append(path)
                    todo.append(path)
            elif m.group(1) == '"' and path.split("/", 1)[0] in tops:
                sys.exit("%s: a project header the library does not "
                         "provide (a missing dep?)" % where)
    return sorted(seen)


def rewritten(text, prefix, headers):
    def include(m):
        path = m.group(2)
        if m.group(1) != '"' or path not in headers:
            return m.group(0)
        return m.group(0).replace('"%s"' % path, '"%s/%s"' % (prefix, path))

    return "\n".join(INCLUDE.sub(include, line)
                     for line in text.split("\n"))


def main(argv):
    if len(argv) < 4:
        sys.exit("usage: install_headers.py OUT PREFIX ROOT HEADER...")
    out, prefix, root, headers = argv[0], argv[1], argv[2], set(argv[3:])
    headers.add(root)
    for header in closure(root, headers):
        with open(header) as f:
            text = f.read()
        target = os.path.join(out, prefix, header)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write(rewritten(text, prefix, headers))


if __name__ == "__main__":
    main(sys.argv[1:])
