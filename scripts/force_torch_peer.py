"""The torch index_add_ reference for force/virial assembly (the peer of
benches/force_assembly.rs), run on the GPU machine in the same session.

Same sizes and edge layout as the Rust bench (edges grouped by dst, src
random, fp32). The reference: materialised (E, 9) outer product and four
index_add_ scatters (force to both endpoints, half virial to both).
Timed with torch.cuda.Event: warm-up 5, median of 30. Prints a table and
writes {"a": ms, ...} to the path given as argv[1].
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
        for _ in range(5):
            reference(g, r, src, dst, n_ext)
        torch.cuda.synchronize()
        times = []
        for _ in range(30):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            reference(g, r, src, dst, n_ext)
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        out[name] = times[len(times) // 2]
        print(f"{name}: E={e} N_ext={n_ext} torch index_add_ median {out[name]:.4f} ms "
              f"(min {times[0]:.4f}, max {times[-1]:.4f})")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
