"""What `tools/dev install` ships, and the check that the public header is
free of gRPC: the project headers a target includes, and one static archive
of all the project code a target links."""

def _project_files(files):
    # Project sources only: not the system libraries' (@system) nor generated.
    return [f for f in files if f.owner.workspace_name == "" and f.is_source]

def _transitive_headers_impl(ctx):
    headers = _project_files(ctx.attr.dep[CcInfo].compilation_context.headers.to_list())
    manifest = ctx.actions.declare_file(ctx.attr.name + ".manifest")
    ctx.actions.write(manifest, "".join([h.short_path + "\n" for h in headers]))
    return [DefaultInfo(
        files = depset(headers + [manifest]),
        runfiles = ctx.runfiles(files = headers + [manifest]),
    )]

transitive_headers = rule(
    doc = "The project's source headers that `dep` makes includable, and " +
          "<name>.manifest listing their paths.",
    implementation = _transitive_headers_impl,
    attrs = {"dep": attr.label(providers = [CcInfo])},
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
