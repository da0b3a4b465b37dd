#!/usr/bin/env python3
"""The C++ names a user of ferry.h can see, one per line:

    type ferry::Worker
    method ferry::Worker::Start
    function ferry::AllReduce

read from clang's AST of ferry.h (`-ast-dump=json`, namespace ferry):
types (classes, structs, enums, aliases) at namespace scope and their
public nested types; public methods of those types, by name (overloads are
one name; constructors, destructors, deleted and compiler-made ones are
not counted); free functions and function templates, by name. Names in a
nested namespace (`internal`, `detail`) and in anonymous ones are not the
API and are left out (so are `*_internal` ones). Counted as types: those at
namespace scope (nested ones are listed, and belong to theirs).

    api_surface.py ROOT          check ROOT/ferry.h against the allowlist
    api_surface.py ROOT --list   print the names (to write the allowlist)

The allowlist is tools/checks/ferry_h_api.txt: the check exits 1 naming
every name not in it (the API grew without a decision: hide it, or add it
to the list in the same change) and every listed name that is gone (take
it out). It prints the counts either way. `tools/dev test` runs it.
"""
import argparse
import json
import subprocess
import sys

SKIP_NAMESPACES = {"internal", "detail", ""}


def ast_objects(root, clang):
    out = subprocess.run(
        [clang, "-std=c++20", "-fsyntax-only", "-Xclang", "-ast-dump=json",
         "-Xclang", "-ast-dump-filter=ferry", "-I" + root, "-x", "c++",
         root + "/ferry.h"],
        check=True, capture_output=True, text=True).stdout
    decoder = json.JSONDecoder()
    i = 0
    while i < len(out):
        while i < len(out) and out[i].isspace():
            i += 1
        if i >= len(out):
            break
        if out.startswith("Dumping", i):  # The filter's heading lines.
            i = out.index("\n", i) + 1
            continue
        obj, i = decoder.raw_decode(out, i)
        yield obj


def record_names(record, prefix, names):
    """Adds `record`'s public methods and public nested types."""
    access = "private" if record.get("tagUsed") == "class" else "public"
    for node in record.get("inner", []):
        kind = node.get("kind")
        if kind == "AccessSpecDecl":
            access = node.get("access")
            continue
        if access != "public" or node.get("isImplicit"):
            continue
        if kind in ("CXXMethodDecl", "FunctionTemplateDecl"):
            name = node.get("name", "")
            if node.get("explicitlyDeleted") or name.startswith("operator="):
                continue
            if kind == "FunctionTemplateDecl" and any(
                    c.get("kind") in ("CXXConstructorDecl",
                                      "CXXDestructorDecl")
                    for c in node.get("inner", [])):
                continue
            names.add("method %s::%s" % (prefix, name))
        elif kind in ("CXXRecordDecl", "EnumDecl", "TypeAliasDecl",
                      "TypedefDecl", "ClassTemplateDecl"):
            type_names(node, prefix, names)


def type_names(node, prefix, names):
    kind = node.get("kind")
    name = node.get("name")
    if not name:
        return
    if kind == "ClassTemplateDecl":
        for c in node.get("inner", []):
            if c.get("kind") == "CXXRecordDecl":
                type_names(c, prefix, names)
        return
    if kind == "CXXRecordDecl" and not node.get("completeDefinition"):
        return  # A forward declaration.
    full = "%s::%s" % (prefix, name)
    names.add("type " + full)
    if kind == "CXXRecordDecl":
        record_names(node, full, names)


def namespace_names(ns, prefix, names):
    for node in ns.get("inner", []):
        kind = node.get("kind")
        if node.get("isImplicit"):
            continue
        if kind == "NamespaceDecl":
            name = node.get("name", "")
            if name not in SKIP_NAMESPACES and not name.endswith("_internal"):
                namespace_names(node, prefix + "::" + node["name"], names)
        elif kind in ("FunctionDecl", "FunctionTemplateDecl"):
            names.add("function %s::%s" % (prefix, node["name"]))
        elif kind in ("CXXRecordDecl", "EnumDecl", "TypeAliasDecl",
                      "TypedefDecl", "ClassTemplateDecl"):
            type_names(node, prefix, names)


def surface(root, clang):
    names = set()
    for obj in ast_objects(root, clang):
        if obj.get("kind") == "NamespaceDecl" and obj.get("name") == "ferry":
            namespace_names(obj, "ferry", names)
    return names


def counts(names):
    by = {"type": 0, "method": 0, "function": 0}
    for n in names:
        kind, name = n.split(" ", 1)
        if kind != "type" or name.count("::") == 1:
            by[kind] += 1
    return "%(type)d types, %(method)d methods, %(function)d functions" % by


ALLOWLIST = "tools/checks/ferry_h_api.txt"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--clang", default="clang++")
    p.add_argument("--list", action="store_true")
    args = p.parse_args()
    root = args.root.rstrip("/") or "."
    names = surface(root, args.clang)
    if args.list:
        print("\n".join(sorted(names)))
        print(counts(names), file=sys.stderr)
        return 0
    allowed = {line.strip() for line in open(root + "/" + ALLOWLIST)
               if line.strip() and not line.startswith("#")}
    print("ferry.h shows " + counts(names))
    new, gone = sorted(names - allowed), sorted(allowed - names)
    for n in new:
        print("not in the allowlist: " + n)
    for n in gone:
        print("allowlisted but gone: " + n)
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
