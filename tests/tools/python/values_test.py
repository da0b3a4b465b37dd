"""Python values and tensors through ferry, in a job of one worker: every
dtype, both tensor kinds, without copies where ferry can."""
import subprocess
import sys

import numpy as np
import pytest
import torch

import ferry

NUMPY_DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64,
                np.float16, np.float32, np.float64, np.complex64,
                np.complex128]
TORCH_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                torch.int64, torch.float16, torch.bfloat16, torch.float32,
                torch.float64, torch.complex64, torch.complex128]


@pytest.fixture(scope="module", autouse=True)
def job():
    ferry.init(rank=0, world_size=1, timeout=30)
    yield
    ferry.shutdown()


def echo(*args):
    return ferry.rpc_sync("worker0", "echo", args=args)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_numpy_dtypes_round_trip(dtype):
    a = (np.arange(6) % 2).astype(dtype).reshape(2, 3)
    r = echo(a)
    assert isinstance(r, np.ndarray)
    assert r.dtype == a.dtype and r.shape == (2, 3)
    np.testing.assert_array_equal(r, a)


@pytest.mark.parametrize("dtype", TORCH_DTYPES)
def test_torch_dtypes_round_trip(dtype):
    t = (torch.arange(6) % 2).to(dtype).reshape(3, 2)
    r = echo(t)
    assert isinstance(r, torch.Tensor)
    assert r.dtype == dtype and torch.equal(r, t)


def test_complex_values():
    t = torch.tensor([1 + 2j, -3.5j], dtype=torch.complex64)
    assert torch.equal(echo(t), t)
    assert torch.equal(echo(t.conj()), t.conj().resolve_conj())
    z = echo(3 - 1j)  # A Python complex: a 0-d complex128 tensor.
    assert z.shape == () and z.dtype == np.complex128 and z == 3 - 1j


def test_bfloat16_without_torch_is_float32():
    b = ferry.BFloat16.from_float(np.array([1.5, -2.0, 3.140625], np.float32))
    r = echo(b)
    assert r.dtype == np.float32
    np.testing.assert_array_equal(r, [1.5, -2.0, 3.140625])
    np.testing.assert_array_equal(b.to_float(), r)


def test_numpy_results_are_read_only_views_of_ferry_memory():
    r = echo(np.arange(4.0))
    assert not r.flags.writeable
    with pytest.raises(ValueError):
        r[0] = 1
    assert type(r.base).__name__ == "PyCapsule"
    t = echo(torch.arange(4.0))
    t[0] = 7  # torch results are ordinary tensors.
    assert t[0] == 7


def test_inputs_are_not_copied():
    a = np.arange(8.0)
    assert np.shares_memory(ferry.RRef(a).local_value(), a)
    t = torch.arange(8.0)
    # A torch result over this process's own memory is a clone: writing it
    # must not change the argument.
    r = ferry.RRef(t).local_value()
    r[0] = 100
    assert t[0] == 0


def test_layouts_that_need_a_copy():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(echo(a.T), a.T)           # not contiguous
    np.testing.assert_array_equal(echo(a[:, 1]), a[:, 1])   # strided
    b = np.arange(5, dtype=">i4")                           # big-endian
    np.testing.assert_array_equal(echo(b), np.arange(5))
    raw = np.frombuffer(bytes(17), dtype=np.uint8)[1:].view(np.int32)
    np.testing.assert_array_equal(echo(raw), np.zeros(4))   # unaligned
    t = torch.arange(6.0).reshape(2, 3).t()
    assert torch.equal(echo(t), t)
    g = torch.ones(2, requires_grad=True)
    assert torch.equal(echo(g), torch.ones(2))


def test_shapes():
    assert echo(np.float32(1.5)) == 1.5            # numpy scalar: a number
    zero_d = echo(np.array(2.5, np.float32))
    assert zero_d.shape == () and zero_d == 2.5
    empty = echo(np.zeros((0, 3), np.int64))
    assert empty.shape == (0, 3)
    assert echo(torch.zeros(2, 0)).shape == (2, 0)


def test_plain_values():
    for v in [None, True, False, 0, -(2**63), 2**63 - 1, 2.5, "héllo",
              b"\x00\xff", [], [1, [2, [3]]], {"a": {"b": [1, "x"]}}]:
        assert echo(v) == v
    assert echo((1, 2)) == [1, 2]                  # tuples come back lists
    assert echo(bytearray(b"ab")) == b"ab"
    nested = echo({"t": [np.ones(2), 3]})
    np.testing.assert_array_equal(nested["t"][0], [1, 1])


@pytest.mark.parametrize("value, where", [
    ({1: 2}, "args[0]: map keys must be str"),
    ([1, {2}], "args[0][1]: cannot send a set"),
    (2**64, "args[0]: integer does not fit in int64"),
    (np.zeros(2, np.uint16), "args[0]: ferry has no dtype for numpy's uint16"),
    ({"x": [object()]}, "args[0]['x'][0]: cannot send a object"),
])
def test_what_cannot_be_sent_names_where(value, where):
    with pytest.raises(ferry.InvalidArgumentError) as e:
        echo(value)
    assert str(e.value).startswith(where), str(e.value)
    assert isinstance(e.value, ValueError)


def test_builtin_results_follow_the_argument_kind():
    r = ferry.rpc_sync(0, "add", args=(torch.ones(2, dtype=torch.float16), 1))
    assert r.dtype == torch.float16 and torch.equal(r, torch.full((2,), 2.0,
                                                       dtype=torch.float16))
    assert isinstance(ferry.rpc_sync(0, "zeros", args=([2],)), np.ndarray)


def test_importing_ferry_looks_numpys_c_api_up():
    """pybind11 (2.10) looks numpy's C API up on first use, in a C++ static
    whose initializer imports numpy.core.multiarray; the import can release
    the GIL (numpy 2 reads its numpy.core shim from disk), and a second
    thread reaching the static then waited for it holding the GIL: ferry.rpc
    on torch 2.14 hung so, a caller's first array racing a handler's (1 test
    in 3 of torch's RPC suite). Importing ferry does it, on one thread."""
    code = ("import sys; import ferry; "
            "print('numpy.core.multiarray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True,
                         stdout=subprocess.PIPE, timeout=120)
    assert out.stdout.split() == [b"True"], out
