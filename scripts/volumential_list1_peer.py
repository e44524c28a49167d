#!/usr/bin/env python3
"""volumential's List 1 on the same work as hipkern's List 1 bench (issue 32).

Times volumential's own near-field (List 1) evaluation,
``FPNDSumpyExpansionWrangler.eval_direct_single_out_kernel`` (the per-kernel
body of the wrangler's ``eval_direct``: payload cache, per-call host work,
the loopy ``NearFieldFromCSR`` kernel, ``finish``), through pyopencl on one
OpenCL device, on hipkern's bench trees (benches/list1.rs):

- ``uniform``: ``uniform_tree(3, 5)``, 32,768 leaves, root [0, 1]^3;
- ``random``: ``random_tree(3, seed=1, max_level=6, refine_probability=0.3)``
  (min_level 2, 3 attractors: ``RandomTreeConfig::new``'s defaults),
  27,826 leaves;

3D Laplace, q = 3, one table at box extent 1 (volumential infers the
``rho**2`` scaling, as hipkern does). The table values are hipkern's
(``build_table("laplace", 3, 3)``, ``Table.dense()`` in volumential's index
conventions) loaded into a ``volumential.NearFieldInteractionTable``; the
table builder (Duffy quadrature) is not run. volumential then prepares its
own device payload from it (``_prepare_table_data_and_entry_map``: its
default reconstruction for this kernel, reported as ``recon=``).

The tree is handed to volumential as a boxtree-like object that holds only
the leaves (every leaf a target box, its 27 nodes its particles, in node
order): the List 1 lists are hipkern's, in CSR form, as boxtree's traversal
gives them (``target_boxes``, ``neighbor_source_boxes_starts/_lists``).

Inputs: with ``hipkern`` importable the tree, table, density (seeded
uniform in [0, 1)) and the reference (hipkern's CPU float64
``evaluate_list1``: the definition) are made here; else, or with
``--inputs DIR``, they are read from ``DIR/{table,uniform,random}.npz``
(written by ``--save-inputs DIR``; the density is regenerated from its seed
when the file has none).

Timing: the first call (cold: loopy code generation, OpenCL build, payload
upload, all under fresh caches unless ``--keep-cache``) separately; then
``--warmup`` untimed calls and the median of ``--runs`` wall-clock calls,
each ending in ``queue.finish()``; also the kernel's own device time
(OpenCL profiling events) per run. Output: one line per tree and batch
size, and ``--json FILE``.

Environment: ``--platform nvidia`` writes a temporary vendors folder with
``nvidia.icd`` (``libnvidia-opencl.so.1``) and points OCL_ICD_VENDORS at it
before pyopencl loads (pyopencl's wheel bundles the ocl-icd loader).
``--platform pocl`` uses pocl (the ``pocl-binary-distribution`` wheel or
the system ICD). Caches (loopy, pytools, pyopencl) go to a temporary
XDG_CACHE_HOME unless ``--keep-cache``.
"""
import argparse
import json
import os
import sys
import tempfile
import time

TREES = {
    # name: (kind, kwargs) for hipkern.nearfield
    "uniform": ("uniform", {"dim": 3, "level": 5}),
    "random": ("random", {"dim": 3, "seed": 1, "max_level": 6,
                          "refine_probability": 0.3}),
}
Q = 3
DIM = 3
DENSITY_SEED = 0x1157


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tree", default="uniform,random",
                   help="comma-separated: uniform, random (default both)")
    p.add_argument("--uniform-level", type=int, default=5,
                   help="level of the uniform tree (default 5: 32768 leaves)")
    p.add_argument("--platform", default="nvidia",
                   help="nvidia | pocl | any (the first platform with a device); "
                        "or a substring of the platform name")
    p.add_argument("--device-index", type=int, default=0)
    p.add_argument("--runs", type=int, default=10, help="timed calls (median)")
    p.add_argument("--warmup", type=int, default=2, help="untimed calls after the cold one")
    p.add_argument("--batch-sizes", default="1",
                   help="volumential's list1_target_batch_size values to time "
                        "(comma-separated; 1 is volumential's default)")
    p.add_argument("--table-storage", default="reduced",
                   help="reduced (volumential's own table storage: its compact "
                        "scalar-arithmetic-orbit reconstruction) and/or full (every "
                        "entry: its dense reconstruction); comma-separated")
    p.add_argument("--inputs", default=None,
                   help="read tree/table/reference from DIR/*.npz instead of hipkern")
    p.add_argument("--save-inputs", default=None,
                   help="write DIR/{table,<tree>}.npz from hipkern and exit")
    p.add_argument("--store-density", action="store_true",
                   help="with --save-inputs: store the density too (else its seed)")
    p.add_argument("--keep-cache", action="store_true",
                   help="keep the user's XDG_CACHE_HOME (else a fresh temporary one)")
    p.add_argument("--json", default=None, help="write the results here")
    p.add_argument("--quiet", action="store_true", help="less logging from volumential")
    return p.parse_args(argv)


