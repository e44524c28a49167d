//! Near-field interaction tables and the List 1 evaluator
//! (`docs/design/nearfield.md`, `docs/design/list1.md`),
//! with volumential's conventions, in float64 on the CPU and, for List 1,
//! on the device.
//!
//! The pieces: the interaction cases of a 2:1 tree ([`Cases`]), the source
//! box's nodes ([`q_points`]), the kernels ([`Kernel`]: Laplace, Yukawa,
//! Constant and their derivative wrappers), one entry by the
//! singularity-aware Duffy/radial scheme ([`entry`], [`entry_at_point`],
//! [`EntryQuadrature`]; the scheme and its measured accuracy are in the docs
//! of `entry` and `docs/nearfield_accuracy.md`), the dense table
//! ([`NearFieldTable`]) and its box-size scaling ([`ScalingRule`]), the
//! symmetry reduction (the dense oracle [`DenseOrbits`], the arithmetic
//! ORBIT descriptors [`OrbitDescriptors`], the generated descriptor fallback
//! [`FallbackDescriptors`], compact [`ReducedTable`]s built from the
//! representatives only), the SQLite cache ([`TableCache`], schema 2.1.0,
//! `docs/nearfield_cache.md`), the limits checked before any work
//! ([`check_table_size`], [`check_kernel_and_extent`]: table sizes, the
//! extents, `λ·L` and directions whose entries float64 represents),
//! 2:1-balanced trees with their List 1 lists
//! ([`BalancedTree`]), the CPU float64 List 1 evaluator ([`evaluate_list1`],
//! the definition) and the device one ([`List1Evaluator`]).
//!
//! # A table entry
//!
//! For a template source box `[0, L]^d` with `q` Gauss–Legendre nodes per
//! axis (tensor product, flat index `m = Σ_k m_k q^{d−1−k}`, axis 0 slowest)
//! and `φ_s` the tensor Lagrange basis function of node `s`:
//!
//! ```text
//! T[case, s, t] = ∫_{[0,L]^d} φ_s(y) G(x_t − y) dy
//! entry id       = case·q^{2d} + s·q^d + t
//! ```
//!
//! `x_t` is target point `t` of the case (below), `G` includes the kernel's
//! normalisation: Laplace 3D `1/(4π|r|)`, 2D `−ln|r|/(2π)`; Yukawa 3D
//! `e^{−λ|r|}/(4π|r|)`, 2D `K₀(λ|r|)/(2π)`; Constant `1`; the derivative
//! wrappers `∂G(x − y)/∂x_a` (target), `∂G(x − y)/∂y_a` (source) and
//! `Σ_k d_k ∂G(x − y)/∂y_k` (directional source, `d` used as given), axes
//! 0-based. `T` applied to a box's values `f_s` at its nodes integrates the
//! Lagrange interpolant of the density against `G`. The mode normalisers are
//! `N_s = ∫_{[0,L]^d} φ_s` (the product of the nodes' Gauss–Legendre
//! weights, [`mode_normalizers`]).
//!
//! # Box-size scaling and displacement
//!
//! A table at extent `L` gives the one at `ρL` without new quadrature
//! (`T_ρL[c, s, t] = ρ^d ∫_{[0,L]^d} φ_s(u) G(ρ(x_t − u)) du`;
//! [`ScalingRule`], [`NearFieldTable::scaled`]):
//!
//! ```text
//! 3D Laplace:                          T_ρL = ρ²·T
//! 2D Laplace:                          T_ρL = ρ²·T − ρ²·ln ρ·N_s/(2π)     (N_s at extent L)
//! Laplace axis/directional derivative: T_ρL = ρ·T                         (2D and 3D)
//! Constant:                            T_ρL = ρ^d·T    (its derivatives, identically 0: ρ^{d−1})
//! Yukawa:                              no rule: one table per source level
//! ```
//!
//! List 1 applies this per source box as a factor and a displacement
//! ([`level_scalings`], [`LevelScaling`]): `ρ = h_S/L` with
//! `h_S = root_extent/2^level_S`; `scale = ρ^p`, `displacement = 0`, except
//! 2D Laplace: `scale = ρ²`, `displacement = −ρ²·ln ρ/(2π)`, added as
//! `displacement · Σ_s f_s N_s` per pair. Per-level tables (Yukawa):
//! `scale = 1`, `displacement = 0`.
//!
//! # List 1
//!
//! ```text
//! u[B, t] = Σ_{S ∈ L1(B)} Σ_s f[S, s] · ( scale(S) · T[case(B, S), s, t] + displacement(S) · N_s )
//! ```
//!
//! `B` a target box, `t` one of its `q^d` nodes (the target points of a case
//! are the target box's nodes), `S` the source boxes of `B`'s List 1 in list
//! order, `f[S, s]` the source values at `S`'s nodes, `case(B, S)` from the
//! centres and sides ([`Cases::case_of_pair`], checked). `T[c, s, t]` is the
//! entry as the table layout holds it: the dense value, or
//! `sign · rows[row]` from the compact rows (ORBIT, fallback: below). Per
//! pair the sum over `s` runs in mode order into `acc`, then
//! `u += scale·acc + displacement·Σ_s f_s N_s` (the displacement term only
//! where it is nonzero); the CPU and the device do exactly this, in this
//! order, without fused multiply-adds, so their outputs are equal bit for
//! bit over the same entry values under the device's
//! [`List1Contract::Exact`]; its default, [`List1Contract::Fast`], agrees
//! within 1e−13 relative max-norm.
//!
//! # Symmetry compression
//!
//! A signed permutation `g` of the axes (`(g v)_k = σ_k v_{π(k)}`), acting
//! about the source box's centre, maps case `c` to `g c` and nodes to nodes
//! (`m_k → m_{π(k)}`, or `q − 1 − m_{π(k)}` where `σ_k = −1`). For the
//! transforms a kernel allows ([`kernel_group`]: all 8 (2D) or 48 (3D) for
//! the radial kernels; `π(a) = a` for a derivative on axis `a`, sign `σ_a`;
//! `g d = ±d` for a directional derivative, sign ±1):
//!
//! ```text
//! T[g c, g s, g t] = sign(g) · T[c, s, t]
//! ```
//!
//! The entries fall into orbits; the *representative* of an orbit is its
//! smallest full entry id, and every entry is `±1 ×` its representative's
//! value. An orbit that holds an entry equal to minus itself is zero by
//! symmetry and stored as exactly 0. [`DenseOrbits`] is the dense signed
//! union-find oracle (`canonical_entry_ids`, `canonical_scales`:
//! `T[e] = canonical_scales[e] · T[canonical_entry_ids[e]]`): the reference
//! the other addressings are checked against (the fallback's when it is
//! prepared, ORBIT's in the tests); it is never uploaded. A
//! [`ReducedTable`] stores only `reduced_entry_ids` (the representatives,
//! ascending) and `reduced_data`, computed from one quadrature pass per
//! orbit of (case, target point) pairs; [`ReducedTable::get_entry_data`] and
//! [`ReducedTable::reconstruct_full_table_from_symmetry`] are the dense
//! adapters (`T[e] = sign · reduced_data[row of representative(e)]`).
//! 3D Laplace q = 3: 101,331 full entries, 2,510 representatives.
//!
//! Two addressings find `(row, sign)` of a full entry on the device:
//!
//! - ORBIT ([`OrbitDescriptors::slot`]; radial kernels and axis
//!   derivatives): the case's own transform `g_c` (`case_axis_perm`,
//!   `case_axis_sign`) takes `c` to its case orbit's canonical vector `c*`
//!   and moves `s` and `t` with it; per axis the code `p_k = s_k·q + t_k`,
//!   replaced by `q² − 1 − p_k` where that is smaller on an axis the
//!   stabiliser may flip
//!   (`c*_k = 0`; on a derivative axis this flips the sign, and
//!   `p_k = (q² − 1)/2` there means zero by symmetry); codes of equal-label
//!   axes (`case_axis_group`) sorted by a fixed compare-exchange network;
//!   then `row = case_value_offsets[case_orbit_ranks[c]] + rank`, the
//!   multiset ranks `Σ_i C(x_i + i − 1, i)` of the groups combined in mixed
//!   radix, and `sign = Π_k σ_k^{axis_sign_power_k}` times the flips. Row
//!   `r` holds `sign(e) · T[e]` of the smallest-id entry `e` that maps to
//!   it, so that `T[c, s, t] = sign · rows[row]`. A few bytes per case
//!   (3D q = 3: 1,576 bytes of descriptors against 1,215,972 of dense
//!   maps); no full-entry map, no hash.
//! - Descriptor fallback ([`FallbackDescriptors::slot`]; every kernel,
//!   needed for directional derivatives): the representative is the
//!   smallest of the images `(case_map[g, c]·q^d + qmap[g, s])·q^d +
//!   qmap[g, t]` over every transform `g`, the sign that of the transform
//!   reaching it (ties: a positive sign first, then the earlier transform),
//!   corrected by the sparse `sign_lookup` (only in zero orbits, where the
//!   oracle's sign is a convention); the row comes from the open-addressed
//!   `representative_lookup` within `probe_count` probes (the longest
//!   displacement in it plus one): `T[c, s, t] = sign · rows[row]`. Prepared once and checked against the
//!   oracle for every full entry. When the rows fit 15 bits,
//!   [`FallbackDescriptors::resolution`] derives a plan-time table of the
//!   canonical cases' `(row, sign)` and each case's transform, checked
//!   against `slot` for every full entry, so that the device resolves an
//!   entry with two reads instead of the scan and the hash (else `None`:
//!   the descriptor path).
//!
//! The device layouts ([`List1Layout`]): `Dense` (every entry), `Orbit`
//! (compact rows + ORBIT descriptors) and `Fallback` (compact rows +
//! fallback descriptors, and the resolution table when there is one).
//!
//! # What a case is
//!
//! In a 2:1-balanced quadtree/octree, a target box interacts directly
//! (List 1) with every leaf source box that touches it: a box of the same
//! size, half its size or twice its size, sharing at least a corner, and the
//! box itself. A table is computed once for a template source box
//! `[0, L]^d`; where the target box lies relative to the source box is the
//! *interaction case*. Each case is named by its *case vector*
//!
//! ```text
//! c = 4 · (center_t − center_s) / h_s        (integer components in −6..6)
//! ```
//!
//! with `h_s` the source box's side. `c = 0` is the box with itself;
//! `max|c_k| = 4` (components in {−4, 0, 4}) a same-size neighbour;
//! `max|c_k| = 3` (components in {±1, ±3}) a target half the source's size;
//! `max|c_k| = 6` (components in {±2, ±6}) a target twice the source's size.
//! That gives 2D: 9 + 12 + 12 = 33 cases, 3D: 27 + 56 + 56 = 139
//! ([`CaseKind`]).
//!
//! # Conventions (those of volumential, so a table means the same thing)
//!
//! - *code* of a vector: Horner of `c_k + 6` in base 13, first component most
//!   significant ([`CASE_ENCODING_BASE`], [`CASE_ENCODING_SHIFT`]).
//! - *case id*: the position of the vector in the list of valid vectors
//!   sorted by code (equivalently, lexicographically).
//! - [`Cases::case_indices`]: the lookup array of length `13^d` from code to
//!   case id, `−1` where a code is no case.
//! - Source box nodes ([`q_points`]): `q` Gauss–Legendre nodes per axis on
//!   `[0, L]`, ascending, tensor product, flat index
//!   `m = Σ_k m_k q^{d−1−k}` (axis 0 slowest).
//! - Target points of a case ([`Cases::target_points`]):
//!   `x_t = L/2 + (c/4)·L + size·(ξ_t − L/2)` with `size = 1` for `c = 0`,
//!   else `(max|c_k| − 2)/2` (= `h_t/h_s`: 1, ½ or 2): the source box's nodes
//!   carried into the target box.
//! - Entry id: `case·q^{2d} + s·q^d + t` (`s` the source mode, `t` the target
//!   point; [`Cases::entry_id`]).
//!
//! # Where they come from
//!
//! volumential (`xywei/volumential`), read for facts, no code copied:
//!
//! - `volumential/list1_gallery.py`, `generate_list1_gallery(dim)` returns
//!   `(vec_list, case_encode, case_indices)`: `vec_list` is the sorted set
//!   of integer centre differences `tbox.center − sbox.center` over all
//!   touching pairs in a small integer tree (`generate_interactions`,
//!   target boxes of side 4, touching meaning `linf_dist == 0`) plus the zero
//!   vector (`postprocess_interactions`); `base` is the count of integers
//!   from the smallest to the largest component (13), `shift = −min` (6);
//!   `case_encode` is the Horner code; `case_indices` is a numpy int array of
//!   length `base^dim` filled with −1 and then `case_indices[code] = id`.
//! - `volumential/nearfield_potential_table.py`,
//!   `NearFieldInteractionTable.__init__`: `interaction_case_vecs,
//!   case_encode, case_indices` from the gallery; `q_points` from modepy's
//!   `LegendreGaussQuadrature(q − 1)` mapped to `[0, L]` and sorted in
//!   dictionary order; `get_entry_index` / `decode_index` for the entry id;
//!   `find_target_point` and `_get_case_target_points` for the target
//!   points.
//! - `volumential/list1.py`, `codegen_vec_component` / `codegen_vec_id`: at
//!   evaluation a pair's code is
//!   `Σ ((center_t − center_s)/h_s·4 + shift + 1e−10)·base^{d−1−k} + 0.5`
//!   truncated to an integer, `h_s = root_extent/2^level_s`, and
//!   `case_id = case_indices[code]` (`CASE_ENCODING_BIAS_DEFAULT = 1e−10`).
//!
//! Here [`Cases::case_of_pair`] does the same mapping but checks the pair
//! first (sizes in a 2:1 ratio, boxes touching, not overlapping, aligned on
//! the tree's grid) and says what is wrong instead of reading a −1.
#[cfg(feature = "cache")]
mod cache;
mod list1;
mod symmetry;
mod table;

