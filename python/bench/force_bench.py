"""Force assembly from Python, one process, every peer in the same run:
hipkern.torch.edge_force_assembly, DeePMD-kit's Triton op (when its file
is given: HIPKERN_DEEPMD_OP or argv[2]) and torch's index_add_ reference,
at the sizes of benches/force_assembly.rs (d-lattice: d on a lattice,
neighbours near in index); and the plan:
hipkern.torch.build_plan against torch's argsort + searchsorted.

Each time is the median of 50 calls after 10 warm-up calls, between CUDA
events around the Python call itself, so the launch overhead (argument
checks, the dispatcher, the allocator) is in it; inputs and outputs are
fp32 (DeePMD's case). The floor is benches/force_assembly.rs's
sector-counted bytes at the copy bandwidth measured here (a 1 GiB
device-to-device copy, bytes read plus written). Prints a table and
writes every number as JSON to argv[1] when given.

    python3 python/bench/force_bench.py [out.json] [force_assembly.py]
"""
import importlib.util
import json
import os
import sys

import torch

import hipkern
import hipkern.torch as ht

# name, extended atoms, centre atoms (rows with edges), edges per centre:
# the sizes of benches/force_assembly.rs and scripts/force_torch_peer.py.
# d-lattice: d's centres and edges per centre on a cubic lattice, each
# centre's nearest neighbours as src (lattice_edges), as an MD code that
# sorts its atoms spatially has them; the others' src is random.
SIDE, EXT = 64, 72
SIZES = [("a", 700, 700, 50_000 // 700), ("b", 8_000, 8_000, 650_000 // 8_000),
         ("c", 49_152, 32_768, 128), ("d", 393_216, 262_144, 128),
         ("d-lattice", EXT ** 3, SIDE ** 3, 128)]
WARMUP, REPEAT = 10, 50


def lattice_edges(per):
    """benches/force_assembly.rs's lattice_edges: the SIDE^3 centres of a
    cubic lattice in row-major order (x fastest), then the ghosts of the
    EXT^3 cube around them, row-major; each centre's `per` nearest lattice
    neighbours (by distance, then offset z, y, x) as src, grouped by dst."""
    r = range(-4, 5)
    offsets = sorted((dx * dx + dy * dy + dz * dz, dz, dy, dx)
                     for dz in r for dy in r for dx in r if (dx, dy, dz) != (0, 0, 0))[:per]
    off = torch.tensor([(dx, dy, dz) for _, dz, dy, dx in offsets], device="cuda")
    c = torch.arange(EXT, device="cuda") - 4
    z, y, x = torch.meshgrid(c, c, c, indexing="ij")
    inside = (x >= 0) & (x < SIDE) & (y >= 0) & (y < SIDE) & (z >= 0) & (z < SIDE)
    index = torch.empty(EXT ** 3, dtype=torch.int64, device="cuda")
    flat = inside.reshape(-1)
    index[flat] = (x + SIDE * (y + SIDE * z)).reshape(-1)[flat]
    index[~flat] = SIDE ** 3 + torch.arange(int((~flat).sum()), device="cuda")
    s = torch.arange(SIDE, device="cuda")
    cz, cy, cx = (t.reshape(-1, 1) for t in torch.meshgrid(s, s, s, indexing="ij"))
    px, py, pz = cx + 4 + off[:, 0], cy + 4 + off[:, 1], cz + 4 + off[:, 2]
    src = index[(px + EXT * (py + EXT * pz)).reshape(-1)]
    dst = torch.arange(SIDE ** 3, device="cuda").repeat_interleave(per)
    return src, dst


def median_ms(f):
    for _ in range(WARMUP):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(REPEAT):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        f()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def torch_reference(g, r, src, dst, n):
    outer = -(g[:, :, None] * r[:, None, :]).reshape(-1, 9)
    force = torch.zeros(n, 3, device=g.device, dtype=g.dtype)
    virial = torch.zeros(n, 9, device=g.device, dtype=g.dtype)
    force.index_add_(0, dst, g)
    force.index_add_(0, src, -g)
    virial.index_add_(0, dst, 0.5 * outer)
    virial.index_add_(0, src, 0.5 * outer)
    return force, virial


def torch_plan(src, dst, n):
    rows = torch.arange(n + 1, device=src.device, dtype=src.dtype)
    do, so = torch.argsort(dst, stable=True), torch.argsort(src, stable=True)
    return do, torch.searchsorted(dst[do], rows), so, torch.searchsorted(src[so], rows)


def copy_bandwidth():
    """Bytes read + written per second of a 1 GiB device-to-device copy."""
    a = torch.empty(2**27, dtype=torch.float64, device="cuda").uniform_()
    b = torch.empty_like(a)
    ms = median_ms(lambda: b.copy_(a))
    return 2 * a.numel() * 8 / (ms * 1e-3)


def floor_ms(plan, n_edges, n_rows, bandwidth):
    """The sector-counted floor of benches/force_assembly.rs: per pass,
    the order (4 B an edge) and each edge's g and edge_vec rows, 24 bytes
    where the edge follows its predecessor in memory, else a 32-byte
    sector each; row_ptr; the outputs written once, then read and rewritten
    once (96 B a row each way)."""
    def rows_bytes(order):
        follows = int((order[1:] == order[:-1] + 1).sum()) if order.numel() > 1 else 0
        return 24.0 * follows + 64.0 * (order.numel() - follows)

    dst_order, _, src_order, _ = plan
    total = (rows_bytes(dst_order) + rows_bytes(src_order) + 2 * 4.0 * n_edges
             + 2 * 4.0 * (n_rows + 1) + 3 * 96.0 * n_rows)
    return total / bandwidth * 1e3


def deepmd_op(path):
    if not path or not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location("deepmd_force_assembly", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.edge_force_assembly if mod.FORCE_ASSEMBLY_TRITON_AVAILABLE else None


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else None
    deepmd = deepmd_op(sys.argv[2] if len(sys.argv) > 2 else os.environ.get("HIPKERN_DEEPMD_OP"))
    device = torch.cuda.get_device_name(0)
    bw = copy_bandwidth()
    print(f"hipkern {hipkern.__version__} ({hipkern.platform()}, {','.join(hipkern.compiled_archs())}), "
          f"torch {torch.__version__}, {device}, copy {bw / 1e12:.2f} TB/s, "
          f"DeePMD op {'loaded' if deepmd else 'absent'}")
    gen = torch.Generator(device="cuda").manual_seed(12345)
    results = {"device": device, "copy_tb_s": bw / 1e12, "torch": torch.__version__, "rows": []}
    for name, n_ext, centres, per in SIZES:
        e = centres * per
        if name == "d-lattice":
            src, dst = lattice_edges(per)
            weights = torch.arange(e, device="cuda") % 1009 + 1
            print(f"d-lattice: src checksum {int((src * weights).sum())} (the Rust bench prints its own)")
        else:
            dst = torch.arange(centres, device="cuda").repeat_interleave(per)
            src = torch.randint(0, n_ext, (e,), device="cuda", generator=gen)
        g = torch.rand(e, 3, device="cuda", generator=gen) * 2 - 1
        r = (torch.rand(e, 3, device="cuda", generator=gen) * 2 - 1) * 4
        plan = ht.build_plan(src, dst, n_ext)
        plan64 = torch_plan(src, dst, n_ext)
        row = {"size": name, "edges": e, "atoms": n_ext,
               "floor_ms": floor_ms(plan, e, n_ext, bw),
               "hipkern_ms": median_ms(lambda: ht.edge_force_assembly(g, r, *plan)),
               "torch_ms": median_ms(lambda: torch_reference(g, r, src, dst, n_ext)),
               "hipkern_plan_ms": median_ms(lambda: ht.build_plan(src, dst, n_ext)),
               "torch_plan_ms": median_ms(lambda: torch_plan(src, dst, n_ext))}
        # The same call with torch's int64 plan: the narrowing copies.
        row["hipkern_int64_plan_ms"] = median_ms(lambda: ht.edge_force_assembly(g, r, *plan64))
        if deepmd is not None:
            row["deepmd_ms"] = median_ms(lambda: deepmd(g, r, *plan64))
        results["rows"].append(row)
    print(f"{'size':>9} {'E':>10} {'N':>8} | {'hipkern':>8} {'(int64 plan)':>12} {'DeePMD':>8} "
          f"{'torch':>8} {'floor':>7} | {'DeePMD/hk':>9} {'torch/hk':>8} {'hk/floor':>8} | "
          f"{'plan hk':>8} {'argsort':>8} {'ratio':>6}   (ms)")
    for row in results["rows"]:
        hk, dp = row["hipkern_ms"], row.get("deepmd_ms")
        print(f"{row['size']:>9} {row['edges']:>10} {row['atoms']:>8} | {hk:8.4f} "
              f"{row['hipkern_int64_plan_ms']:12.4f} {dp if dp is not None else float('nan'):8.4f} "
              f"{row['torch_ms']:8.4f} {row['floor_ms']:7.4f} | "
              f"{(dp / hk) if dp else float('nan'):9.2f} {row['torch_ms'] / hk:8.2f} "
              f"{hk / row['floor_ms']:8.2f} | {row['hipkern_plan_ms']:8.4f} "
              f"{row['torch_plan_ms']:8.4f} {row['torch_plan_ms'] / row['hipkern_plan_ms']:6.2f}")
    if out_path:
        with open(out_path, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
