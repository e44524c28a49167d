"""hipkern.nearfield: tables against closed forms and their own symmetry and
scaling rules, the cache round trip, List 1 on the CPU against an
independent numpy evaluation of the documented sum, bad inputs, and (where
a GPU and a device build exist) List 1 on the device against the CPU
evaluator: the exact contract bitwise, the fast one within 1e-13.

Trees and densities are fresh random draws on every run; a failure prints
the seed that reproduces it.
"""
import itertools
import math
import types

import numpy as np
import pytest

import hipkern
from hipkern import nearfield as nf

CUBE_CENTRE = (3 * math.log(2 + math.sqrt(3)) - math.pi / 2) / (4 * math.pi)
SQUARE_CENTRE = (math.log(2) / 2 + 1.5 - math.pi / 4) / (2 * math.pi)


@pytest.fixture(scope="module")
def laplace3():
    return nf.build_table("laplace", 3, 3)


@pytest.fixture(scope="module")
def laplace2():
    return nf.build_table("laplace", 2, 3)


def fresh_seed():
    return int(np.random.SeedSequence().entropy % 2**63)


# {{{ an independent List 1: the documented sum, one pair at a time

def case_ids(dim):
    """Case vector -> id from the documented rules: the zero vector, same-size
    neighbours in {-4,0,4}^d, half-size targets in {+-1,+-3}^d with a 3,
    twice-size targets in {+-2,+-6}^d with a 6; ids in lexicographic order."""
    vecs = {(0,) * dim}
    for comps, top in (((-4, 0, 4), 4), ((-3, -1, 1, 3), 3), ((-6, -2, 2, 6), 6)):
        vecs |= {v for v in itertools.product(comps, repeat=dim)
                 if max(map(abs, v)) == top}
    return {v: i for i, v in enumerate(sorted(vecs))}


def scaling(table, rho):
    """(scale, displacement) of a source box of side rho*L (list1.md)."""
    d = table.dim
    if table.kernel == "constant":
        return rho ** d, 0.0
    if table.derivative is not None:
        return rho, 0.0
    if d == 2:
        return rho * rho, -rho * rho * math.log(rho) / (2 * math.pi)
    return rho * rho, 0.0


def reference_list1(table, tree, f):
    """u[i, t] = sum_S sum_s f[S, s] (scale T[case, s, t] + disp N_s), pairs in
    list order, source modes in order, as list1.md states it."""
    per_level = isinstance(table, list)
    tables = table if per_level else [table]
    dense = [t.dense() for t in tables]
    norm = tables[0].mode_normalizers
    ids = case_ids(tree.dim)
    nq = tables[0].n_modes
    f = f.reshape(tree.n_boxes, nq)
    u = np.zeros((tree.n_targets, nq))
    for i, b in enumerate(tree.target_boxes):
        for j in range(tree.source_starts[i], tree.source_starts[i + 1]):
            s = tree.source_boxes[j]
            h = tree.root_extent / 2.0 ** tree.levels[s]
            c = 4 * (tree.centers[b] - tree.centers[s]) / h
            cv = np.rint(c).astype(int)
            assert np.abs(c - cv).max() < 1e-6
            if per_level:
                tab, scale, disp = dense[tree.levels[s]], 1.0, 0.0
            else:
                tab = dense[0]
                scale, disp = scaling(table, h / table.box_extent)
            m = tab[ids[tuple(cv)]]
            acc = np.zeros(nq)
            for k in range(nq):
                acc = acc + f[s, k] * m[k]
            u[i] += scale * acc + (disp * float(np.dot(f[s], norm)) if disp else 0.0)
    return u


def assert_close(got, want, rel, what):
    assert got.shape == want.shape, what
    assert np.isfinite(got).all(), what
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err <= rel, f"{what}: relative max-norm error {err:.2e} > {rel:.0e}"


