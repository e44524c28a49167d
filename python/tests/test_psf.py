"""Tests of hipkern.psf: the CPU sink against independent numpy evaluations
of the documented model (docs/design/psf.md), its promises (flux, bitwise
chunking and threading, all-or-nothing refusals), every bad input, and on a
device build every device mode against the CPU reference.

Events are fresh random ones on every run; a failure prints its seed.
Caches are small (P = 8 and 4) and built once per module: the build is the
cost.
"""
import math
import re

import numpy as np
import pytest

import hipkern
import hipkern.psf as hp

W, H = 160, 128


@pytest.fixture(scope="module")
def psf():
    return hp.Psf()


@pytest.fixture(scope="module")
def cache(psf):
    return hp.PsfCache(psf, phases=8)


@pytest.fixture(scope="module")
def tight():
    """A PSF whose flux outside the support is 1e-15 (support 34 px: it
    fits the cache), so the image must hold all of it."""
    p = hp.Psf(fwhm=2.7, beta=10.0, tail=1e-15)
    assert p.support_radius < 47
    return hp.PsfCache(p, phases=4)


@pytest.fixture
def rng(request):
    seed = np.random.SeedSequence().entropy
    print(f"seed for {request.node.name}: {seed}")
    return np.random.default_rng(seed)


def random_events(rng, n, width, height, support, margin=0.0):
    """x in [-margin, width + margin), likewise y; fluxes over 4 decades."""
    return hp.star_events(
        rng.uniform(-margin, width + margin, n),
        rng.uniform(-margin, height + margin, n),
        10.0 ** rng.uniform(-1, 3, n),
        rng.uniform(0, 1, n),
        rng.uniform(0, 1, n),
        rng.uniform(0, 1, n),
        support,
    )


def moffat_pixels(psf, cu, cv, nodes=24):
    """Independent pixel integrals: tensor Gauss-Legendre with `nodes` per
    axis of the Moffat profile over [cu-1/2, cu+1/2] x [cv-1/2, cv+1/2]."""
    t, w = np.polynomial.legendre.leggauss(nodes)
    u = cu[..., None, None] + 0.5 * t[:, None]
    v = cv[..., None, None] + 0.5 * t[None, :]
    a2 = psf.alpha**2
    f = (psf.beta - 1) / (math.pi * a2) * (1 + (u * u + v * v) / a2) ** -psf.beta
    return 0.25 * (f * w[:, None] * w[None, :]).sum(axis=(-2, -1))


def single_event_reference(psf, x, y, flux, rgb, support, width, height):
    """The documented image of one event whose every blend weight but one
    is zero (or which goes by the direct path): pixel integrals at the
    support pixels, those whose centre lies within `support` of (x, y)."""
    iy, ix = np.mgrid[0:height, 0:width]
    cu, cv = ix + 0.5 - x, iy + 0.5 - y
    d2 = cu * cu + cv * cv
    # No pixel centre near the support's edge, where rounding decides.
    assert np.abs(d2 - support * support).min() > 1e-6
    val = np.where(d2 <= support * support, moffat_pixels(psf, cu, cv), 0.0)
    return val[..., None] * (flux * np.asarray(rgb))


# --- the model ------------------------------------------------------------


def test_psf_defaults_and_derived_values(psf):
    assert (psf.fwhm, psf.beta, psf.tail) == (2.7, 4.5, 1e-8)
    assert psf.support_radius == pytest.approx(45.84777786185942, rel=1e-14)
    # The definitions, independently.
    alpha = 2.7 / (2 * math.sqrt(2 ** (1 / 4.5) - 1))
    assert psf.alpha == pytest.approx(alpha, rel=1e-14)
    assert psf.flux_outside(psf.support_radius) == pytest.approx(1e-8, rel=1e-10)
    r = np.array([0.0, 1.0, 5.0])
    np.testing.assert_allclose(psf.intensity(r), psf.norm * (1 + r * r / alpha**2) ** -4.5)


def test_pixel_integrals_match_an_independent_quadrature(psf, rng):
    cu, cv = rng.uniform(-47, 47, 400), rng.uniform(-47, 47, 400)
    cu[:50], cv[:50] = rng.uniform(-2, 2, 50), rng.uniform(-2, 2, 50)
    got, want = psf.pixel_integral(cu, cv), moffat_pixels(psf, cu, cv)
    # The docs: ~1.1e-16 absolute against 24 nodes, <= 3e-10 relative.
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15)
    assert psf.pixel_integral(0.3, [0.0, 1.0]).shape == (2,)


