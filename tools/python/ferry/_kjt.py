"""TorchRec's sparse features and their all-to-all.

``KeyedJaggedTensor`` holds, for each key and each sample of a batch, a
variable-length list of values (TorchRec's layout: key-major ``lengths``
of keys x batch entries, flat ``values``, optional float ``weights``).
``SparseFeaturesAllToAll`` (TorchRec's argument names) and
``sparse_features_all_to_all`` send each rank its
``*_features_per_rank[rank]`` consecutive keys of every rank's features;
per key, the batches of all ranks come back concatenated (TorchRec's
``stagger`` order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Literal, overload

from . import _collectives
from . import _ferry

if TYPE_CHECKING:
    from ._types import GroupArg, Tensor

__all__ = [
    "KeyedJaggedTensor", "SparseFeatures", "SparseFeaturesAllToAll",
    "kjt_all_to_all", "sparse_features_all_to_all",
]


def _is_torch(t: object) -> bool:
    return type(t).__module__.startswith("torch")


def _offsets(lengths: Any) -> Any:
    if _is_torch(lengths):
        import torch
        return torch.cat([torch.zeros(1, dtype=lengths.dtype),
                          torch.cumsum(lengths, 0)])
    import numpy
    return numpy.concatenate([numpy.zeros(1, dtype=lengths.dtype),
                              numpy.cumsum(lengths)])


def _lengths_from_offsets(offsets: Any) -> Any:
    return offsets[1:] - offsets[:-1]


class KeyedJaggedTensor:
    """Keys, and per key and sample a list of values (TorchRec's KJT).

    ``KeyedJaggedTensor(keys, values, weights=None, lengths=None,
    offsets=None, stride=None)``; tensors are numpy arrays or torch
    tensors. ``kjt[key]`` is that key's list of per-sample value tensors.
    """

    def __init__(self, keys: Iterable[str], values: Tensor,
                 weights: Tensor | None = None, lengths: Tensor | None = None,
                 offsets: Tensor | None = None,
                 stride: int | None = None) -> None:
        if lengths is None:
            if offsets is None:
                raise ValueError("KeyedJaggedTensor: lengths or offsets")
            lengths = _lengths_from_offsets(offsets)
        self._keys = list(keys)
        self._values = values
        self._weights = weights
        self._lengths = lengths
        n = len(lengths)
        if stride is None:
            stride = n // len(self._keys) if self._keys else 0
        self._stride = int(stride)

    @staticmethod
    def from_lengths_sync(keys: Iterable[str], values: Tensor, lengths: Tensor,
                          weights: Tensor | None = None,
                          stride: int | None = None) -> KeyedJaggedTensor:
        return KeyedJaggedTensor(keys, values, weights, lengths,
                                 stride=stride)

    @staticmethod
    def from_offsets_sync(keys: Iterable[str], values: Tensor, offsets: Tensor,
                          weights: Tensor | None = None,
                          stride: int | None = None) -> KeyedJaggedTensor:
        return KeyedJaggedTensor(keys, values, weights, offsets=offsets,
                                 stride=stride)

    def keys(self) -> list[str]:
        return self._keys

    def values(self) -> Tensor:
        return self._values

    def weights(self) -> Tensor:
        if self._weights is None:
            raise ValueError("this KeyedJaggedTensor has no weights")
        return self._weights

    def weights_or_none(self) -> Tensor | None:
        return self._weights

    def lengths(self) -> Tensor:
        return self._lengths

    def offsets(self) -> Tensor:
        return _offsets(self._lengths)

    def stride(self) -> int:
        """The batch size."""
        return self._stride

    def __getitem__(self, key: str) -> list[Tensor]:
        """The key's values, one tensor per sample."""
        k = self._keys.index(key)
        offsets = self.offsets()
        first = k * self._stride
        return [self._values[int(offsets[first + s]):
                             int(offsets[first + s + 1])]
                for s in range(self._stride)]

    def to_dict(self) -> dict[str, list[Tensor]]:
        """{key: [values of sample 0, of sample 1, ...]}."""
        return {key: self[key] for key in self._keys}

    def _wire(self) -> dict[str, Any]:
        return {"keys": self._keys, "lengths": self._lengths,
                "values": self._values, "weights": self._weights,
                "stride": self._stride}

    @staticmethod
    def _from_wire(d: dict[str, Any]) -> KeyedJaggedTensor:
        return KeyedJaggedTensor(d["keys"], d["values"], d.get("weights"),
                                 d["lengths"], stride=d.get("stride"))

    def __repr__(self) -> str:
        rows = []
        for key in self._keys:
            cells = []
            for sample in self[key]:
                items = [str(v.item()) for v in sample]
                cells.append("[" + ", ".join(items) + "]" if items else "None")
            rows.append(f"  {key!r}: " + " ".join(cells))
        return ("KeyedJaggedTensor(stride=%d,\n" % self._stride +
                "\n".join(rows) + ")")


class SparseFeatures:
    """TorchRec's SparseFeatures: unweighted id lists and weighted id-score
    lists (either may be None)."""

    id_list_features: KeyedJaggedTensor | None
    id_score_list_features: KeyedJaggedTensor | None

    def __init__(self, id_list_features: KeyedJaggedTensor | None = None,
                 id_score_list_features: KeyedJaggedTensor | None = None
                 ) -> None:
        self.id_list_features = id_list_features
        self.id_score_list_features = id_score_list_features

    def __repr__(self) -> str:
        return (f"SparseFeatures(id_list_features={self.id_list_features!r},"
                f" id_score_list_features={self.id_score_list_features!r})")


def _wire_or_none(kjt: KeyedJaggedTensor | None) -> dict[str, Any] | None:
    return kjt._wire() if kjt is not None else None


def _features(result: dict[str, Any], like: SparseFeatures) -> SparseFeatures:
    out = SparseFeatures()
    if like.id_list_features is not None:
        out.id_list_features = KeyedJaggedTensor._from_wire(
            result["id_list"])
    if like.id_score_list_features is not None:
        out.id_score_list_features = KeyedJaggedTensor._from_wire(
            result["id_score_list"])
    return out


@overload
def sparse_features_all_to_all(
        sparse_features: SparseFeatures,
        id_list_features_per_rank: Iterable[int],
        id_score_list_features_per_rank: Iterable[int], group: GroupArg = None,
        stagger: int = 1, async_op: Literal[False] = False,
        timeout: float | None = None) -> SparseFeatures | None:
    ...


@overload
def sparse_features_all_to_all(
        sparse_features: SparseFeatures,
        id_list_features_per_rank: Iterable[int],
        id_score_list_features_per_rank: Iterable[int], group: GroupArg = None,
        stagger: int = 1, *, async_op: Literal[True],
        timeout: float | None = None) -> _collectives.Work | None:
    ...


@overload
def sparse_features_all_to_all(
        sparse_features: SparseFeatures,
        id_list_features_per_rank: Iterable[int],
        id_score_list_features_per_rank: Iterable[int], group: GroupArg = None,
        stagger: int = 1, async_op: bool = False, timeout: float | None = None
) -> SparseFeatures | _collectives.Work | None:
    ...


def sparse_features_all_to_all(
        sparse_features: SparseFeatures,
        id_list_features_per_rank: Iterable[int],
        id_score_list_features_per_rank: Iterable[int], group: GroupArg = None,
        stagger: int = 1, async_op: bool = False, timeout: float | None = None
) -> SparseFeatures | _collectives.Work | None:
    """Redistributes ``sparse_features`` (see the module); returns this
    rank's SparseFeatures (or a Work whose ``wait()`` does)."""
    g = _collectives._group(group)
    if not g.is_member():
        return None
    handle = _ferry.sparse_features_all_to_all(
        g._handle, _wire_or_none(sparse_features.id_list_features),
        _wire_or_none(sparse_features.id_score_list_features),
        list(id_list_features_per_rank),
        list(id_score_list_features_per_rank), int(stagger),
        _collectives._timeout(timeout), async_op, _collectives._kind())
    return _collectives._run(handle, async_op,
                             lambda r: _features(r, sparse_features))


def kjt_all_to_all(kjt: KeyedJaggedTensor, features_per_rank: Iterable[int],
                   group: GroupArg = None, stagger: int = 1,
                   async_op: bool = False, timeout: float | None = None
                   ) -> KeyedJaggedTensor | _collectives.Work | None:
    """One KeyedJaggedTensor's all-to-all (TorchRec's KJTAllToAll)."""
    g = _collectives._group(group)
    if not g.is_member():
        return None
    handle = _ferry.kjt_all_to_all(
        g._handle, kjt._wire(), list(features_per_rank), int(stagger),
        _collectives._timeout(timeout), async_op, _collectives._kind())
    return _collectives._run(handle, async_op, KeyedJaggedTensor._from_wire)


class SparseFeaturesAllToAll:
    """TorchRec's module: ``SparseFeaturesAllToAll(pg,
    id_list_features_per_rank, id_score_list_features_per_rank,
    device=None, stagger=1)``; calling it with a SparseFeatures returns an
    awaitable whose ``wait()`` gives this rank's SparseFeatures. ``pg`` is
    a ferry Group (None: the world); ``device`` is accepted (CPU only)."""

    pg: GroupArg
    id_list_features_per_rank: list[int]
    id_score_list_features_per_rank: list[int]
    stagger: int

    def __init__(self, pg: GroupArg, id_list_features_per_rank: Iterable[int],
                 id_score_list_features_per_rank: Iterable[int],
                 device: object = None, stagger: int = 1) -> None:
        del device
        self.pg = pg
        self.id_list_features_per_rank = list(id_list_features_per_rank)
        self.id_score_list_features_per_rank = list(
            id_score_list_features_per_rank)
        self.stagger = stagger

    def forward(self, sparse_features: SparseFeatures
                ) -> _collectives.Work | None:
        return sparse_features_all_to_all(
            sparse_features, self.id_list_features_per_rank,
            self.id_score_list_features_per_rank, group=self.pg,
            stagger=self.stagger, async_op=True)

    __call__ = forward
