"""The float64 reference of force/virial assembly and random edge lists,
shared by the torch tests (CPU and GPU) and the bench.

The reference is the defining sum, edge by edge in float64 (numpy), with
no plan: F_k = sum_{dst(e)=k} g_e - sum_{src(e)=k} g_e and the virial
-g_e (x) edge_vec_e split half to each endpoint (after ghost folding).
"""
import numpy as np
import torch


def reference(g, edge_vec, src, dst, n_rows, mapping=None):
    """(force (n, 3), virial (n, 9)) as float64 numpy arrays."""
    g = g.detach().cpu().double().numpy()
    r = edge_vec.detach().cpu().double().numpy()
    src = src.detach().cpu().long().numpy()
    dst = dst.detach().cpu().long().numpy()
    if mapping is not None:
        m = mapping.detach().cpu().long().numpy()
        src, dst = m[src], m[dst]
    outer = -(g[:, :, None] * r[:, None, :]).reshape(-1, 9)
    force = np.zeros((n_rows, 3))
    virial = np.zeros((n_rows, 9))
    np.add.at(force, dst, g)
    np.add.at(force, src, -g)
    np.add.at(virial, dst, 0.5 * outer)
    np.add.at(virial, src, 0.5 * outer)
    return force, virial


def random_edges(n_edges, n_atoms, seed, hubs=True, dtype=torch.int64, device="cpu"):
    """src, dst: uniform endpoints, and (hubs) a fifth of the destinations
    on a few atoms, so that some rows are hundreds of times the mean."""
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(0, max(n_atoms, 1), (n_edges,), generator=gen)
    dst = torch.randint(0, max(n_atoms, 1), (n_edges,), generator=gen)
    if hubs and n_edges >= 10 and n_atoms > 4:
        k = n_edges // 5
        dst[:k] = torch.randint(0, 4, (k,), generator=gen)
    return src.to(dtype).to(device), dst.to(dtype).to(device)


def random_values(n_edges, dtype, seed, device="cpu"):
    """g, edge_vec: normal values of mixed magnitudes (1e-3 .. 1e3)."""
    gen = torch.Generator().manual_seed(seed)
    scale = torch.exp(torch.empty(n_edges, 1).uniform_(-7, 7, generator=gen))
    g = torch.randn(n_edges, 3, generator=gen, dtype=torch.float64) * scale
    r = torch.randn(n_edges, 3, generator=gen, dtype=torch.float64)
    return g.to(dtype).to(device), r.to(dtype).to(device)


def assert_close(name, got, want):
    """Every element of `got` (a tensor of float32/float64) against the
    float64 reference `want`: float64 within 1e-12 of the max norm; float32
    the reference rounded once (2^-24 relative) plus 1e-12 of the max norm
    for the order of the float64 sums. NaN anywhere fails."""
    got64 = got.detach().cpu().double().numpy()
    assert got64.shape == want.shape, f"{name}: shape {got64.shape} != {want.shape}"
    scale = max(float(np.abs(want).max(initial=0.0)), 1e-300)
    rel = 2.0**-24 if got.dtype == torch.float32 else 0.0
    bound = rel * np.abs(want) + 1e-12 * scale
    err = np.abs(got64 - want)
    bad = ~(err <= bound)  # NaN counts as bad
    if bad.any():
        i = np.argwhere(bad)[0]
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.size} elements off; first at {tuple(i)}: "
            f"got {got64[tuple(i)]!r}, want {want[tuple(i)]!r} (bound {bound[tuple(i)]:.3e})"
        )


def summation_bounds(g, edge_vec, src, dst, n_rows, dtype):
    """Per element of (force, virial), the error bound of any order of
    summing its terms in `dtype` (a peer that accumulates in its input
    precision, as DeePMD's Triton op does in float32): n·u·sum|terms| with
    n the row's term count and u the unit roundoff, plus 1e-12 of the max
    norm for the reference's own float64 order."""
    u = 2.0**-24 if dtype == torch.float32 else 2.0**-53
    g = np.abs(g.detach().cpu().double().numpy())
    r = np.abs(edge_vec.detach().cpu().double().numpy())
    src = src.detach().cpu().long().numpy()
    dst = dst.detach().cpu().long().numpy()
    outer = (g[:, :, None] * r[:, None, :]).reshape(-1, 9)
    n = (np.bincount(dst, minlength=n_rows) + np.bincount(src, minlength=n_rows)).astype(float)
    bounds = []
    for terms, width in ((g, 3), (0.5 * outer, 9)):
        abs_sum = np.zeros((n_rows, width))
        np.add.at(abs_sum, dst, terms)
        np.add.at(abs_sum, src, terms)
        scale = max(float(abs_sum.max(initial=0.0)), 1e-300)
        # The product itself is rounded once in dtype before it is summed.
        bounds.append((n[:, None] + 1.0) * u * abs_sum + 1e-12 * scale)
    return bounds


def assert_within(name, got, want, bound):
    """Every element of `got` within `bound` (per element) of the float64
    reference `want`; NaN anywhere fails."""
    got64 = got.detach().cpu().double().numpy()
    assert got64.shape == want.shape, f"{name}: shape {got64.shape} != {want.shape}"
    err = np.abs(got64 - want)
    bad = ~(err <= bound)
    if bad.any():
        i = np.argwhere(bad)[0]
        raise AssertionError(
            f"{name}: {int(bad.sum())} of {bad.size} elements off; first at {tuple(i)}: "
            f"got {got64[tuple(i)]!r}, want {want[tuple(i)]!r} (bound {bound[tuple(i)]:.3e})"
        )