def test_stamps_are_the_pixel_integrals_at_their_phase(cache, psf):
    p = cache.phases
    for i, j in [(0, 0), (3, 5), (p, p), (p // 2, 1)]:
        s = cache.stamp(i, j)
        assert s.shape == (95, 95)
        d = np.arange(-47, 48)
        cv, cu = np.meshgrid(d + 0.5 - j / p, d + 0.5 - i / p, indexing="ij")
        np.testing.assert_allclose(s, moffat_pixels(psf, cu, cv), rtol=1e-9, atol=1e-15)
    assert cache.nbytes == (p + 1) ** 2 * 95 * 95 * 8


# --- the CPU sink against independent evaluations ---------------------------


def test_one_event_on_a_stamp_phase_is_its_pixel_integrals(cache, psf, rng):
    """Phase (2/8, 5/8): the blend takes one stamp whole, so the image is
    the model's pixel integrals at the support pixels, times flux*colour."""
    x, y = rng.integers(50, 110) + 0.25, rng.integers(50, 78) + 0.625
    flux, rgb, support = 10 ** rng.uniform(0, 3), rng.uniform(0.1, 1, 3), 20.3
    ev = hp.star_events(x, y, flux, *rgb, support)
    got, stats = hp.render(ev, W, H, cache=cache, return_stats=True)
    want = single_event_reference(psf, x, y, flux, rgb, support, W, H)
    assert got.shape == (H, W, 3) and got.dtype == np.float64
    assert np.array_equal(got == 0, want == 0), "support pixels differ"
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-15 * flux)
    assert stats["contributions"] == np.count_nonzero(want[..., 0])
    assert (stats["events"], stats["cached"], stats["direct"]) == (1, 1, 0)


def test_one_event_at_any_phase_is_the_documented_blend(cache, rng):
    """The blend of the four bracketing stamps, recomputed in numpy from
    the cache's own stamps with the documented operations: bitwise."""
    p = cache.phases
    x, y = rng.uniform(50, 110), rng.uniform(50, 78)
    flux, rgb = 10 ** rng.uniform(0, 3), rng.uniform(0.1, 1, 3)
    ev = hp.star_events(x, y, flux, *rgb, 30.0)
    got = hp.render(ev, W, H, cache=cache)
    ax, ay = math.floor(x), math.floor(y)
    fx, fy = x - ax, y - ay
    i0, j0 = min(math.floor(fx * p), p - 1), min(math.floor(fy * p), p - 1)
    tx, ty = fx * p - i0, fy * p - j0
    s00, s10 = cache.stamp(i0, j0), cache.stamp(i0 + 1, j0)
    s01, s11 = cache.stamp(i0, j0 + 1), cache.stamp(i0 + 1, j0 + 1)
    v = (((1 - tx) * (1 - ty) * s00 + tx * (1 - ty) * s10) + (1 - tx) * ty * s01) + tx * ty * s11
    want = np.zeros((H, W, 3))
    want[ay - 47:ay + 48, ax - 47:ax + 48] = v[..., None] * (flux * rgb)
    # The support: pixel centres within 30 px (none within 1e-6 of the edge).
    iy, ix = np.mgrid[0:H, 0:W]
    d2 = (ix + 0.5 - x) ** 2 + (iy + 0.5 - y) ** 2
    assert np.abs(d2 - 900.0).min() > 1e-6
    want[d2 > 900.0] = 0.0
    assert np.array_equal(got, want)


def test_the_direct_path_is_exact_at_any_phase(cache, psf, rng):
    """A support of 60 px does not fit the cache: by the direct path the
    image is the pixel integrals at the event's own phase; with
    direct=False the event is refused."""
    x, y = rng.uniform(70, 90), rng.uniform(60, 68)
    ev = hp.star_events(x, y, 7.0, 1.0, 0.5, 0.25, 60.3)
    sink = hp.Sink(W, H, cache=cache)
    assert sink.accumulate(ev) == 1
    want = single_event_reference(psf, x, y, 7.0, (1.0, 0.5, 0.25), 60.3, W, H)
    np.testing.assert_allclose(sink.image(), want, rtol=1e-9, atol=1e-14)
    assert sink.stats["direct"] == 1 and sink.stats["cached"] == 0
    with pytest.raises(ValueError, match=r"event 0: support = 60.3 .*direct=True"):
        hp.render(ev, W, H, cache=cache, direct=False)


def test_flux_is_conserved_inside_the_frame(tight, rng):
    """Events whose support lies inside the image deposit flux*colour times
    the flux inside their support: 1 - 1e-15 for this PSF."""
    n, r = 300, tight.psf.support_radius
    ev = random_events(rng, n, W - 2 * r - 2, H - 2 * r - 2, r)
    ev[:, :2] += r + 1
    img = hp.render(ev, W, H, cache=tight)
    for c in range(3):
        total = math.fsum(img[..., c].ravel())
        want = math.fsum(ev[:, 2] * ev[:, 3 + c])
        assert total == pytest.approx(want, rel=1e-12), c


def test_the_default_psf_loses_its_tail(cache, rng):
    """With tail 1e-8 the image holds 1 - 1e-8 of the flux, within the
    discretisation of the support's edge."""
    r = cache.psf.support_radius
    ev = random_events(rng, 100, W - 2 * r - 2, H - 2 * r - 2, r)
    ev[:, :2] += r + 1
    img = hp.render(ev, W, H, cache=cache)
    lost = 1 - math.fsum(img[..., 1].ravel()) / math.fsum(ev[:, 2] * ev[:, 4])
    assert 0.8e-8 < lost < 1.2e-8


def test_chunking_and_threads_give_bitwise_the_same_image(cache, rng):
    """The CPU sink adds a pixel's contributions in event order whatever the
    calls' sizes and thread counts (docs: parallel = serial, bitwise)."""
    ev = random_events(rng, 2000, W, H, cache.psf.support_radius, margin=50.0)
    one = hp.Sink(W, H, cache=cache, threads=1)
    one.accumulate(ev)
    want = one.image()
    cuts = np.sort(rng.choice(np.arange(1, len(ev)), 7, replace=False))
    for threads in (2, 3):
        sink = hp.Sink(W, H, cache=cache, threads=threads)
        for part in np.split(ev, cuts):
            sink.accumulate(part)
        assert np.array_equal(sink.image(), want)
        assert sink.stats | {"chunks": 0} == one.stats | {"chunks": 0}
    assert one.stats["events"] == 2000 and one.stats["outside"] > 0


def test_accumulating_onto_an_image(cache, rng):
    """render(image=...) adds in place; Sink(image=...) and set_image start
    from a copy; reset goes back to black."""
    ev = random_events(rng, 50, W, H, 20.0)
    base = rng.uniform(0, 1, (H, W, 3))
    fresh = hp.render(ev, W, H, cache=cache)
    img = base.copy()
    out = hp.render(ev, cache=cache, image=img)
    assert out is img
    np.testing.assert_allclose(img, base + fresh, rtol=1e-13, atol=1e-13)
    sink = hp.Sink(W, H, cache=cache, image=base)
    sink.accumulate(ev)
    assert np.array_equal(sink.image(), img)
    sink.set_image(base)
    assert np.array_equal(sink.image(), base)
    sink.reset()
    assert not sink.image().any() and sink.stats["events"] == 0


def test_threads_sharing_a_sink_take_turns(cache, rng):
    """Calls from several Python threads on one sink are serialised (the
    GIL is released while one runs); the result is every event once."""
    from concurrent.futures import ThreadPoolExecutor

    parts = [random_events(rng, 300, W, H, 20.0) for _ in range(8)]
    sink = hp.Sink(W, H, cache=cache, threads=1)
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(sink.accumulate, parts))
    want = hp.render(np.concatenate(parts), W, H, cache=cache)
    np.testing.assert_allclose(sink.image(), want, rtol=1e-12, atol=1e-300)
    assert sink.stats["events"] == 2400