def assert_bitwise(got, want, what):
    assert got.shape == want.shape and got.dtype == want.dtype == np.float64, what
    diff = np.flatnonzero(got.view(np.uint64) != want.view(np.uint64))
    assert diff.size == 0, (
        f"{what}: {diff.size} of {got.size} values differ, first at {diff[0]}: "
        f"{got.ravel()[diff[0]]!r} != {want.ravel()[diff[0]]!r}"
    )

# }}}


# {{{ tables

def test_table_3d_closed_form_and_conventions(laplace3):
    t = laplace3
    assert (t.dim, t.q, t.n_modes, t.n_cases, t.kernel) == (3, 3, 27, 139, "laplace")
    assert t.symmetry == "full" and not t.loaded and t.lam is None and t.derivative is None
    T = t.dense()
    assert T.shape == (139, 27, 27) and T.dtype == np.float64
    # The self case's entries summed over the source modes at the centre node
    # (1, 1, 1) = 13: the potential of the unit cube at its centre.
    total = math.fsum(T[t.self_case, :, 13])
    assert abs(total - CUBE_CENTRE) <= 1e-12 * CUBE_CENTRE
    ids = case_ids(3)
    assert [tuple(v) for v in t.case_vectors] == sorted(ids)
    assert ids[(0, 0, 0)] == t.self_case
    code = ((t.case_vectors + 6) * 13 ** np.arange(2, -1, -1)).sum(axis=1)
    assert (t.case_indices[code] == np.arange(139)).all()
    assert (np.delete(t.case_indices, code) == -1).all()
    # Symmetry: the reduced rows are the dense table's values at their ids,
    # 2,510 of them; the mode normalisers are the Gauss-Legendre weights.
    assert t.reduced_entry_ids.size == 2510
    assert_bitwise(T.ravel()[t.reduced_entry_ids], t.reduced_data, "reduced rows")
    x, w = np.polynomial.legendre.leggauss(3)
    assert np.allclose(t.q_points[:, 2][:3], (x + 1) / 2, rtol=0, atol=1e-15)
    assert np.allclose(t.mode_normalizers, np.einsum("i,j,k->ijk", w, w, w).ravel() / 8,
                       rtol=1e-14, atol=0)


def test_table_2d_closed_form_and_dense_build(laplace2):
    total = math.fsum(laplace2.dense()[laplace2.self_case, :, 4])
    assert abs(total - SQUARE_CENTRE) <= 1e-12 * SQUARE_CENTRE
    # Entry by entry (volumential's way) gives bitwise the expansion of the
    # representatives at a power-of-two extent.
    dense = nf.build_table("laplace", 2, 3, symmetry="none")
    assert dense.symmetry == "none" and dense.reduced_entry_ids is None
    assert_bitwise(dense.dense(), laplace2.dense(), "dense vs reduced build")


def test_table_scaling_rule_2d_laplace():
    # T at rho*L = rho^2 T(L) - rho^2 ln(rho) N_s(L) / (2 pi): the rule the
    # List 1 reference applies per source box.
    a, b = nf.build_table("laplace", 2, 2, 1.0), nf.build_table("laplace", 2, 2, 0.25)
    rho = 0.25
    want = rho**2 * a.dense() - rho**2 * math.log(rho) / (2 * math.pi) * (
        a.mode_normalizers[None, :, None])
    assert_close(b.dense(), want, 1e-13, "2D Laplace scaling")


def test_cache_round_trip(tmp_path):
    path = tmp_path / "tables.db"
    built = nf.build_table("laplace", 2, 3, 0.5, cache=path)
    assert not built.loaded and built.cache == str(path)
    again = nf.build_table("laplace", 2, 3, 0.5, cache=str(path))
    assert again.loaded and "loaded from" in repr(again)
    assert_bitwise(again.dense(), built.dense(), "cached table")
    assert_bitwise(again.reduced_data, built.reduced_data, "cached rows")
    assert (again.reduced_entry_ids == built.reduced_entry_ids).all()
    # Other parameters are another key; rebuild replaces the entry.
    assert not nf.build_table("laplace", 2, 3, 1.0, cache=path).loaded
    assert not nf.build_table("laplace", 2, 3, 0.5, cache=path, symmetry="none").loaded
    assert not nf.build_table("yukawa", 2, 3, 0.5, lam=2.0, cache=path).loaded
    assert nf.build_table("yukawa", 2, 3, 0.5, lam=2.0, cache=path).loaded
    assert not nf.build_table("laplace", 2, 3, 0.5, cache=path, rebuild=True).loaded
    assert nf.build_table("laplace", 2, 3, 0.5, cache=path).loaded


