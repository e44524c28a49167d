"""hipkern.torch on CPU tensors: the plan and the assembly against the
float64 reference and torch's argsort + searchsorted, the torch.library
registration (opcheck, torch.compile, torch.export), and bad inputs."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
import hipkern.torch as ht  # noqa: E402
from force_reference import assert_close, random_edges, random_values, reference  # noqa: E402

SEED = np.random.SeedSequence().entropy % 2**32  # fresh inputs every run


def torch_plan(src, dst, n_rows):
    rows = torch.arange(n_rows + 1, dtype=torch.int64)
    do, so = torch.argsort(dst, stable=True), torch.argsort(src, stable=True)
    return do, torch.searchsorted(dst[do], rows), so, torch.searchsorted(src[so], rows)


@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("n_edges,n_atoms", [(0, 0), (0, 5), (1, 1), (3000, 200), (20000, 64)])
def test_build_plan_equals_argsort_searchsorted(index_dtype, n_edges, n_atoms):
    src, dst = random_edges(n_edges, n_atoms, SEED, dtype=index_dtype)
    plan = ht.build_plan(src, dst, n_atoms)
    want = torch_plan(src.long(), dst.long(), n_atoms)
    for name, got, w in zip(("dst_order", "dst_row_ptr", "src_order", "src_row_ptr"), plan, want):
        assert got.dtype == torch.int32, name
        assert torch.equal(got.long(), w), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n_edges,n_atoms", [(0, 7), (1, 2), (5000, 300), (40000, 1000)])
def test_assembly_matches_float64_reference(dtype, n_edges, n_atoms):
    src, dst = random_edges(n_edges, n_atoms, SEED + 1)
    g, r = random_values(n_edges, dtype, SEED + 2)
    force, virial = ht.edge_force_assembly(g, r, *ht.build_plan(src, dst, n_atoms))
    assert force.dtype == dtype and virial.dtype == dtype
    want_f, want_w = reference(g, r, src, dst, n_atoms)
    assert_close("force", force, want_f)
    assert_close("virial", virial, want_w)


def test_deepmd_int64_plan_gives_the_same_bits():
    src, dst = random_edges(8000, 500, SEED + 3)
    g, r = random_values(8000, torch.float32, SEED + 4)
    ours = ht.edge_force_assembly(g, r, *ht.build_plan(src, dst, 500))
    theirs = ht.edge_force_assembly(g, r, *torch_plan(src, dst, 500))
    assert torch.equal(ours[0], theirs[0]) and torch.equal(ours[1], theirs[1])


@pytest.mark.parametrize("give_n_local", [False, True])
def test_ghosts_fold_into_their_owners(give_n_local):
    n_local, n_ext, n_edges = 150, 400, 6000
    gen = torch.Generator().manual_seed(SEED + 5)
    mapping = torch.cat([torch.arange(n_local), torch.randint(0, n_local, (n_ext - n_local,),
                                                               generator=gen)])
    src, dst = random_edges(n_edges, n_ext, SEED + 6)
    g, r = random_values(n_edges, torch.float64, SEED + 7)
    plan = ht.build_plan(src, dst, n_ext, mapping, n_local if give_n_local else None)
    assert plan[1].shape == (n_local + 1,)
    force, virial = ht.edge_force_assembly(g, r, *plan)
    want_f, want_w = reference(g, r, src, dst, n_local, mapping)
    assert_close("force", force, want_f)
    assert_close("virial", virial, want_w)


def test_ops_pass_opcheck():
    src, dst = random_edges(500, 40, SEED + 8)
    g, r = random_values(500, torch.float32, SEED + 9)
    plan = ht.build_plan(src, dst, 40)
    torch.library.opcheck(torch.ops.hipkern.edge_force_assembly.default, (g, r, *plan))
    torch.library.opcheck(torch.ops.hipkern.build_plan.default, (src, dst, 40))
    mapping = torch.arange(40) % 10
    torch.library.opcheck(torch.ops.hipkern.build_plan.default, (src, dst, 40, mapping, 10))


def step(src, dst, g, r, n):
    force, virial = ht.edge_force_assembly(g, r, *ht.build_plan(src, dst, n))
    return force * 2.0, virial.sum(0)


def test_torch_compile_traces_both_ops():
    src, dst = random_edges(3000, 100, SEED + 10)
    g, r = random_values(3000, torch.float64, SEED + 11)
    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    for got, want in zip(compiled(src, dst, g, r, 100), step(src, dst, g, r, 100)):
        assert torch.equal(got, want)


def test_torch_export_keeps_the_ops():
    class Step(torch.nn.Module):
        def forward(self, src, dst, g, r):
            return step(src, dst, g, r, 100)

    src, dst = random_edges(3000, 100, SEED + 12)
    g, r = random_values(3000, torch.float32, SEED + 13)
    exported = torch.export.export(Step(), (src, dst, g, r))
    text = str(exported.graph)
    assert "hipkern.edge_force_assembly" in text and "hipkern.build_plan" in text
    for got, want in zip(exported.module()(src, dst, g, r), step(src, dst, g, r, 100)):
        assert torch.equal(got, want)


def test_backward_says_the_op_is_not_differentiable():
    src, dst = random_edges(100, 10, SEED + 14)
    g, r = random_values(100, torch.float64, SEED + 15)
    g.requires_grad_(True)
    force, _ = ht.edge_force_assembly(g, r, *ht.build_plan(src, dst, 10))
    with pytest.raises(RuntimeError, match="not differentiable"):
        force.sum().backward()


def good_inputs():
    src, dst = random_edges(200, 20, SEED + 16)
    g, r = random_values(200, torch.float32, SEED + 17)
    return g, r, list(ht.build_plan(src, dst, 20))


@pytest.mark.parametrize("change,match", [
    (lambda a: a.__setitem__(0, a[0][:, :2]), r"g must have shape \(E, 3\)"),
    (lambda a: a.__setitem__(0, a[0].double()), "edge_vec has dtype"),
    (lambda a: a.__setitem__(0, a[0].half()), "g has dtype float16"),
    (lambda a: a.__setitem__(1, a[1][:-1]), "edge_vec has shape"),
    (lambda a: a.__setitem__(2, a[2][:-1]), "dst_order has 199 entries but there are 200 edges"),
    (lambda a: a.__setitem__(3, a[3][:-1]), "src_row_ptr has 21 entries but dst_row_ptr has 20"),
    (lambda a: a.__setitem__(4, a[4].short()), "src_order has dtype int16"),
    (lambda a: a.__setitem__(2, a[2].flip(0)[:1].repeat(200)), "dst_order.* a second time"),
    (lambda a: a[3].__setitem__(-1, 250), "dst_row_ptr ends at 250 but there are 200 edges"),
    (lambda a: a.__setitem__(4, a[4].long() + 2**32), r"src_order\[0\] = 42949"),
])
def test_bad_assembly_inputs_are_named(change, match):
    g, r, plan = good_inputs()
    args = [g, r, *plan]
    change(args)
    with pytest.raises(ValueError, match=match):
        ht.edge_force_assembly(*args)


def test_bad_plan_inputs_are_named():
    src, dst = random_edges(300, 30, SEED + 18)
    bad = dst.clone()
    bad[17] = 30
    with pytest.raises(ValueError, match=r"dst\[17\] = 30 is out of range \[0, n_ext = 30\)"):
        ht.build_plan(src, bad, 30)
    with pytest.raises(ValueError, match="dst has dtype int32 but src has int64"):
        ht.build_plan(src, dst.int(), 30)
    with pytest.raises(ValueError, match="src has 300 entries but dst has 299"):
        ht.build_plan(src, dst[:-1], 30)
    with pytest.raises(ValueError, match="mapping has 29 entries but n_ext = 30"):
        ht.build_plan(src, dst, 30, torch.zeros(29, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"mapping\[5\] = 5 is out of range \[0, n_local = 5\)"):
        ht.build_plan(src, dst, 30, torch.arange(30) % 6, 5)
    with pytest.raises(ValueError, match="n_local is given without a mapping"):
        ht.build_plan(src, dst, 30, None, 4)
    with pytest.raises(ValueError, match="n_ext = -1 is negative"):
        ht.build_plan(src, dst, -1)
    with pytest.raises(TypeError, match="src must be a torch.Tensor"):
        ht.build_plan(src.numpy(), dst, 30)


def test_check_plan_names_the_fault():
    src, dst = random_edges(300, 30, SEED + 19)
    plan = list(ht.build_plan(src, dst, 30))
    ht.check_plan(*plan)
    plan[1] = plan[1].clone()
    plan[1][5] = plan[1][4] - 1
    with pytest.raises(ValueError, match="dst_row_ptr is not monotone"):
        ht.check_plan(*plan)