def test_structured_and_float32_events(cache, rng):
    ev = random_events(rng, 30, W, H, 20.0)
    want = hp.render(ev, W, H, cache=cache)
    rec = np.zeros(30, hp.EVENT_DTYPE)
    for k, name in enumerate(hp.EVENT_FIELDS):
        rec[name] = ev[:, k]
    assert np.array_equal(hp.render(rec, W, H, cache=cache), want)
    assert np.array_equal(hp.render(np.asfortranarray(ev), W, H, cache=cache), want)
    e32 = ev.astype(np.float32)
    assert np.array_equal(hp.render(e32, W, H, cache=cache),
                          hp.render(e32.astype(np.float64), W, H, cache=cache))
    assert not hp.render(np.empty((0, 7)), 4, 3, cache=cache).any()


def test_far_and_huge_values_are_handled(cache):
    """Events far off the image, at float64's extremes, or with supports up
    to the direct path's limit: skipped or rendered, never a crash."""
    ev = hp.star_events([1e300, -1e300, 5.0, 2.5, 1e15], [3.0, 2.0, -1e308, 1.5, 1e15],
                        [1.0, 1.0, 1.0, 1e300, 1.0], 1.0, 1.0, 1.0,
                        [1.0, 1e12, 40.0, 1e-300, 1e12])
    img, stats = hp.render(ev, 8, 6, cache=cache, return_stats=True)
    assert np.isfinite(img).all() and stats["outside"] == 4 and stats["events"] == 5