def test_cache_not_a_database(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"not an sqlite file" * 100)
    with pytest.raises((ValueError, OSError), match="table cache"):
        nf.build_table("laplace", 2, 2, cache=p)

# }}}


# {{{ trees

def test_trees_and_box_points(laplace2):
    tree = nf.uniform_tree(2, 2)
    assert (tree.n_boxes, tree.n_targets) == (16, 16)
    # A corner leaf touches 4 leaves, an edge one 6, an interior one 9.
    counts = np.diff(tree.source_starts.astype(int))
    assert sorted(counts) == [4] * 4 + [6] * 8 + [9] * 4
    pts = nf.box_points(nf.uniform_tree(2, 0), 3)
    assert_bitwise(pts[0], laplace2.q_points, "level-0 box points vs the table's nodes")
    tree = nf.random_tree(3, fresh_seed(), 3, root_lower=(-1, 0, 2), root_extent=2.0)
    pts = nf.box_points(tree, 2)
    h = tree.root_extent / 2.0 ** tree.levels
    lower = tree.centers - h[:, None] / 2
    assert pts.shape == (tree.n_boxes, 8, 3)
    inside = (pts > lower[:, None]) & (pts < (lower + h[:, None])[:, None])
    assert inside.all()
    assert np.allclose(pts[:, 0], lower + h[:, None] * (1 - 1 / math.sqrt(3)) / 2,
                       rtol=0, atol=4e-15)
    assert not tree.centers.flags.writeable


def test_from_boxtree_arrays():
    tree = nf.random_tree(2, 3, 3)
    # boxtree pads its box arrays past the box count (aligned_nboxes).
    padded = np.concatenate([tree.centers.T, np.full((2, 5), np.nan)], axis=1)
    fake_tree = types.SimpleNamespace(box_centers=padded,
                                      box_levels=tree.levels.astype(np.uint8),
                                      root_extent=tree.root_extent)
    fake_trav = types.SimpleNamespace(
        target_boxes=tree.target_boxes.astype(np.int32),
        neighbor_source_boxes_starts=tree.source_starts.astype(np.int32),
        neighbor_source_boxes_lists=tree.source_boxes.astype(np.int32))
    t = nf.Tree.from_boxtree(fake_tree, fake_trav)
    for name in ("centers", "levels", "target_boxes", "source_starts", "source_boxes"):
        assert np.array_equal(getattr(t, name), getattr(tree, name)), name

# }}}


# {{{ List 1 on the CPU

@pytest.mark.parametrize("case", ["laplace3", "laplace2", "target2", "constant2"])
def test_list1_cpu_against_reference(case, request):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    if case in ("laplace3", "laplace2"):
        table = request.getfixturevalue(case)
    elif case == "target2":
        table = nf.build_table("laplace", 2, 2, 0.5, derivative=("target", 1))
    else:
        table = nf.build_table("constant", 2, 2, 2.0)
    tree = nf.random_tree(table.dim, seed, 3 if table.dim == 3 else 5,
                          root_extent=float(rng.uniform(0.5, 2)))
    f = rng.standard_normal((tree.n_boxes, table.n_modes))
    u = nf.evaluate_list1(table, tree, f)
    assert u.shape == (tree.n_targets, table.n_modes)
    assert_close(u, reference_list1(table, tree, f), 1e-13, f"{case}, seed {seed}")
    flat = nf.evaluate_list1(table, tree, f.ravel().astype(np.float32))
    assert flat.shape == (tree.n_targets * table.n_modes,)


