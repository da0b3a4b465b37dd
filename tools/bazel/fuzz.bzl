"""ferry_fuzz_test: one libFuzzer target that is also a corpus-replay test.

    load("//tools/bazel:fuzz.bzl", "ferry_fuzz_test")

    ferry_fuzz_test(
        name = "json_fuzz",
        srcs = ["json_fuzz.cc"],   # defines LLVMFuzzerTestOneInput
        deps = ["//rpc/value:json"],
    )

The source defines `extern "C" int LLVMFuzzerTestOneInput(const uint8_t*,
size_t)` (and, optionally, LLVMFuzzerInitialize) and nothing else the
driver needs. Its seed corpus is the directory `corpus/<name>/` beside the
BUILD file (one input per file; add every crash the fuzzer finds there, and
a unit test in the matching tests/ file).

Two builds of one cc_test target:
  * normal builds (gcc, `bazel test //...`): linked with
    //tests/fuzz:replay_main, which runs every corpus file through the
    target once, so the seeds (and every crash once found) are regression
    tests under the ordinary toolchain;
  * `--config=fuzz` (clang, -fsanitize=fuzzer,address,undefined; sets
    --define=ferry_fuzz=1): linked with libFuzzer's main. `bazel test
    --config=fuzz` replays the corpus under the sanitizers (-runs=0);
    `tools/dev fuzz [SECONDS]` runs each target's binary as a fuzzer.

Targets carry the tag "ferry_fuzz"; `tools/dev fuzz` finds them with
`bazel query 'attr(tags, ferry_fuzz, tests(//tests/fuzz/...))'`.
"""

def ferry_fuzz_test(name, srcs, deps = [], corpus = None, size = "small", tags = [], **kwargs):
    corpus_dir = corpus or ("corpus/" + name)
    native.cc_test(
        name = name,
        size = size,
        srcs = srcs,
        deps = deps + select({
            "//tools/bazel:fuzzing": [],
            "//conditions:default": ["//tests/fuzz:replay_main"],
        }),
        linkopts = select({
            "//tools/bazel:fuzzing": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        data = native.glob([corpus_dir + "/**"]),
        # Both mains take libFuzzer's arguments: -runs=0 replays the
        # corpus once and stops (the replay main skips flags).
        args = ["-runs=0", native.package_name() + "/" + corpus_dir],
        tags = tags + ["ferry_fuzz"],
        **kwargs
    )