# --- refusals ---------------------------------------------------------------


BAD_EVENTS = [
    (0, math.nan, "x = NaN is not finite"),
    (1, math.inf, "y = inf is not finite"),
    (2, -1.0, "flux = -1e0 is negative"),
    (4, -0.5, "g = -5e-1 is negative"),
    (6, 0.0, "support = 0e0 is not positive"),
    (6, 2e12, "support = 2e12 px exceeds the direct path's limit 1e12 px"),
]


@pytest.mark.parametrize("column,value,message", BAD_EVENTS)
def test_a_bad_event_is_named_and_nothing_is_applied(cache, rng, column, value, message):
    """A bad event late in a call (beyond the first 16,384-event chunk)
    leaves the image and counters bitwise as they were."""
    sink = hp.Sink(W, H, cache=cache, threads=2)
    sink.accumulate(random_events(rng, 20, W, H, 20.0))
    before, stats = sink.image(), sink.stats
    ev = random_events(rng, 17000, W, H, 3.0, margin=10.0)
    k = int(rng.integers(16384, 17000))
    ev[k, column] = value
    with pytest.raises(ValueError, match=f"event {k}: " + re.escape(message)):
        sink.accumulate(ev)
    assert np.array_equal(sink.image(), before) and sink.stats == stats
    with pytest.raises(ValueError, match=f"event {k}"):
        hp.render(ev, W, H, cache=cache)


def test_a_refused_render_leaves_the_given_image_unchanged(cache, rng):
    ev = random_events(rng, 100, W, H, 20.0)
    ev[57, 6] = 50.0
    img = rng.uniform(0, 1, (H, W, 3))
    before = img.copy()
    with pytest.raises(ValueError, match="event 57"):
        hp.render(ev, cache=cache, image=img, direct=False)
    assert np.array_equal(img, before)


@pytest.mark.parametrize("events,message", [
    (np.zeros((3, 6)), r"shape \(3, 6\)"),
    (np.zeros(7), r"shape \(7,\)"),
    (np.zeros((2, 3, 7)), r"shape \(2, 3, 7\)"),
    (np.zeros((3, 7), np.complex128), "dtype complex128"),
    (np.array([["a"] * 7]), "dtype <U1"),
    (np.zeros((3, 7), object), "dtype object"),
    (np.zeros(3, [("x", "f8"), ("y", "f8")]), "fields x, y, flux"),
])
def test_bad_event_arrays(cache, events, message):
    with pytest.raises(ValueError, match=message):
        hp.render(events, W, H, cache=cache)


