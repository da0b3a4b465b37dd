"""The type aliases of the package's annotations. Type checkers read them;
the modules import this one only under ``typing.TYPE_CHECKING`` (and
``from __future__ import annotations`` keeps annotations unevaluated), so
numpy and torch stay optional at run time."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Optional, Union

if TYPE_CHECKING:
    import numpy
    import torch
    import torch.distributed

    from ._collectives import Group
    from ._rpc import BFloat16, WorkerInfo

# How tensors come back when no tensor argument says ("numpy" or "torch").
TensorType = Literal["numpy", "torch"]

# A tensor ferry sends or receives: a numpy array or a torch tensor.
Tensor = Union["numpy.ndarray[Any, Any]", "torch.Tensor"]

# A tensor argument: also ferry.BFloat16 (numpy has no bfloat16).
TensorArg = Union[Tensor, "BFloat16"]

# A call's target: a worker's name, rank or WorkerInfo.
To = Union[str, int, "WorkerInfo"]

# A call's positional arguments (ferry's values: None, bool, int, float,
# str, bytes, lists/tuples, dicts with str keys, RRefs, tensors).
Args = Optional[Union["tuple[Any, ...]", "list[Any]"]]

# A collective's group: a ferry Group, a torch ProcessGroup of the "ferry"
# backend, or None for the world.
GroupArg = Optional[Union["Group", "torch.distributed.ProcessGroup"]]

# A reduction: ferry.ReduceOp's names ("sum", "prod", ...), in any case, or
# torch.distributed.ReduceOp and its members -- which torch 1.13's stubs
# type as `...`: hence object.
ReduceOpArg = Union[str, "torch.distributed.ReduceOp", object]