# {{{ environment (before pyopencl is imported)

def setup_env(args):
    tmp = tempfile.mkdtemp(prefix="vol-peer-")
    if args.platform == "nvidia":
        vend = os.path.join(tmp, "vendors")
        os.makedirs(vend)
        lib = "libnvidia-opencl.so.1"
        try:
            import ctypes
            ctypes.CDLL(lib)
        except OSError:
            for d in ("/usr/local/nvidia/lib64", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"):
                if os.path.exists(os.path.join(d, lib)):
                    lib = os.path.join(d, lib)
                    break
        with open(os.path.join(vend, "nvidia.icd"), "w") as f:
            f.write(lib + "\n")
        print(f"OCL_ICD_VENDORS={vend} (nvidia.icd: {lib})", file=sys.stderr)
        os.environ["OCL_ICD_VENDORS"] = vend
        os.environ.pop("OPENCL_VENDOR_PATH", None)
    if not args.keep_cache:
        os.environ["XDG_CACHE_HOME"] = os.path.join(tmp, "cache")
        os.makedirs(os.environ["XDG_CACHE_HOME"])
    # pyopencl: no prompt for a context, say what the compiler says.
    os.environ.setdefault("PYOPENCL_COMPILER_OUTPUT", "0")
    return tmp

# }}}


# {{{ inputs

def _hipkern():
    try:
        import hipkern.nearfield as nf
        return nf
    except Exception as e:  # noqa: BLE001
        print(f"hipkern not importable ({type(e).__name__}: {e})", file=sys.stderr)
        return None


def _sha256(a):
    import hashlib

    import numpy as np
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f8").tobytes()).hexdigest()


def density_for(n_boxes, seed=DENSITY_SEED):
    import numpy as np
    return np.random.default_rng(seed).uniform(0.0, 1.0, size=(n_boxes, Q**DIM))


def make_inputs_hipkern(nf, names, uniform_level):
    import numpy as np
    t0 = time.perf_counter()
    table = nf.build_table("laplace", dim=DIM, q=Q)
    print(f"hipkern table: {table!r} in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    tab = {
        "dense": np.ascontiguousarray(table.dense()),
        "q_points": np.array(table.q_points),
        "mode_normalizers": np.array(table.mode_normalizers),
        "case_indices": np.array(table.case_indices),
        "case_vectors": np.array(table.case_vectors),
        "box_extent": np.float64(table.box_extent),
    }
    cases = {}
    for name in names:
        kind, kw = TREES[name]
        if kind == "uniform":
            kw = dict(kw, level=uniform_level)
            tree = nf.uniform_tree(**kw)
        else:
            tree = nf.random_tree(**kw)
        f = density_for(tree.n_boxes)
        t0 = time.perf_counter()
        ref = nf.evaluate_list1(table, tree, f)
        t_ref = time.perf_counter() - t0
        print(f"hipkern CPU List 1 ({name}, {tree!r}): {t_ref:.2f} s", file=sys.stderr)
        cases[name] = {
            "centers": np.array(tree.centers), "levels": np.array(tree.levels),
            "root_extent": np.float64(tree.root_extent),
            "source_starts": np.array(tree.source_starts),
            "source_boxes": np.array(tree.source_boxes),
            "target_boxes": np.array(tree.target_boxes),
            "density": f, "density_seed": np.int64(DENSITY_SEED),
            "reference": ref, "hipkern_cpu_s": np.float64(t_ref),
        }
    return tab, cases


def save_inputs(dirname, tab, cases, store_density):
    import numpy as np
    os.makedirs(dirname, exist_ok=True)
    np.savez(os.path.join(dirname, "table.npz"), **tab)
    for name, c in cases.items():
        c = dict(c)
        c["density_sha256"] = np.array(_sha256(c["density"]))
        if not store_density:
            del c["density"]
        # Small index types: the lists are box ids below 2**31.
        for k in ("levels", "source_starts", "source_boxes", "target_boxes"):
            c[k] = c[k].astype(np.int32)
        np.savez(os.path.join(dirname, f"{name}.npz"), **c)
        print(f"wrote {dirname}/{name}.npz", file=sys.stderr)


def load_inputs(dirname, names):
    import numpy as np
    with np.load(os.path.join(dirname, "table.npz")) as z:
        tab = {k: z[k] for k in z.files}
    cases = {}
    for name in names:
        with np.load(os.path.join(dirname, f"{name}.npz")) as z:
            c = {k: z[k] for k in z.files}
        if "density" not in c:
            c["density"] = density_for(c["centers"].shape[0], int(c["density_seed"]))
            # The reference was computed from the density made where the
            # inputs were saved: the regenerated one must be the same bits.
            if _sha256(c["density"]) != str(c["density_sha256"]):
                raise SystemExit(
                    f"{name}: the density regenerated from seed {int(c['density_seed'])} "
                    "differs from the saved one (numpy's generator stream changed); "
                    "save the inputs with --store-density")
        cases[name] = c
    return tab, cases

# }}}


# {{{ volumential

def pick_device(cl, args):
    try:
        plats = cl.get_platforms()
    except cl.Error as e:
        raise SystemExit(
            f"no OpenCL platform ({e}); OCL_ICD_VENDORS={os.environ.get('OCL_ICD_VENDORS')}"
            + (f" holds {os.listdir(os.environ['OCL_ICD_VENDORS'])}"
               if os.path.isdir(os.environ.get("OCL_ICD_VENDORS", "")) else ""))
    desc = [(p.name, [d.name for d in p.get_devices()]) for p in plats]
    print(f"OpenCL platforms: {desc}", file=sys.stderr)
    want = {"nvidia": "nvidia", "pocl": "portable computing language"}.get(
        args.platform, args.platform.lower())
    for p in plats:
        if want == "any" or want in p.name.lower() or want in p.vendor.lower():
            devs = p.get_devices()
            if devs:
                return devs[min(args.device_index, len(devs) - 1)]
    raise SystemExit(f"no OpenCL platform matching {args.platform!r} (have {desc})")


def volumential_table(tab, storage="reduced"):
    import numpy as np
    from sumpy.kernel import LaplaceKernel
    from volumential.nearfield_potential_table import NearFieldInteractionTable

    knl = LaplaceKernel(DIM)
    t = NearFieldInteractionTable(
        quad_order=Q, dim=DIM, sumpy_kernel=knl, derive_kernel_func=False,
        source_box_extent=float(tab["box_extent"]), progress_bar=False,
        precomputed_q_points=tab["q_points"])
    # Same conventions: case list, case codes, node order.
    assert np.array_equal(np.asarray(t.case_indices), tab["case_indices"]), "case_indices differ"
    assert np.array_equal(np.asarray(t.interaction_case_vecs), tab["case_vectors"]), \
        "case vectors differ"
    assert t.n_cases * t.n_pairs == tab["dense"].size
    dense = np.ascontiguousarray(tab["dense"], dtype=np.float64).ravel()
    if storage == "reduced":
        # As volumential's own builder stores a table (build_table ->
        # set_reduced_table_data of its scalar-arithmetic representatives),
        # so that its List 1 takes its default compact reconstruction.
        info = t._get_scalar_arithmetic_invariant_entry_info()
        if info is None:
            raise SystemExit("volumential has no scalar-arithmetic orbits for this kernel")
        ids = np.unique(np.asarray(info["entry_ids"], dtype=np.int64))
        t.set_reduced_table_data(ids, dense[ids])
    elif storage == "full":
        t.data = dense
    else:
        raise SystemExit(f"--table-storage: unknown {storage!r} (reduced, full)")
    t.mode_normalizers = np.array(tab["mode_normalizers"], dtype=np.float64)
    t.kernel_exterior_normalizers = np.zeros_like(t.mode_normalizers)
    t.is_built = True
    return knl, t


def make_wrangler(cl, queue, knl, table, case, list1_extra_kwargs):
    """A FPNDSumpyExpansionWrangler holding only what List 1 reads."""
    import types
    from collections import OrderedDict

    import numpy as np
    import pyopencl.array as cla
    from volumential.expansion_wrangler_fpnd import FPNDSumpyExpansionWrangler

    n = case["centers"].shape[0]
    nq = Q**DIM
    tree = types.SimpleNamespace(
        dimensions=DIM,
        nboxes=n,
        root_extent=np.float64(case["root_extent"]),  # boxtree: a numpy scalar
        box_centers=cla.to_device(queue, np.ascontiguousarray(case["centers"].T)),
        box_levels=cla.to_device(queue, case["levels"].astype(np.uint8)),
        box_target_starts=cla.to_device(queue, (np.arange(n, dtype=np.int32) * nq)),
        box_target_counts_nonchild=cla.to_device(queue, np.full(n, nq, np.int32)),
        sources_are_targets=True,
        ntargets=n * nq,
        sorted_target_ids=cla.to_device(queue, np.arange(n * nq, dtype=np.int32)),
    )

    class List1Wrangler(FPNDSumpyExpansionWrangler):
        def __init__(self):  # noqa: D401 - only List 1's state
            self.queue = queue
            self.traversal = types.SimpleNamespace(tree=tree)
            self.dtype = np.float64
            self.potential_kind = 1
            self.source_extra_kwargs = {}
            self.list1_extra_kwargs = dict(list1_extra_kwargs)
            self.near_field_table = {repr(knl): [table]}
            self.helmholtz_split = None
            self._nearfield_device_payload_cache = OrderedDict()
            self._nearfield_device_payload_cache_max = 16
            self._table_layout_validation_cache = set()

    w = List1Wrangler()
    trav = {
        "target_boxes": cla.to_device(queue, case["target_boxes"].astype(np.int32)),
        "starts": cla.to_device(queue, case["source_starts"].astype(np.int32)),
        "lists": cla.to_device(queue, case["source_boxes"].astype(np.int32)),
        "coefs": cla.to_device(queue, np.ascontiguousarray(case["density"].ravel())),
    }
    return w, trav


def run_volumential(cl, queue, knl, w, trav, n_out):
    import numpy as np
    import pyopencl.array as cla
    t0 = time.perf_counter()
    out = cla.zeros(queue, n_out, np.float64)
    out, evt = w.eval_direct_single_out_kernel(
        out, knl, trav["target_boxes"], trav["starts"], trav["lists"], trav["coefs"])
    queue.finish()
    wall = time.perf_counter() - t0
    try:
        kern = (evt.profile.end - evt.profile.start) * 1e-9
    except Exception:  # noqa: BLE001
        kern = float("nan")
    return out, wall, kern

# }}}


def main(argv=None):
    args = parse_args(argv)
    names = [s.strip() for s in args.tree.split(",") if s.strip()]
    for s in names:
        if s not in TREES:
            raise SystemExit(f"--tree: unknown {s!r} (uniform, random)")

    if args.save_inputs:
        nf = _hipkern()
        if nf is None:
            raise SystemExit("--save-inputs needs hipkern")
        tab, cases = make_inputs_hipkern(nf, names, args.uniform_level)
        save_inputs(args.save_inputs, tab, cases, args.store_density)
        return 0

    tmp = setup_env(args)
    import logging
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(name)s: %(message)s")
    if args.quiet:
        for lg in ("volumential", "loopy", "pytools", "sumpy", "boxtree"):
            logging.getLogger(lg).setLevel(logging.ERROR)

    import numpy as np
    if args.inputs:
        tab, cases = load_inputs(args.inputs, names)
        src = f"npz:{args.inputs}"
    else:
        nf = _hipkern()
        if nf is None:
            raise SystemExit("no hipkern: pass --inputs DIR (npz from --save-inputs)")
        tab, cases = make_inputs_hipkern(nf, names, args.uniform_level)
        src = "hipkern"

    t_imp = time.perf_counter()
    import pyopencl as cl
    import volumential
    import volumential.expansion_wrangler_fpnd  # noqa: F401
    t_imp = time.perf_counter() - t_imp
    dev = pick_device(cl, args)
    ctx = cl.Context([dev])
    queue = cl.CommandQueue(ctx, properties=cl.command_queue_properties.PROFILING_ENABLE)
    import loopy
    import pyopencl
    import sumpy
    versions = {
        "python": sys.version.split()[0], "numpy": np.__version__,
        "pyopencl": pyopencl.VERSION_TEXT, "loopy": loopy.__version__
        if hasattr(loopy, "__version__") else getattr(loopy.version, "VERSION_TEXT", "?"),
        "sumpy": getattr(sumpy, "__version__", None) or __import__("sumpy.version").version.VERSION_TEXT,
        "volumential": volumential.volumential_version,
    }
    print(f"device: {dev.name} | platform {dev.platform.name} {dev.platform.version} | "
          f"driver {dev.driver_version} | inputs {src} | imports {t_imp:.2f} s | "
          f"{versions}", flush=True)

    storages = [x.strip() for x in args.table_storage.split(",") if x.strip()]
    tables = {st: volumential_table(tab, st) for st in storages}
    results = []
    for name, storage in [(nm, st) for nm in names for st in storages]:
        knl, table = tables[storage]
        case = cases[name]
        n = case["centers"].shape[0]
        nq = Q**DIM
        ref = np.asarray(case["reference"]).reshape(-1, nq)
        n_out = n * nq
        for bs in [int(b) for b in args.batch_sizes.split(",") if b.strip()]:
            extra = {} if bs == 1 else {"list1_target_batch_size": bs}
            w, trav = make_wrangler(cl, queue, knl, table, case, extra)
            out, cold, cold_k = run_volumential(cl, queue, knl, w, trav, n_out)
            recon = next(iter(w._nearfield_device_payload_cache.values()))[
                "table_data_shapes"].get("reconstruction_kind")
            for _ in range(args.warmup):
                run_volumential(cl, queue, knl, w, trav, n_out)
            walls, kerns = [], []
            for _ in range(args.runs):
                out, wall, kern = run_volumential(cl, queue, knl, w, trav, n_out)
                walls.append(wall)
                kerns.append(kern)
            u = out.get(queue).reshape(-1, nq)
            u = u[case["target_boxes"].astype(np.int64)] if u.shape[0] != ref.shape[0] else u
            rel = float(np.max(np.abs(u - ref)) / np.max(np.abs(ref)))
            rel_pt = float(np.max(np.abs(u - ref) / np.maximum(np.abs(ref), 1e-300)))
            walls_ms = np.array(walls) * 1e3
            kerns_ms = np.array(kerns) * 1e3
            r = {
                "tree": name, "boxes": int(n), "targets": int(case["target_boxes"].size),
                "pairs": int(case["source_boxes"].size), "points": int(n_out),
                "batch": bs, "storage": storage, "recon": recon, "device": dev.name,
                "cold_s": cold, "cold_kernel_ms": cold_k * 1e3,
                "median_ms": float(np.median(walls_ms)),
                "min_ms": float(walls_ms.min()), "max_ms": float(walls_ms.max()),
                "kernel_median_ms": float(np.median(kerns_ms)),
                "kernel_min_ms": float(kerns_ms.min()), "kernel_max_ms": float(kerns_ms.max()),
                "runs": args.runs, "rel_maxnorm": rel, "rel_pointwise_max": rel_pt,
                "hipkern_cpu_s": float(case.get("hipkern_cpu_s", float("nan"))),
            }
            results.append(r)
            print(f"volumential-list1 tree={name} boxes={n} pairs={r['pairs']} batch={bs} "
                  f"table={storage} recon={recon} cold={cold:.3f}s median={r['median_ms']:.3f}ms "
                  f"spread=[{r['min_ms']:.3f}..{r['max_ms']:.3f}]ms runs={args.runs} "
                  f"kernel_median={r['kernel_median_ms']:.3f}ms "
                  f"rel_maxnorm_vs_hipkern={rel:.3e} rel_pointwise={rel_pt:.3e}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions, "device": dev.name, "platform": dev.platform.name,
                       "inputs": src, "results": results}, f, indent=1)
    if not args.keep_cache:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