@pytest.mark.parametrize("kwargs,message", [
    (dict(width=0), "width = 0"),
    (dict(height=2**20 + 1), "height = 1048577"),
    (dict(width=-3), "width = -3 is negative"),
    (dict(width=2.5), "width = 2.5 is not an integer"),
    (dict(mode="tile64"), "mode = 'tile64' is unknown"),
    (dict(mode="atomic"), "mode and binning are the device sink's"),
    (dict(binning="gpu"), "binning = 'gpu' is unknown"),
    (dict(threads=5000), "threads"),
    (dict(threads=-1), "threads = -1 is negative"),
    (dict(device=-1), "device = -1 is negative"),
    (dict(device=True), "device = True is a bool"),
    (dict(psf=hp.Psf()), "give cache, or psf and phases"),
])
def test_bad_sink_arguments(cache, kwargs, message):
    args = dict(width=W, height=H, cache=cache) | kwargs
    with pytest.raises(ValueError, match=message):
        hp.Sink(args.pop("width"), args.pop("height"), **args)


@pytest.mark.parametrize("kwargs,message", [
    (dict(fwhm=0.1), r"fwhm = 1e-1 is invalid \(must be in 0.5..=1000 px"),
    (dict(beta=1.0), "beta = 1e0 is invalid"),
    (dict(tail=0.7), "tail = 7e-1 is invalid"),
    (dict(beta=1.1, tail=1e-8), "support radius"),
    (dict(fwhm="wide"), "fwhm = 'wide' is not a real number"),
])
def test_bad_psf_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        hp.Psf(**kwargs)


def test_bad_cache_arguments(cache):
    for phases, message in [(0, "phases = 0"), (1025, "phases = 1025"), (-2, "negative")]:
        with pytest.raises(ValueError, match=message):
            hp.PsfCache(phases=phases)
    with pytest.raises(ValueError, match="psf must be"):
        hp.PsfCache(psf=(2.7, 4.5, 1e-8))
    with pytest.raises(ValueError, match=r"stamp \(9, 0\).*0..=8"):
        cache.stamp(9, 0)


def test_bad_images(cache, rng):
    sink = hp.Sink(8, 6, cache=cache)
    good = np.zeros((6, 8, 3))
    for out, message in [
        (np.zeros((6, 8, 4)), r"out has shape \(6, 8, 4\)"),
        (np.zeros((8, 6, 3)), r"need \(height, width, 3\) = \(6, 8, 3\)"),
        (np.zeros((6, 8, 3), np.float32), "float64"),
        (np.zeros((6, 8, 6))[..., ::2], "C-contiguous"),
        ([[0.0] * 3] * 48, "float64 numpy array"),
    ]:
        with pytest.raises(ValueError, match=message):
            sink.image(out=out)
    ro = good.copy()
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        sink.image(out=ro)
    bad = good.copy()
    bad[2, 3, 1] = math.nan
    with pytest.raises(ValueError, match="non-finite value NaN at flat index 58"):
        sink.set_image(bad)
    with pytest.raises(ValueError, match="non-finite"):
        hp.Sink(8, 6, cache=cache, image=bad)
    with pytest.raises(ValueError, match=r"image has shape \(6, 8, 3\): need .*\(5, 8, 3\)"):
        hp.render(np.zeros((0, 7)), 8, 5, cache=cache, image=good.copy())
    with pytest.raises(ValueError, match="width and height"):
        hp.render(np.zeros((0, 7)), 8, cache=cache)
    sink.close()
    assert sink.closed
    with pytest.raises(ValueError, match="closed"):
        sink.accumulate(np.zeros((0, 7)) + 1)
    with pytest.raises(ValueError, match="closed"):
        sink.image()
    sink.close()


def test_a_device_on_the_cpu_platform_is_a_runtime_error(cache):
    if hipkern.platform() != "cpu":
        pytest.skip("a device build")
    with pytest.raises(RuntimeError, match="built for the cpu platform"):
        hp.Sink(8, 6, cache=cache, device=0)
    with pytest.raises(RuntimeError, match="built for the cpu platform"):
        hp.render(np.zeros((0, 7)), 8, 6, cache=cache, device=0, mode="tile32")


def test_compare_reports_the_acceptance(cache, rng):
    ref = hp.render(random_events(rng, 20, W, H, 20.0), W, H, cache=cache)
    c = hp.compare(ref.copy(), ref)
    assert c["accepted"] and c["max_abs"] == 0 and c["failures"] is None
    off = ref.copy()
    off[ref > 0] *= 1 + 1e-9
    c = hp.compare(off, ref)
    assert not c["accepted"] and "max_rel" in c["failures"]
    with pytest.raises(ValueError, match="different sizes"):
        hp.compare(ref[:5].copy(), ref)


