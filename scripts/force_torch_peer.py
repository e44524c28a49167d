"""The torch index_add_ reference for force/virial assembly (the peer of
benches/force_assembly.rs), run on the GPU machine in the same session.

Same sizes and edge layout as the Rust bench (edges grouped by dst, src
random, fp32). The reference: materialised (E, 9) outer product and four
index_add_ scatters (force to both endpoints, half virial to both).
Also times the plan build the torch way: stable argsort of dst and of src
(the two edge orders) and searchsorted for the two row_ptr arrays.
Timed with torch.cuda.Event: warm-up 5, median of 30. Prints a table and
writes {"a": ms, ..., "plan_a": ms, ...} to the path given as argv[1].
"""
import json
import sys

import torch

SIZES = [("a", 700, 700, 50_000 // 700), ("b", 8_000, 8_000, 650_000 // 8_000),
         ("c", 49_152, 32_768, 128), ("d", 393_216, 262_144, 128)]


def reference(g, r, src, dst, n):
    outer = -(g[:, :, None] * r[:, None, :]).reshape(-1, 9)
    force = torch.zeros(n, 3, device=g.device, dtype=g.dtype)
    virial = torch.zeros(n, 9, device=g.device, dtype=g.dtype)
    force.index_add_(0, dst, g)
    force.index_add_(0, src, -g)
    virial.index_add_(0, dst, 0.5 * outer)
    virial.index_add_(0, src, 0.5 * outer)
    return force, virial


def plan(src, dst, n):
    rows = torch.arange(n + 1, device=src.device, dtype=src.dtype)
    dst_order = torch.argsort(dst, stable=True)
    src_order = torch.argsort(src, stable=True)
    dst_row_ptr = torch.searchsorted(dst[dst_order], rows)
    src_row_ptr = torch.searchsorted(src[src_order], rows)
    return dst_order, dst_row_ptr, src_order, src_row_ptr


def median_ms(f):
    for _ in range(5):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], times[0], times[-1]


def main():
    out = {}
    gen = torch.Generator(device="cuda").manual_seed(12345)
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for name, n_ext, centres, per in SIZES:
        e = centres * per
        dst = torch.arange(centres, device="cuda").repeat_interleave(per)
        src = torch.randint(0, n_ext, (e,), device="cuda", generator=gen)
        g = torch.rand(e, 3, device="cuda", generator=gen) * 2 - 1
        r = (torch.rand(e, 3, device="cuda", generator=gen) * 2 - 1) * 4
        out[name], lo, hi = median_ms(lambda: reference(g, r, src, dst, n_ext))
        print(f"{name}: E={e} N_ext={n_ext} torch index_add_ median {out[name]:.4f} ms "
              f"(min {lo:.4f}, max {hi:.4f})")
        key = "plan_" + name
        out[key], lo, hi = median_ms(lambda: plan(src, dst, n_ext))
        print(f"{name}: torch argsort+searchsorted plan median {out[key]:.4f} ms "
              f"(min {lo:.4f}, max {hi:.4f})")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
