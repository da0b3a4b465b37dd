"""What `tools/dev install` ships: the public header with exactly the
project headers it includes (rewritten to their installed paths), and one
static archive of all the project code a target links."""

def _project_files(files):
    # Project sources only: not the system libraries' (@system) nor generated.
    return [f for f in files if f.owner.workspace_name == "" and f.is_source]

def _installed_headers_impl(ctx):
    headers = _project_files(ctx.attr.dep[CcInfo].compilation_context.headers.to_list())
    out = ctx.actions.declare_directory(ctx.attr.name + "/include")
    args = ctx.actions.args()
    args.add(out.path)
    args.add(ctx.attr.prefix)
    args.add(ctx.file.root.path)
    args.add_all(headers)
    ctx.actions.run(
        executable = ctx.executable._tool,
        arguments = [args],
        inputs = headers + [ctx.file.root],
        outputs = [out],
        mnemonic = "InstallHeaders",
        progress_message = "Writing %s's installed headers" % ctx.file.root.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

installed_headers = rule(
    doc = "<name>/include/<prefix>/: `root` and exactly the project headers " +
          "it includes (transitively, among `dep`'s), their includes " +
          "rewritten to <prefix>/…; fails on a gRPC, protobuf or generated " +
          "include (tools/bazel/install_headers.py).",
    implementation = _installed_headers_impl,
    attrs = {
        "dep": attr.label(providers = [CcInfo]),
        "root": attr.label(allow_single_file = [".h"]),
        "prefix": attr.string(),
        "_tool": attr.label(
            default = "//tools/bazel:install_headers.py",
            allow_single_file = True,
            executable = True,
            cfg = "exec",
        ),
    },
)

def _static_archive_impl(ctx):
    archives = []
    for linker_input in ctx.attr.dep[CcInfo].linking_context.linker_inputs.to_list():
        if linker_input.owner.workspace_name != "":
            continue  # System libraries stay dynamic dependencies.
        for library in linker_input.libraries:
            archive = library.pic_static_library or library.static_library
            if archive:
                archives.append(archive)
    out = ctx.actions.declare_file(ctx.attr.name + ".a")
    script = "\n".join(
        ["CREATE " + out.path] +
        ["ADDLIB " + a.path for a in archives] +
        ["SAVE", "END", ""],
    )
    ctx.actions.run_shell(
        inputs = archives,
        outputs = [out],
        command = "printf '%s' \"$1\" | ar -M",
        arguments = [script],
        mnemonic = "MergeArchives",
        progress_message = "Merging %d archives into %s" % (len(archives), out.short_path),
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

static_archive = rule(
    doc = "One .a holding every project archive `dep` links (name: <name>.a).",
    implementation = _static_archive_impl,
    attrs = {"dep": attr.label(providers = [CcInfo])},
)
