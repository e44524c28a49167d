"""Near-field table and List 1 from numpy: a 3D Laplace q = 3 table
(built from its symmetry representatives, stored in and then read from a
SQLite cache), a random 2:1 octree, a density at the boxes' nodes, and
List 1 on the CPU in float64, then on the GPU (fast and exact contracts)
when this hipkern has device code and a device opens.

    python python/examples/nearfield_list1.py
"""
import math
import os
import tempfile
import time

import numpy as np

import hipkern
import hipkern.nearfield as nf

with tempfile.TemporaryDirectory() as tmp:
    cache = os.path.join(tmp, "tables.sqlite")
    t0 = time.perf_counter()
    table = nf.build_table("laplace", dim=3, q=3, cache=cache)
    t1 = time.perf_counter()
    again = nf.build_table("laplace", dim=3, q=3, cache=cache)
    t2 = time.perf_counter()
    print(f"table: 3D Laplace q=3, {table.n_cases} cases, built in {t1 - t0:.2f} s "
          f"(loaded={table.loaded}); from the cache in {t2 - t1:.3f} s (loaded={again.loaded})")
    assert not table.loaded and again.loaded
    assert np.array_equal(table.dense(), again.dense())

# The closed form at the cube's centre: sum_s T[self, s, centre].
centre = (table.n_modes - 1) // 2
total = table.dense()[table.self_case, :, centre].sum()
exact = (3 * math.log(2 + math.sqrt(3)) - math.pi / 2) / (4 * math.pi)
print(f"  sum_s T[self, s, centre] = {total:.15f}, closed form {exact:.15f}")
assert abs(total - exact) <= 1e-12 * exact

tree = nf.random_tree(3, seed=11, max_level=4)
x = nf.box_points(tree, 3)                               # (n_boxes, 27, 3)
density = np.exp(-4 * ((x - 0.5) ** 2).sum(-1)) * (1 + x[..., 0])
t0 = time.perf_counter()
u = nf.evaluate_list1(table, tree, density)              # CPU, float64
print(f"tree: {tree.n_boxes} boxes, {tree.n_pairs} List 1 pairs; CPU List 1 in "
      f"{time.perf_counter() - t0:.3f} s, max|u| = {np.abs(u).max():.6e}")

try:
    evaluator = nf.Evaluator(table, device=0, contract="fast")
except RuntimeError as e:
    print(f"no device List 1 ({hipkern.platform()} build): {e}")
else:
    for contract in ("fast", "exact"):
        ev = nf.Evaluator(table, device=0, contract=contract)
        plan = ev.plan(tree)
        got = plan.evaluate(density)
        err = np.abs(got - u).max() / np.abs(u).max()
        print(f"  device {contract}: kernel {plan.kernel} ({plan.reason}); rel err {err:.1e}, "
              f"bitwise {np.array_equal(got, u)}")
        assert (np.array_equal(got, u) if contract == "exact" else err <= 1e-13)
