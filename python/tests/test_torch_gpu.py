"""hipkern.torch on the GPU: against the float64 reference on fresh random
graphs with torch's allocator poisoned, on non-default streams, under
torch.compile and CUDA graph capture, and against DeePMD-kit's own Triton
op on the same tensors (when its file is given: HIPKERN_DEEPMD_OP, see
python/tools/fetch-deepmd-op.sh).

Skipped unless torch sees a GPU and this hipkern was built with device
code."""
import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import hipkern  # noqa: E402
import hipkern.torch as ht  # noqa: E402
from force_reference import (  # noqa: E402
    assert_close,
    assert_within,
    random_edges,
    random_values,
    reference,
    summation_bounds,
)

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or hipkern.platform() == "cpu",
    reason="needs a GPU and a hipkern build with device code",
)
SEED = np.random.SeedSequence().entropy % 2**32
DEV = "cuda"
SIZES = [(0, 9), (1, 1), (7, 3), (20_000, 700), (650_000, 8_000), (2_000_000, 32_768)]


def poison_allocator(mib=512):
    """Fills free blocks of torch's caching allocator with NaN and hands
    them back, so that an output the op leaves unwritten reads as NaN."""
    torch.cuda.synchronize()
    blocks = [torch.full((mib * 2**20 // 8 // 8,), float("nan"), dtype=torch.float64, device=DEV)
              for _ in range(8)]
    del blocks


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_edges,n_atoms", SIZES)
def test_gpu_assembly_matches_float64_reference(dtype, n_edges, n_atoms):
    src, dst = random_edges(n_edges, n_atoms, SEED, device=DEV)
    g, r = random_values(n_edges, dtype, SEED + 1, device=DEV)
    poison_allocator()
    plan = ht.build_plan(src, dst, n_atoms)
    force, virial = ht.edge_force_assembly(g, r, *plan)
    assert force.device.type == "cuda" and force.dtype == dtype
    want_f, want_w = reference(g, r, src, dst, n_atoms)
    assert_close("force", force, want_f)
    assert_close("virial", virial, want_w)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
def test_gpu_plan_equals_cpu_plan_and_argsort(index_dtype):
    src, dst = random_edges(300_000, 5_000, SEED + 2, dtype=index_dtype)
    poison_allocator()
    got = ht.build_plan(src.to(DEV), dst.to(DEV), 5_000)
    want = ht.build_plan(src, dst, 5_000)
    rows = torch.arange(5_001)
    do, so = torch.argsort(dst.long(), stable=True), torch.argsort(src.long(), stable=True)
    ref = (do, torch.searchsorted(dst.long()[do], rows), so, torch.searchsorted(src.long()[so], rows))
    for a, b, c in zip(got, want, ref):
        assert a.dtype == torch.int32 and torch.equal(a.cpu(), b) and torch.equal(b.long(), c)


def test_gpu_ghosts_fold_into_their_owners():
    n_local, n_ext = 3_000, 9_000
    gen = torch.Generator().manual_seed(SEED + 3)
    mapping = torch.cat([torch.arange(n_local),
                         torch.randint(0, n_local, (n_ext - n_local,), generator=gen)]).to(DEV)
    src, dst = random_edges(400_000, n_ext, SEED + 4, device=DEV)
    g, r = random_values(400_000, torch.float64, SEED + 5, device=DEV)
    poison_allocator()
    force, virial = ht.edge_force_assembly(g, r, *ht.build_plan(src, dst, n_ext, mapping))
    want_f, want_w = reference(g, r, src, dst, n_local, mapping)
    assert_close("force", force, want_f)
    assert_close("virial", virial, want_w)


def test_gpu_bad_index_is_named_and_nothing_is_returned():
    src, dst = random_edges(100_000, 1_000, SEED + 6, device=DEV)
    src[77_777] = -3
    with pytest.raises(ValueError, match=r"src\[77777\] = -3 is out of range \[0, n_ext = 1000\)"):
        ht.build_plan(src, dst, 1_000)


def test_gpu_runs_on_torchs_current_stream():
    """Inputs are written on a side stream behind a long sleep; the op
    must queue behind them on that stream (on any other stream it would
    read the NaN the inputs held before)."""
    n_edges, n_atoms = 500_000, 10_000
    src, dst = random_edges(n_edges, n_atoms, SEED + 7, device=DEV)
    g_val, r_val = random_values(n_edges, torch.float32, SEED + 8, device=DEV)
    g = torch.full_like(g_val, float("nan"))
    r = torch.full_like(r_val, float("nan"))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        plan = ht.build_plan(src, dst, n_atoms)
        torch.cuda._sleep(200_000_000)  # ~0.1 s of GPU clock
        g.copy_(g_val)
        r.copy_(r_val)
        force, virial = ht.edge_force_assembly(g, r, *plan)
    side.synchronize()
    want_f, want_w = reference(g_val, r_val, src, dst, n_atoms)
    assert_close("force", force, want_f)
    assert_close("virial", virial, want_w)


def test_gpu_assembly_captures_in_a_cuda_graph():
    """No synchronization inside the op: it records into a CUDA graph and
    replays with new inputs."""
    src, dst = random_edges(200_000, 4_000, SEED + 9, device=DEV)
    plan = ht.build_plan(src, dst, 4_000)
    g, r = random_values(200_000, torch.float64, SEED + 10, device=DEV)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ht.edge_force_assembly(g, r, *plan)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        force, virial = ht.edge_force_assembly(g, r, *plan)
    g2, r2 = random_values(200_000, torch.float64, SEED + 11, device=DEV)
    g.copy_(g2)
    r.copy_(r2)
    graph.replay()
    torch.cuda.synchronize()
    want_f, want_w = reference(g2, r2, src, dst, 4_000)
    assert_close("force", force, want_f)
    assert_close("virial", virial, want_w)


def step(src, dst, g, r, n):
    # Elementwise work only around the ops (exact: a scaling by 2): a
    # reduction here would be inductor's own, in its own order.
    force, virial = ht.edge_force_assembly(g, r, *ht.build_plan(src, dst, n))
    return force * 2.0, virial * 2.0


def test_gpu_torch_compile_gives_eager_bits():
    src, dst = random_edges(300_000, 6_000, SEED + 12, device=DEV)
    g, r = random_values(300_000, torch.float32, SEED + 13, device=DEV)
    compiled = torch.compile(step, fullgraph=True)
    for got, want in zip(compiled(src, dst, g, r, 6_000), step(src, dst, g, r, 6_000)):
        assert torch.equal(got, want)


def test_gpu_opcheck():
    src, dst = random_edges(5_000, 300, SEED + 14, device=DEV)
    g, r = random_values(5_000, torch.float32, SEED + 15, device=DEV)
    plan = ht.build_plan(src, dst, 300)
    torch.library.opcheck(torch.ops.hipkern.edge_force_assembly.default, (g, r, *plan))
    torch.library.opcheck(torch.ops.hipkern.build_plan.default, (src, dst, 300))


def deepmd_op():
    path = os.environ.get("HIPKERN_DEEPMD_OP")
    if not path or not os.path.isfile(path):
        pytest.skip("DeePMD's force_assembly.py not given (HIPKERN_DEEPMD_OP)")
    spec = importlib.util.spec_from_file_location("deepmd_force_assembly", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not mod.FORCE_ASSEMBLY_TRITON_AVAILABLE:
        pytest.skip("triton is not available")
    return mod.edge_force_assembly


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_edges,n_atoms", SIZES[2:])
def test_gpu_agrees_with_deepmds_triton_op(dtype, n_edges, n_atoms):
    theirs_op = deepmd_op()
    src, dst = random_edges(n_edges, n_atoms, SEED + 16, device=DEV)
    g, r = random_values(n_edges, dtype, SEED + 17, device=DEV)
    rows = torch.arange(n_atoms + 1, device=DEV)
    do, so = torch.argsort(dst, stable=True), torch.argsort(src, stable=True)
    plan = (do, torch.searchsorted(dst[do], rows), so, torch.searchsorted(src[so], rows))
    ours = ht.edge_force_assembly(g, r, *plan)
    theirs = theirs_op(g, r, *plan)
    want = reference(g, r, src, dst, n_atoms)
    # DeePMD's op adds in its input precision (float32 atomics), so it is
    # held to the bound of a float32 sum in any order; hipkern's float64
    # sums to one rounding.
    bounds = summation_bounds(g, r, src, dst, n_atoms, dtype)
    for name, a, b, w, bound in zip(("force", "virial"), ours, theirs, want, bounds):
        assert_close(f"hipkern {name}", a, w)
        assert_within(f"DeePMD {name}", b, w, bound)
