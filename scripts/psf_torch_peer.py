"""A torch stamp splat of the PSF sink's model: the peer of benches/psf_sink.rs.

What a torch user would write for the same events, cache and image: each
event's four bracketing phase stamps gathered whole (95 x 95 float64 each),
blended with its phase weights, masked by its support (the same float64
steps as src/psf/support.rs: dy = (oy + 1/2) - fy, h2 = s*s - dy*dy,
columns ceil(c - sqrt(h2)) .. floor(c + sqrt(h2)) with c = fx - 1/2),
multiplied by flux * colour and added into the float64 RGB image with
index_add_ (atomic adds on the GPU), in batches of events.

Inputs are what the Rust bench writes: the cache's stamps, a raw
little-endian float64 file ((P+1)^2 x 95 x 95, stamp (i, j) at
j*(P+1) + i), and the events, hipkern's N x 7 float64 .npy (x, y, flux,
r, g, b, support; every one fitting the stamps). It writes the image (height x width x 3 float64) and a JSON
record of the timings: the whole splat of every event on the device
(events and stamps already there), timed with torch.cuda.Event, after
warm-ups, median of the runs.

    python3 psf_torch_peer.py --stamps S --phases 64 --events E.npy
        --width 3840 --height 2160 --image OUT.f64 --json OUT.json
"""
import argparse
import json
import sys
import time

import numpy as np
import torch

RADIUS = 47
SIDE = 2 * RADIUS + 1
FIELDS = 7


def splat(image, stamps, events, phases, width, height, batch):
    """Adds every event to image (height*width*3, float64), batch by batch."""
    dev = image.device
    off = torch.arange(-RADIUS, RADIUS + 1, device=dev, dtype=torch.float64)
    off_i = torch.arange(-RADIUS, RADIUS + 1, device=dev, dtype=torch.int64)
    row = phases + 1
    for b0 in range(0, events.shape[0], batch):
        e = events[b0:b0 + batch]
        x, y, flux, s = e[:, 0], e[:, 1], e[:, 2], e[:, 6]
        ax, ay = torch.floor(x), torch.floor(y)
        fx, fy = x - ax, y - ay
        # Phase weights (PsfCache::blend_weights): g = f*P, i0 = min(max(floor(g), 0), P-1).
        gx, gy = fx * phases, fy * phases
        i0 = torch.clamp(torch.floor(gx), 0, phases - 1)
        j0 = torch.clamp(torch.floor(gy), 0, phases - 1)
        tx, ty = gx - i0, gy - j0
        ux, uy = 1.0 - tx, 1.0 - ty
        w = torch.stack([ux * uy, tx * uy, ux * ty, tx * ty], dim=1)  # (B, 4)
        k00 = j0.long() * row + i0.long()
        idx = torch.stack([k00, k00 + 1, k00 + row, k00 + row + 1], dim=1)  # (B, 4)
        four = stamps.index_select(0, idx.reshape(-1)).reshape(-1, 4, SIDE, SIDE)
        v = (((w[:, 0, None, None] * four[:, 0] + w[:, 1, None, None] * four[:, 1])
              + w[:, 2, None, None] * four[:, 2]) + w[:, 3, None, None] * four[:, 3])
        # Support rows and columns (support.rs row_span), every step its own op.
        dy = (off[None, :] + 0.5) - fy[:, None]  # (B, 95) by row offset
        h2 = s[:, None] * s[:, None] - dy * dy
        wd = torch.sqrt(torch.clamp(h2, min=0.0))
        c = fx - 0.5
        lo = torch.ceil(c[:, None] - wd)
        hi = torch.floor(c[:, None] + wd)
        inside = (h2 >= 0.0)[:, :, None] & (off[None, None, :] >= lo[:, :, None]) \
            & (off[None, None, :] <= hi[:, :, None])  # (B, 95 rows, 95 cols)
        px = ax.long()[:, None, None] + off_i[None, None, :]
        py = ay.long()[:, None, None] + off_i[None, :, None]
        inside &= (px >= 0) & (px < width) & (py >= 0) & (py < height)
        pixel = (py * width + px)[inside]
        val = v[inside]
        col = torch.stack([flux * e[:, 3], flux * e[:, 4], flux * e[:, 5]], dim=1)  # (B, 3)
        which = torch.nonzero(inside, as_tuple=True)[0]
        add = val[:, None] * col[which]
        image.view(-1, 3).index_add_(0, pixel, add)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stamps", required=True)
    ap.add_argument("--phases", type=int, required=True)
    ap.add_argument("--events", required=True)
    ap.add_argument("--width", type=int, required=True)
    ap.add_argument("--height", type=int, required=True)
    ap.add_argument("--image", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    stamps_np = np.fromfile(a.stamps, dtype="<f8")
    n_stamps = (a.phases + 1) ** 2
    if stamps_np.size != n_stamps * SIDE * SIDE:
        sys.exit(f"psf_torch_peer: {a.stamps} holds {stamps_np.size} values, "
                 f"not (P+1)^2 x 95 x 95 = {n_stamps * SIDE * SIDE} for P = {a.phases}")
    try:
        events_np = np.load(a.events)
    except (OSError, ValueError) as e:
        sys.exit(f"psf_torch_peer: {a.events}: {e}")
    if events_np.ndim != 2 or events_np.shape[1] != FIELDS or events_np.dtype != np.float64:
        sys.exit(f"psf_torch_peer: {a.events} holds {events_np.dtype} {events_np.shape}, "
                 f"not float64 N x {FIELDS}")
    stamps = torch.from_numpy(stamps_np).to(dev).reshape(n_stamps, SIDE, SIDE)
    events = torch.from_numpy(events_np).to(dev).reshape(-1, FIELDS)
    image = torch.zeros(a.height * a.width * 3, dtype=torch.float64, device=dev)

    def run():
        image.zero_()
        splat(image, stamps, events, a.phases, a.width, a.height, a.batch)

    times = []
    for i in range(a.warmup + a.runs):
        if dev.type == "cuda":
            t0, t1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0.record()
            run()
            t1.record()
            t1.synchronize()
            ms = t0.elapsed_time(t1)
        else:
            s0 = time.perf_counter()
            run()
            ms = (time.perf_counter() - s0) * 1e3
        if i >= a.warmup:
            times.append(ms)
    times.sort()
    image.cpu().numpy().astype("<f8").tofile(a.image)
    rec = {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
           "torch": torch.__version__, "events": int(events.shape[0]), "batch": a.batch,
           "runs": a.runs, "median_ms": times[len(times) // 2], "min_ms": times[0],
           "max_ms": times[-1]}
    with open(a.json, "w") as f:
        json.dump(rec, f)
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
