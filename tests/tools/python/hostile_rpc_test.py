"""A caller that tries to make a ferry.rpc callee run what it did not
allow -- os.system, builtins.eval/exec, subprocess, torch.load, names
merely imported into the callee's __main__, references written by hand,
a pickled object as an argument, a method of an object whose class is not
allowed -- is refused, and the callee ran nothing (jobs/torch_rpc_job.py,
"hostile")."""
import conftest

JOB = conftest.script("tests/tools/python/jobs/torch_rpc_job.py")


def test_what_the_callee_did_not_allow_is_refused_and_never_runs():
    out = conftest.launch(JOB, 2, "hostile")
    checks = [line.split("[ok] ", 1)[1] for line in out.splitlines()
              if line.startswith("[0] [ok] ")]
    assert checks == [
        "os.system, eval, exec, subprocess, shutil, torch.save/load refused",
        "references by hand to imported names refused",
        "objects refused as arguments; bytes stay bytes; functions as "
        "arguments resolved by the callee's rules",
        "methods of objects of classes not allowed refused",
        "the callee ran nothing",
    ], out