# --- the device -------------------------------------------------------------


def _device_usable():
    if hipkern.platform() == "cpu":
        return False
    try:
        hp.Sink(1, 1, cache=hp.PsfCache(phases=1), device=0).close()
        return True
    except RuntimeError:
        return False


gpu = pytest.mark.skipif(not _device_usable(), reason="no usable device")


def acceptance(got, ref, tol=hp.TOLERANCE):
    """docs/design/psf.md#acceptance, in numpy: every value finite, the same
    zero pattern, max_rel < tol over every nonzero reference value, max_abs
    < tol * peak, the R, G, B and Y totals within tol."""
    assert np.isfinite(got).all() and np.isfinite(ref).all()
    assert np.array_equal(got == 0, ref == 0), "zero patterns differ"
    nz = ref != 0
    rel = np.abs(got[nz] - ref[nz]) / np.abs(ref[nz])
    assert rel.max(initial=0) < tol, rel.max()
    assert np.abs(got - ref).max() <= tol * np.abs(ref).max()
    luma = np.array([0.2126, 0.7152, 0.0722])
    tg = [math.fsum(got[..., c].ravel()) for c in range(3)]
    tr = [math.fsum(ref[..., c].ravel()) for c in range(3)]
    for a, b in zip(tg + [luma @ tg], tr + [luma @ tr]):
        assert abs(a - b) <= tol * abs(b)
    assert hp.compare(got, ref, tol)["accepted"]


def device_events(rng, support):
    """Two full chunks and a short one: inside, near and beyond every edge
    (wings reaching in, some wholly outside), and a few too large for the
    cache in the middle chunk (the direct path mid-stream)."""
    ev = random_events(rng, 2 * hp.CHUNK_EVENTS + 3000, W, H, support, margin=60.0)
    big = hp.CHUNK_EVENTS + rng.choice(hp.CHUNK_EVENTS, 4, replace=False)
    ev[big, 6] = rng.uniform(48.5, 70, 4)
    return ev


@gpu
@pytest.mark.parametrize("mode", hp.MODES)
@pytest.mark.parametrize("binning", hp.BINNINGS)
def test_every_device_mode_matches_the_cpu_reference(cache, rng, mode, binning):
    if mode == "atomic" and binning == "host":
        pytest.skip("atomic builds no lists")
    ev = device_events(rng, cache.psf.support_radius)
    ref = hp.Sink(W, H, cache=cache)
    assert ref.accumulate(ev) == 4
    with hp.Sink(W, H, cache=cache, device=0, mode=mode, binning=binning) as sink:
        assert sink.accumulate(ev[:20000]) + sink.accumulate(ev[20000:]) == 4
        out = np.full((H, W, 3), np.nan)
        assert sink.image(out=out) is out
        acceptance(out, ref.image())
        assert sink.stats["events"] == ref.stats["events"]
        assert sink.stats["contributions"] == ref.stats["contributions"]
        assert sink.stats["direct"] == ref.stats["direct"]
        if mode == "adaptive":
            assert {m for _, m in sink.chunk_log} == {"atomic", "tile32"}
        # Tile modes: bitwise the same on a second run with the same chunking.
        if mode in ("tile16", "tile32"):
            first = out.copy()
            sink.reset()
            sink.accumulate(ev[:20000])
            sink.accumulate(ev[20000:])
            assert np.array_equal(sink.image(), first)


@gpu
def test_device_render_onto_an_image_and_refusals(cache, rng):
    ev = device_events(rng, 30.0)[: hp.CHUNK_EVENTS + 100]
    base = rng.uniform(0, 1, (H, W, 3))
    want = hp.render(ev, cache=cache, image=base.copy())
    got = hp.render(ev, cache=cache, image=base.copy(), device=0, mode="tile16")
    acceptance(got, want)
    with hp.Sink(W, H, cache=cache, device=0, mode="atomic") as sink:
        sink.accumulate(ev[:500])
        before = sink.image()
        bad = ev.copy()
        bad[-1, 2] = -1.0
        with pytest.raises(ValueError, match=f"event {len(ev) - 1}: flux"):
            sink.accumulate(bad)
        assert np.array_equal(sink.image(), before)