// Each file's module by its own name, wherever its folder is, so that
// `crate::nearfield::<file>::Item` names an item across folders.
use list1::{device as list1_device, grouping as list1_grouping, tiling as list1_tiling, tree};
use symmetry::{fallback, orbit, reduced};
use table::{cases, entry, kernels, limits, quadrature, scaling};

#[cfg(feature = "cache")]
pub use cache::{
    CacheKey, CachedTable, SymmetryMode, TableCache, CACHE_SCHEMA_VERSION, CORRUPT_ENTRY_HINT,
    PAYLOAD_FORMAT_VERSION, PAYLOAD_MAGIC,
};
pub use cases::{CaseKind, Cases, CASE_ENCODING_BASE, CASE_ENCODING_SHIFT, PAIR_TOLERANCE};
pub use entry::{
    entries_at_point, entry, entry_at_point, tanh_sinh_unit, CaseRef, EntryQuadrature,
};
pub use fallback::{
    FallbackDescriptors, FallbackResolution, FallbackSlot, LOOKUP_EMPTY, RESOLUTION_NEGATIVE,
};
pub use kernels::{bessel_k0, bessel_k1, BaseKernel, Derivative, Kernel};
pub use limits::{
    check_kernel_and_extent, check_table_size, TableSize, DIRECTION_COMPONENT_RANGE, EXTENT_RANGE,
    MAX_TABLE_ENTRIES, MIN_FACE_DISTANCE, TARGET_REACH, YUKAWA_LAMBDA_EXTENT_RANGE,
};
pub use list1::{
    evaluate_list1, evaluate_list1_with_threads, level_scalings, LevelScaling, List1Boxes,
    List1Pairs, List1Tables,
};
pub use list1_device::{
    internals as list1_internals, staged_source_bound, List1Contract, List1DevicePlan,
    List1Evaluator, List1Kernel, List1Layout, List1Payload, List1ReducedTables, List1UploadBytes,
    DEFAULT_PAIR_SCRATCH_BYTES, MAX_TILED_MODES,
};
pub use orbit::{OrbitDescriptors, OrbitSlot, GROUP_DERIVATIVE, GROUP_FLIPPABLE};
pub use quadrature::{gauss_legendre, legendre_gauss_unit, q_points, MAX_QUAD_ORDER};
pub use reduced::{ReducedTable, Representative};
pub use scaling::ScalingRule;
pub use symmetry::{
    apply_to_entry, kernel_group, signed_permutations, DenseOrbits, SignedPermutation,
};
pub use table::{mode_normalizers, NearFieldTable};
pub use tree::{BalancedTree, RandomTreeConfig, MAX_TREE_LEVEL};
