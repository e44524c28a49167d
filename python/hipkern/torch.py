"""Force/virial assembly as torch ops, with DeePMD-kit's signature.

``edge_force_assembly`` is a drop-in for
``deepmd.kernels.triton.sezm.force_assembly.edge_force_assembly``: the same
arguments, shapes, dtypes and conventions,

    F_k = sum_{dst(e)=k} g_e - sum_{src(e)=k} g_e
    W_k = 0.5 * sum_{e: k in {src(e), dst(e)}} (-g_e (x) edge_vec_e)

(the virial row-major 3x3, split half to each endpoint), computed by
hipkern's atomic-free segment reduction: 12 float64 sums per row in a fixed
order, so the result is bitwise reproducible, rounded once to the input
precision. ``build_plan`` makes the four CSR arrays on the device (a stable
counting sort, the same arrays as ``torch.argsort(stable=True)`` +
``torch.searchsorted``, as int32).

Both are registered with ``torch.library`` (``torch.ops.hipkern.*``) with
fake implementations, so ``torch.compile`` and ``torch.export`` trace
them. Device tensors run on torch's current stream of their device,
asynchronously, in memory from torch's caching allocator; CPU tensors take
hipkern's CPU path (float64 sums, the plan validated).

Like DeePMD's op, ``edge_force_assembly`` is not differentiable: backward
through it raises. Keep the reference path where the force graph must stay
differentiable.
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch
from torch import Tensor

from . import _native

__all__ = ["edge_force_assembly", "build_plan"]

# The plan's arrays are int32 (the kernels' index type): E and N_ext must
# fit.
_MAX_PLAN_LEN = 2**31 - 1
_REALS = (torch.float32, torch.float64)
_INDICES = (torch.int32, torch.int64)


def _bits(dtype: torch.dtype) -> int:
    return torch.finfo(dtype).bits if dtype.is_floating_point else torch.iinfo(dtype).bits


def _name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def _check_tensor(name: str, t, ndim: int, dtypes, device: Optional[torch.device]) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")
    if t.dim() != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), has shape {tuple(t.shape)}")
    if t.dtype not in dtypes:
        names = " or ".join(_name(d) for d in dtypes)
        raise ValueError(f"{name} has dtype {_name(t.dtype)}; {names} expected")
    if device is not None and t.device != device:
        raise ValueError(f"{name} is on {t.device} but the other inputs are on {device}")
    if t.device.type not in ("cpu", "cuda"):
        raise ValueError(f"{name} is on {t.device}; hipkern takes cpu and cuda (HIP) tensors")


def _check_types(**tensors) -> None:
    # Before the dispatcher, whose own message does not name the argument
    # the way a caller wrote it.
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, not {type(t).__name__}")


def _device_ready(device: torch.device) -> None:
    if _native.platform() == "cpu":
        raise RuntimeError(
            f"tensors on {device}, but this hipkern was built for the cpu platform (no device "
            "code); build the package where nvcc or ROCm's hipcc is found (docs/python.md), or "
            "pass CPU tensors"
        )


def _stream(device: torch.device) -> int:
    return torch.cuda.current_stream(device).cuda_stream


def _as_int32_plan(name: str, t: Tensor) -> Tensor:
    # torch.argsort/searchsorted give int64; the kernels read int32. The
    # narrowing is one copy on the stream; build_plan's int32 arrays are
    # used in place.
    if t.dtype == torch.int32:
        return t
    if t.device.type == "cpu" and t.numel() > 0:
        # On the CPU the plan is validated: a value that int32 cannot hold
        # must not wrap into a valid-looking one.
        lo, hi = int(t.min()), int(t.max())
        if lo < 0 or hi > _MAX_PLAN_LEN:
            bad = int(torch.nonzero((t < 0) | (t > _MAX_PLAN_LEN))[0, 0])
            raise ValueError(f"{name}[{bad}] = {int(t[bad])} is out of range for a plan")
    return t.to(torch.int32)


def _check_assembly(g, edge_vec, dst_order, dst_row_ptr, src_order, src_row_ptr) -> Tuple[int, int]:
    _check_tensor("g", g, 2, _REALS, None)
    device = g.device
    _check_tensor("edge_vec", edge_vec, 2, _REALS, device)
    for name, t in (("dst_order", dst_order), ("dst_row_ptr", dst_row_ptr),
                    ("src_order", src_order), ("src_row_ptr", src_row_ptr)):
        _check_tensor(name, t, 1, _INDICES, device)
    if g.shape[1] != 3:
        raise ValueError(f"g must have shape (E, 3), has {tuple(g.shape)}")
    if edge_vec.shape != g.shape:
        raise ValueError(f"edge_vec has shape {tuple(edge_vec.shape)} but g has {tuple(g.shape)}")
    if edge_vec.dtype != g.dtype:
        raise ValueError(f"edge_vec has dtype {_name(edge_vec.dtype)} but g has {_name(g.dtype)}")
    n_edges = g.shape[0]
    for name, t in (("dst_order", dst_order), ("src_order", src_order)):
        if t.shape[0] != n_edges:
            raise ValueError(f"{name} has {t.shape[0]} entries but there are {n_edges} edges")
    if dst_row_ptr.shape[0] == 0:
        raise ValueError("dst_row_ptr is empty; it has N_ext + 1 entries")
    if src_row_ptr.shape != dst_row_ptr.shape:
        raise ValueError(
            f"src_row_ptr has {src_row_ptr.shape[0]} entries but dst_row_ptr has "
            f"{dst_row_ptr.shape[0]} (both N_ext + 1)"
        )
    n_rows = dst_row_ptr.shape[0] - 1
    if n_edges > _MAX_PLAN_LEN or n_rows > _MAX_PLAN_LEN:
        raise ValueError(f"{n_edges} edges / {n_rows} atoms exceed the plan's int32 limit")
    return n_edges, n_rows


@torch.library.custom_op("hipkern::edge_force_assembly", mutates_args=())
def _edge_force_assembly(
    g: Tensor,
    edge_vec: Tensor,
    dst_order: Tensor,
    dst_row_ptr: Tensor,
    src_order: Tensor,
    src_row_ptr: Tensor,
) -> Tuple[Tensor, Tensor]:
    n_edges, n_rows = _check_assembly(g, edge_vec, dst_order, dst_row_ptr, src_order, src_row_ptr)
    g, edge_vec = g.contiguous(), edge_vec.contiguous()
    plan = [_as_int32_plan(n, t.contiguous()) for n, t in (
        ("dst_order", dst_order), ("dst_row_ptr", dst_row_ptr),
        ("src_order", src_order), ("src_row_ptr", src_row_ptr))]
    if g.device.type == "cpu":
        force, virial = _native.force_assemble_cpu(
            g.detach().numpy(), edge_vec.detach().numpy(), *(p.numpy() for p in plan)
        )
        # float64 sums rounded once to the input precision, as on the device.
        return (torch.from_numpy(force).to(g.dtype), torch.from_numpy(virial).to(g.dtype))
    _device_ready(g.device)
    if n_edges == 0:
        # No edge: every row is zero (the plan's row_ptr is then all zeros).
        return g.new_zeros((n_rows, 3)), g.new_zeros((n_rows, 9))
    force = g.new_empty((n_rows, 3))
    virial = g.new_empty((n_rows, 9))
    if n_rows == 0:
        return force, virial
    # float32 outputs: the first pass's float64 sums live here until the
    # second pass rounds them once.
    accum = None if g.dtype == torch.float64 else g.new_empty((n_rows, 12), dtype=torch.float64)
    _native.force_assemble_device(
        _bits(g.dtype), g.data_ptr(), edge_vec.data_ptr(), n_edges,
        [p.data_ptr() for p in plan], n_rows, _bits(g.dtype),
        force.data_ptr(), virial.data_ptr(), 0 if accum is None else accum.data_ptr(),
        _stream(g.device),
    )
    return force, virial


@_edge_force_assembly.register_fake
def _(g, edge_vec, dst_order, dst_row_ptr, src_order, src_row_ptr):
    _, n_rows = _check_assembly(g, edge_vec, dst_order, dst_row_ptr, src_order, src_row_ptr)
    return g.new_empty((n_rows, 3)), g.new_empty((n_rows, 9))


def _not_differentiable(ctx, grad_force, grad_virial):
    raise RuntimeError(
        "hipkern.torch.edge_force_assembly is not differentiable (like DeePMD's op, it has no "
        "autograd formula); use the index_add_ reference where the force graph must stay "
        "differentiable (create_graph=True)"
    )


def _setup_context(ctx, inputs, output):
    pass


_edge_force_assembly.register_autograd(_not_differentiable, setup_context=_setup_context)


def edge_force_assembly(
    g: Tensor,
    edge_vec: Tensor,
    dst_order: Tensor,
    dst_row_ptr: Tensor,
    src_order: Tensor,
    src_row_ptr: Tensor,
) -> Tuple[Tensor, Tensor]:
    """Assemble the extended force and per-atom virial from edge gradients.

    DeePMD-kit's ``edge_force_assembly`` (same arguments and results).

    Parameters
    ----------
    g : Tensor
        Per-edge energy gradient ``dE / d(edge_vec)``, shape (E, 3), float32
        or float64.
    edge_vec : Tensor
        Per-edge displacement vectors, shape (E, 3), the dtype of ``g``.
    dst_order, src_order : Tensor
        Edge ids sorted by destination / source extended index, shape (E,),
        int32 or int64 (``build_plan``'s, or ``torch.argsort``'s).
    dst_row_ptr, src_row_ptr : Tensor
        CSR offsets into the respective order, shape (N_ext + 1,), int32 or
        int64 (``build_plan``'s, or ``torch.searchsorted``'s); the length
        gives the atom count.

    Returns
    -------
    force : Tensor
        Shape (N_ext, 3), the dtype of ``g``.
    virial : Tensor
        Shape (N_ext, 9) (row-major 3x3), split half to each endpoint of an
        edge, the dtype of ``g``.

    Raises
    ------
    ValueError
        A shape, dtype or device that does not fit, named; on the CPU also
        a plan that is not a valid CSR plan (the array and position named).
    RuntimeError
        Device tensors with a cpu-platform build, or a runtime failure.

    Notes
    -----
    All inputs must be on one device. Device tensors run on
    ``torch.cuda.current_stream()``, with no synchronization and no copy of
    contiguous int32/float inputs (int64 plans are narrowed to int32, one
    copy each). On the device the plan is trusted as DeePMD's op trusts it:
    ``build_plan``'s, or a stable argsort + searchsorted of valid indices;
    any other must be checked first (``check_plan``). Not differentiable.
    """
    _check_types(g=g, edge_vec=edge_vec, dst_order=dst_order, dst_row_ptr=dst_row_ptr,
                 src_order=src_order, src_row_ptr=src_row_ptr)
    return _edge_force_assembly(g, edge_vec, dst_order, dst_row_ptr, src_order, src_row_ptr)


def _bad_index_message(src: Tensor, dst: Tensor, n_ext: int, mapping: Optional[Tensor],
                       n_local: int, report) -> str:
    bad_src, bad_dst, bad_mapping = report
    for name, t, pos, hi in (("src", src, bad_src, f"n_ext = {n_ext}"),
                             ("dst", dst, bad_dst, f"n_ext = {n_ext}"),
                             ("mapping", mapping, bad_mapping, f"n_local = {n_local}")):
        if pos >= 0:
            return f"{name}[{pos}] = {int(t[pos])} is out of range [0, {hi})"
    return "an index is out of range"


def _check_plan_args(src, dst, n_ext, mapping, n_local) -> None:
    _check_tensor("src", src, 1, _INDICES, None)
    _check_tensor("dst", dst, 1, _INDICES, src.device)
    if dst.dtype != src.dtype:
        raise ValueError(f"dst has dtype {_name(dst.dtype)} but src has {_name(src.dtype)}")
    if dst.shape != src.shape:
        raise ValueError(f"src has {src.shape[0]} entries but dst has {dst.shape[0]}")
    if n_ext < 0:
        raise ValueError(f"n_ext = {n_ext} is negative")
    if mapping is not None:
        _check_tensor("mapping", mapping, 1, _INDICES, src.device)
        if mapping.shape[0] != n_ext:
            raise ValueError(f"mapping has {mapping.shape[0]} entries but n_ext = {n_ext}")
    elif n_local is not None:
        raise ValueError("n_local is given without a mapping (rows are then the n_ext atoms)")
    if n_local is not None and n_local < 0:
        raise ValueError(f"n_local = {n_local} is negative")
    if src.shape[0] > _MAX_PLAN_LEN or n_ext > _MAX_PLAN_LEN:
        raise ValueError(f"{src.shape[0]} edges / {n_ext} atoms exceed the plan's int32 limit")


@torch.library.custom_op("hipkern::build_plan", mutates_args=())
def _build_plan(
    src: Tensor,
    dst: Tensor,
    n_ext: int,
    mapping: Optional[Tensor] = None,
    n_local: Optional[int] = None,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    _check_plan_args(src, dst, n_ext, mapping, n_local)
    device = src.device
    n_edges = src.shape[0]
    if mapping is not None and n_local is None:
        # The owners are 0 .. max(mapping) (one synchronization, which the
        # build's own index check makes anyway).
        n_local = int(mapping.max()) + 1 if n_ext > 0 else 0
    n_rows = n_ext if mapping is None else n_local
    if device.type == "cpu":
        to64 = lambda t: t.detach().to(torch.int64).contiguous().numpy()  # noqa: E731
        parts = _native.force_plan_cpu(
            to64(src), to64(dst), n_ext, None if mapping is None else to64(mapping),
            n_local or 0,
        )
        return tuple(torch.from_numpy(p) for p in parts)
    _device_ready(device)
    i32 = dict(dtype=torch.int32, device=device)
    dst_order, src_order = torch.empty(n_edges, **i32), torch.empty(n_edges, **i32)
    dst_row_ptr, src_row_ptr = torch.empty(n_rows + 1, **i32), torch.empty(n_rows + 1, **i32)
    if n_edges == 0:
        dst_row_ptr.zero_()
        src_row_ptr.zero_()
        return dst_order, dst_row_ptr, src_order, src_row_ptr
    src, dst = src.contiguous(), dst.contiguous()
    if mapping is not None:
        mapping = mapping.contiguous()
    scratch = torch.empty(_native.force_plan_scratch_bytes(n_edges, n_rows), dtype=torch.uint8,
                          device=device)
    report = _native.force_plan_build_device(
        _bits(src.dtype), src.data_ptr(), dst.data_ptr(), n_edges, n_ext,
        64 if mapping is None else _bits(mapping.dtype),
        0 if mapping is None else mapping.data_ptr(), n_rows,
        [dst_order.data_ptr(), dst_row_ptr.data_ptr(), src_order.data_ptr(),
         src_row_ptr.data_ptr()],
        scratch.data_ptr(), scratch.numel(), _stream(device),
    )
    if report is not None:
        raise ValueError(_bad_index_message(src, dst, n_ext, mapping, n_rows, report))
    return dst_order, dst_row_ptr, src_order, src_row_ptr


@_build_plan.register_fake
def _(src, dst, n_ext, mapping=None, n_local=None):
    _check_plan_args(src, dst, n_ext, mapping, n_local)
    n_edges = src.shape[0]
    if mapping is None:
        n_rows = n_ext
    elif n_local is not None:
        n_rows = n_local
    else:
        # Known only from the data (max(mapping) + 1).
        n_rows = torch.library.get_ctx().new_dynamic_size()
    new = lambda n: src.new_empty((n,), dtype=torch.int32)  # noqa: E731
    return new(n_edges), new(n_rows + 1), new(n_edges), new(n_rows + 1)


def build_plan(
    src: Tensor,
    dst: Tensor,
    n_ext: int,
    mapping: Optional[Tensor] = None,
    n_local: Optional[int] = None,
) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """The CSR plan of an edge list: (dst_order, dst_row_ptr, src_order, src_row_ptr).

    Equal to ``torch.argsort(dst, stable=True)`` and ``torch.searchsorted``
    over ``arange(n_rows + 1)`` (and the same for ``src``), as int32, built
    by a stable counting sort on the tensors' device (on the CPU for CPU
    tensors).

    Parameters
    ----------
    src, dst : Tensor
        Edge endpoints, shape (E,), int32 or int64 (the same), in
        ``[0, n_ext)``.
    n_ext : int
        Extended atom count.
    mapping : Tensor, optional
        Extended -> local owner (shape (n_ext,), int32 or int64): ghosts are
        folded into their owners, and the plan's rows are the local atoms.
    n_local : int, optional
        Local atom count with a mapping (default ``max(mapping) + 1``).

    Returns
    -------
    dst_order, dst_row_ptr, src_order, src_row_ptr : Tensor
        int32, shapes (E,), (n_rows + 1,), (E,), (n_rows + 1,), with n_rows
        = n_ext (or n_local with a mapping).

    Raises
    ------
    ValueError
        A shape or dtype that does not fit, or an index out of range (the
        array, the position and the value named); nothing is returned.

    Notes
    -----
    Every index is checked on the device before the plan is written, which
    synchronizes the stream (the verdict); the build runs on
    ``torch.cuda.current_stream()`` and is complete when the call returns
    (a second synchronization).
    """
    _check_types(src=src, dst=dst)
    if mapping is not None:
        _check_types(mapping=mapping)
    return _build_plan(src, dst, n_ext, mapping, n_local)


def check_plan(dst_order: Tensor, dst_row_ptr: Tensor, src_order: Tensor,
               src_row_ptr: Tensor, n_edges: Optional[int] = None) -> None:
    """Raise ``ValueError`` unless the four arrays are a valid CSR plan.

    Each row_ptr starts at 0, never decreases and ends at E; each order is
    a permutation of ``0 .. E-1``. Runs on the CPU (the arrays are copied
    there: a synchronization), for plans that are not ``build_plan``'s.
    """
    n = dst_order.shape[0] if n_edges is None else n_edges
    names = ("dst_order", "dst_row_ptr", "src_order", "src_row_ptr")
    parts = [_as_int32_plan(name, t.detach().to("cpu")).contiguous().numpy()
             for name, t in zip(names, (dst_order, dst_row_ptr, src_order, src_row_ptr))]
    if dst_order.shape[0] != n or src_order.shape[0] != n:
        raise ValueError(f"the orders have {dst_order.shape[0]} and {src_order.shape[0]} entries "
                         f"but there are {n} edges")
    zeros = torch.zeros((n, 3), dtype=torch.float64).numpy()
    # The CPU assembly validates the plan (CsrPlan::from_parts) first.
    _native.force_assemble_cpu(zeros, zeros, *parts)