def test_list1_cpu_user_tree(laplace2):
    # A tree of the user's own: some target boxes, lists reversed.
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    full = nf.random_tree(2, seed, 4)
    targets = np.sort(rng.choice(full.n_boxes, full.n_boxes // 2, replace=False))
    lists = [full.source_boxes[full.source_starts[b]:full.source_starts[b + 1]][::-1]
             for b in targets]
    starts = np.concatenate([[0], np.cumsum([len(x) for x in lists])])
    tree = nf.Tree(full.centers, full.levels.astype(np.int64), full.root_extent,
                   starts, np.concatenate(lists), targets)
    f = rng.standard_normal(tree.n_boxes * laplace2.n_modes)
    u = nf.evaluate_list1(laplace2, tree, f)
    assert_close(u.reshape(-1, 9), reference_list1(laplace2, tree, f), 1e-13,
                 f"seed {seed}")


def test_list1_cpu_yukawa_per_level():
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    tree = nf.random_tree(2, seed, 4)
    tables = [nf.build_table("yukawa", 2, 2, 2.0**-level, lam=3.0) for level in range(5)]
    f = rng.standard_normal((tree.n_boxes, 4))
    u = nf.evaluate_list1(tables, tree, f)
    assert_close(u, reference_list1(tables, tree, f), 1e-13, f"seed {seed}")
    with pytest.raises(ValueError, match="per source level"):
        nf.evaluate_list1(tables[0], tree, f)
    with pytest.raises(ValueError, match="level"):
        nf.evaluate_list1(tables[:2], tree, f)

# }}}


# {{{ bad inputs: ValueError naming the problem, before any work

@pytest.mark.parametrize("kwargs, match", [
    (dict(kernel="helmholtz"), "kernel"),
    (dict(kernel=3), "kernel"),
    (dict(q=0), "q = 0"),
    (dict(q=65), "q = 65"),
    (dict(q=-1), "q = -1"),
    (dict(q=2.5), "q must be an integer"),
    (dict(q=True), "q must be an integer"),
    (dict(dim=3, q=16), "q ≤ 15"),
    (dict(dim=4), "dimension 4"),
    (dict(box_extent=0.0), "extent"),
    (dict(box_extent=float("nan")), "extent"),
    (dict(box_extent="1"), "box_extent"),
    (dict(kernel="yukawa"), "lam"),
    (dict(kernel="yukawa", lam=-1.0), "lam"),
    (dict(kernel="yukawa", lam=float("inf")), "lam"),
    (dict(lam=1.0), "lam"),
    (dict(derivative=("target", 5)), "axis"),
    (dict(derivative=("sideways", 0)), "derivative"),
    (dict(derivative=("direction", (1.0, 0.0))), "direction"),
    (dict(symmetry="half"), "symmetry"),
    (dict(rebuild="yes"), "rebuild"),
    (dict(cache=3), "cache"),
])
def test_build_table_bad_inputs(kwargs, match, tmp_path):
    args = dict(kernel="laplace", dim=3, q=2, cache=tmp_path / "c.db")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        nf.build_table(**args)
    # Refused before the cache was opened (or created).
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("edit, match", [
    (lambda a: a.update(centers=a["centers"][:, :1]), "centers"),
    (lambda a: a.update(centers=a["centers"].astype(complex)), "centers"),
    (lambda a: a["centers"].__setitem__((0, 0), np.nan), "centers"),
    (lambda a: a.update(levels=a["levels"][:-1]), "levels"),
    (lambda a: a.update(levels=a["levels"].astype(float)), "levels"),
    (lambda a: a["levels"].__setitem__(0, -1), r"levels\[0\]"),
    (lambda a: a["levels"].__setitem__(0, 21), r"levels\[0\]"),
    (lambda a: a.update(root_extent=0.0), "root_extent"),
    (lambda a: a["source_boxes"].__setitem__(3, 10**6), r"source_boxes\[3\]"),
    (lambda a: a.update(source_starts=a["source_starts"][:-1]), "source_starts"),
    (lambda a: a["source_starts"].__setitem__(2, 0), "source_starts"),
    (lambda a: a.update(target_boxes=np.array([0, 1])), "source_starts"),
    (lambda a: a.update(target_boxes=[-1] * (len(a["source_starts"]) - 1)),
     r"target_boxes\[0\]"),
])
def test_tree_bad_inputs(edit, match):
    t = nf.uniform_tree(2, 2)
    args = dict(centers=t.centers.copy(), levels=t.levels.astype(np.int64),
                root_extent=1.0, source_starts=t.source_starts.copy(),
                source_boxes=t.source_boxes.copy())
    edit(args)
    with pytest.raises(ValueError, match=match):
        nf.Tree(**args)


def test_list1_bad_inputs(laplace2, laplace3):
    tree = nf.uniform_tree(2, 2)
    f = np.ones((tree.n_boxes, 9))
    for density, match in [
        (f[:-1], "density has shape"), (f.ravel()[:-1], "density has shape"),
        (f.astype(int), "density must have"), (f.astype(complex), "density must have"),
        (np.where(np.arange(f.size).reshape(f.shape) == 20, np.nan, f),
         "density at box 2, node 2 is not finite"),
    ]:
        for device in (None, 0):
            with pytest.raises(ValueError, match=match):
                nf.evaluate_list1(laplace2, tree, density, device=device)
    for kwargs, match in [(dict(contract="slow"), "contract"), (dict(layout="sparse"), "layout"),
                          (dict(device=-1), "device"), (dict(device=True), "device"),
                          (dict(device="0"), "device")]:
        with pytest.raises(ValueError, match=match):
            nf.evaluate_list1(laplace2, tree, f, **kwargs)
    with pytest.raises(ValueError, match="dim"):
        nf.evaluate_list1(laplace3, tree, f)
    with pytest.raises(ValueError, match="table"):
        nf.evaluate_list1([], tree, f)
    with pytest.raises(ValueError, match="tree"):
        nf.evaluate_list1(laplace2, {"centers": tree.centers}, f)
    # Boxes that do not touch are no List 1 pair: named, on either path.
    starts = tree.source_starts.copy()
    sources = tree.source_boxes.copy()
    sources[0] = 15
    bad = nf.Tree(tree.centers, tree.levels, 1.0, starts, sources)
    for device in (None, 0):
        with pytest.raises(ValueError, match="not a List 1 pair"):
            nf.evaluate_list1(laplace2, bad, f, device=device)


def test_tree_generator_bad_inputs():
    for call, match in [
        (lambda: nf.uniform_tree(4, 2), "dimension 4"),
        (lambda: nf.uniform_tree(3, 9), "2\\^24"),
        (lambda: nf.uniform_tree(2, -1), "level"),
        (lambda: nf.uniform_tree(2, 2, root_lower=(0.0,)), "root_lower"),
        (lambda: nf.random_tree(2, -5, 3), "seed"),
        (lambda: nf.random_tree(2, 1, 0), "maximum level 0"),
        (lambda: nf.random_tree(2, 1, 21), "maximum level 21"),
        (lambda: nf.random_tree(3, 1, 20, refine_probability=1.0), "refine_probability"),
        (lambda: nf.random_tree(3, 1, 20, min_level=20), "min_level"),
        (lambda: nf.random_tree(2, 1, 3, refine_probability=1.5), "refine probability"),
        (lambda: nf.random_tree(2, 1, 3, attractors=10**9), "attractors"),
        (lambda: nf.random_tree(2, 1, 3, root_extent=-1.0), "root extent"),
        (lambda: nf.box_points(nf.uniform_tree(2, 1), 0), "q = 0"),
        (lambda: nf.box_points("tree", 2), "tree"),
    ]:
        with pytest.raises(ValueError, match=match):
            call()

# }}}


# {{{ the device

def test_device_request_on_cpu_build(laplace2):
    if hipkern.platform() != "cpu":
        pytest.skip("a device build")
    tree = nf.uniform_tree(2, 2)
    f = np.ones((tree.n_boxes, 9))
    for call in (lambda: nf.evaluate_list1(laplace2, tree, f, device=0),
                 lambda: nf.Evaluator(laplace2, 0)):
        with pytest.raises(RuntimeError, match="built for the cpu platform"):
            call()


@pytest.fixture(scope="module")
def gpu(laplace2):
    """Device 0, for the test_gpu_* tests: skipped on a cpu build (no device
    code) and where no usable device exists."""
    if hipkern.platform() == "cpu":
        pytest.skip("a cpu build: no device code")
    try:
        nf.Evaluator(laplace2, 0)
    except RuntimeError as e:
        pytest.skip(f"no usable device: {e}")
    return 0


def device_cases(laplace3, laplace2):
    yield "3D Laplace", laplace3, 3
    yield "2D Laplace", laplace2, 5
    yield "2D direction", nf.build_table("laplace", 2, 3, derivative=("direction", (1.0, -2.0))), 4
    yield "3D dense build q=2", nf.build_table("laplace", 3, 2, symmetry="none"), 3


def test_gpu_list1_against_cpu(gpu, laplace3, laplace2):
    for name, table, levels in device_cases(laplace3, laplace2):
        seed = fresh_seed()
        rng = np.random.default_rng(seed)
        tree = nf.random_tree(table.dim, seed, levels)
        f = rng.standard_normal((tree.n_boxes, table.n_modes))
        want = nf.evaluate_list1(table, tree, f)
        for layout in nf.LAYOUTS:
            if layout == "orbit" and table.derivative is not None:
                continue
            what = f"{name}, {layout}, seed {seed}"
            exact = nf.evaluate_list1(table, tree, f, device=gpu, contract="exact",
                                      layout=layout)
            fast = nf.evaluate_list1(table, tree, f, device=gpu, layout=layout)
            if table.symmetry == "full" or layout in ("auto", "dense"):
                assert_bitwise(exact, want, what + ", exact")
            else:
                # Compact rows of a table built entry by entry hold each
                # orbit's representative: the CPU's values to a few ulps.
                assert_close(exact, want, 1e-13, what + ", exact")
            assert_close(fast, want, 1e-13, what + ", fast")


def test_gpu_evaluator_plans_and_per_level(gpu, laplace3):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    tree = nf.random_tree(3, seed, 4)
    for contract in nf.CONTRACTS:
        ev = nf.Evaluator(laplace3, gpu, contract=contract)
        assert ev.layout == "orbit" and ev.contract == contract and ev.upload_bytes > 0
        plan = ev.plan(tree)
        assert plan.kernel and plan.reason
        for _ in range(2):
            f = rng.standard_normal(tree.n_boxes * 27)
            want = nf.evaluate_list1(laplace3, tree, f)
            for got in (plan.evaluate(f), ev.evaluate(tree, f)):
                if contract == "exact":
                    assert_bitwise(got, want, f"plan {plan.kernel}, seed {seed}")
                else:
                    assert_close(got, want, 1e-13, f"plan {plan.kernel}, seed {seed}")
    tree = nf.random_tree(2, seed, 4)
    tables = [nf.build_table("yukawa", 2, 3, 2.0**-level, lam=3.0) for level in range(5)]
    f = rng.standard_normal((tree.n_boxes, 9))
    want = nf.evaluate_list1(tables, tree, f)
    assert_bitwise(nf.evaluate_list1(tables, tree, f, device=gpu, contract="exact"), want,
                   f"yukawa per level, seed {seed}")
    assert_close(nf.evaluate_list1(tables, tree, f, device=gpu), want, 1e-13,
                 f"yukawa per level, seed {seed}")
    with pytest.raises(ValueError, match="density"):
        plan.evaluate(f[:-1])

# }}}
