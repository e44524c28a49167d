//! Near-field interaction tables (SPEC §5): the interaction cases, the
//! source box's quadrature nodes and the target points of each case.
//!
//! This is the first part of the near-field work, CPU only and in float64:
//! the bookkeeping that says what an entry of a table means, the kernels
//! ([`Kernel`]: Laplace, Yukawa, Constant and their derivative wrappers) and
//! one entry by the singularity-aware Duffy/radial scheme ([`entry`],
//! [`entry_at_point`], [`EntryQuadrature`]; the scheme and its measured
//! accuracy are in the docs of `entry`), the dense table of every entry
//! ([`NearFieldTable`], with its mode normalisers, built in parallel) and the
//! box-size scaling rules ([`ScalingRule`], [`NearFieldTable::scaled`]),
//! the CPU float64 List 1 evaluator ([`evaluate_list1`], the definition the
//! device evaluator is checked against) and a generator of uniform and
//! random 2:1-balanced trees with their List 1 lists ([`BalancedTree`]).
//! The symmetry reduction, the cache and the device List 1 evaluator come
//! later and build on these conventions.
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
mod cache;
mod cases;
mod entry;
mod fallback;
mod kernels;
mod list1;
mod list1_device;
mod orbit;
mod quadrature;
mod reduced;
mod scaling;
mod symmetry;
mod table;
mod tree;

pub use cache::{
    CacheKey, CachedTable, SymmetryMode, TableCache, CACHE_SCHEMA_VERSION, PAYLOAD_FORMAT_VERSION,
    PAYLOAD_MAGIC,
};
pub use cases::{CaseKind, Cases, CASE_ENCODING_BASE, CASE_ENCODING_SHIFT, PAIR_TOLERANCE};
pub use entry::{
    entries_at_point, entry, entry_at_point, tanh_sinh_unit, CaseRef, EntryQuadrature,
};
pub use fallback::{
    FallbackDescriptors, FallbackResolution, FallbackSlot, LOOKUP_EMPTY, RESOLUTION_NEGATIVE,
};
pub use kernels::{bessel_k0, bessel_k1, BaseKernel, Derivative, Kernel};
pub use list1::{
    evaluate_list1, evaluate_list1_with_threads, level_scalings, LevelScaling, List1Boxes,
    List1Pairs, List1Tables,
};
pub use list1_device::{
    List1DevicePlan, List1Evaluator, List1Layout, List1Payload, List1ReducedTables,
    List1UploadBytes, DEFAULT_TARGET_BATCH_SIZE, MAX_TARGET_BATCH_SIZE,
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
