"""The PSF sink from numpy: a star field (events as an (N, 7) array:
x, y, flux, r, g, b, support) rendered on the CPU (the float64 reference)
and, when this hipkern has device code and a device opens, on the GPU in
the tile32 mode, checked against the reference; a few very large events
go by the exact direct path.

    python python/examples/psf_render.py
"""
import time

import numpy as np

import hipkern
import hipkern.psf as psf

width, height, n = 640, 480, 20_000
rng = np.random.default_rng(5)
model = psf.Psf()                                    # Moffat FWHM 2.7 px, beta 4.5
cache = psf.PsfCache(model, phases=16)               # built once, shared by sinks
events = psf.star_events(
    x=rng.uniform(-20, width + 20, n), y=rng.uniform(-20, height + 20, n),
    flux=10 ** rng.uniform(0, 4, n),
    r=rng.uniform(0.2, 1, n), g=rng.uniform(0.2, 1, n), b=rng.uniform(0.2, 1, n),
    psf=model,
)
events[:3, 6] = 80.0                                 # three huge halos: the direct path
print(f"cache: {cache.phases} phases, {cache.nbytes / 2**20:.1f} MiB in {cache.build_seconds:.2f} s")

t0 = time.perf_counter()
reference, stats = psf.render(events, width, height, cache=cache, return_stats=True)
print(f"CPU: {n} events into {width}x{height} in {time.perf_counter() - t0:.3f} s; {stats}")

try:
    sink = psf.Sink(width, height, cache=cache, device=0, mode="tile32")
except RuntimeError as e:
    print(f"no device sink ({hipkern.platform()} build): {e}")
else:
    with sink:
        t0 = time.perf_counter()
        sink.accumulate(events)
        image = sink.image()
    verdict = psf.compare(image, reference)
    print(f"device tile32: {time.perf_counter() - t0:.3f} s, max rel {verdict['max_rel']:.1e}, "
          f"accepted {verdict['accepted']}")
    if not verdict["accepted"]:
        raise SystemExit(f"PSF sink: MISMATCH {verdict['failures']}")
