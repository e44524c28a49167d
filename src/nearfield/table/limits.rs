//! What a near-field computation accepts before it starts: the size of a
//! table (so that a build that could never finish, or never fit, is
//! refused up front with the size it needs) and the ranges of the box
//! extent, Yukawa's `λ·L`, a directional derivative's components and a free
//! target point inside which every intermediate of the quadrature
//! ([`crate::nearfield::entry`]) stays a normal float64, so that an entry is finite
//! and as accurate as at `L = 1`.
//!
//! # Where the ranges come from
//!
//! The scheme's smallest distance to the target is `ρ_min ≥ t_min·a_min`:
//! `t_min` the smallest tanh-sinh node (`5.7e−38` at radial level 0,
//! `2.7e−23` above) and `a_min` the thinnest orthant (a case's target is at
//! least `ξ_min/2 ≥ 1.7e−4·L` from a face it lies inside, q ≤ 64; a free
//! target at least [`MIN_FACE_DISTANCE`]`·L`), so `ρ_min ≥ 5.7e−46·L`; the
//! largest is `ρ_max ≤ √3·(TARGET_REACH + 1)·L`. The intermediates with the
//! widest range are a 3D derivative's `1/ρ³`, the squares in `|r|`, the
//! orthant volumes and mode normalisers `∝ L³`, Yukawa's `λρ` (2D: `K₁ ≈
//! 1/(λρ)` must not overflow; 3D: `(1 + λρ)·e^{−λρ}` must not be `∞·0`), and
//! a directional derivative's `d·r`. With `L ∈ [1e−50, 1e50]`,
//! `λL ∈ [1e−200, 1e200]` and `|d_k| ∈ {0} ∪ [1e−50, 1e50]` all of them
//! stay within `[1e−290, 1e290]`, far from both ends of float64
//! (tests/nearfield_entries.rs evaluates every kernel at both ends of each
//! range and refuses just outside). The Lagrange basis, whose products
//! scale like `L^{q−1}`, is evaluated in units of a power of two near `L`
//! and so puts no limit of its own.
use crate::nearfield::cases::Cases;
use crate::nearfield::kernels::{BaseKernel, Derivative, Kernel};
use crate::nearfield::quadrature::MAX_QUAD_ORDER;
use crate::runtime::{Error, Result};

/// The largest table accepted, in entries: entry ids are int32 in the
/// dense symmetry maps ([`crate::nearfield::DenseOrbits`]) and u32 in the reduced
/// tables, the cache payload and the device layouts (3D: q ≤ 15).
pub const MAX_TABLE_ENTRIES: u64 = i32::MAX as u64;

/// The box extents `L` accepted by the quadrature, inclusive (module docs).
pub const EXTENT_RANGE: (f64, f64) = (1e-50, 1e50);

/// The values of Yukawa's `λ·L` accepted, inclusive (module docs).
pub const YUKAWA_LAMBDA_EXTENT_RANGE: (f64, f64) = (1e-200, 1e200);

/// The magnitudes of a directional derivative's nonzero components
/// accepted, inclusive (0 is accepted too; module docs).
pub const DIRECTION_COMPONENT_RANGE: (f64, f64) = (1e-50, 1e50);

/// How far a free target point ([`crate::nearfield::entry_at_point`]) may lie from
/// the box's centre, per component, in units of `L` (a case's targets are
/// within 2.5 L).
pub const TARGET_REACH: f64 = 1e6;

/// How close to a face, in units of `L`, a free target point may lie
/// inside the box on an axis (a case's targets keep `1.7e−4·L` at q = 64):
/// a thinner orthant puts the quadrature's nodes closer to the target than
/// float64 can square.
pub const MIN_FACE_DISTANCE: f64 = 1e-8;

/// Sizes of a table of one dimension and order, before anything is
/// computed ([`check_table_size`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSize {
    /// The dimension, 2 or 3.
    pub dim: usize,
    /// Nodes per axis.
    pub q: usize,
    /// Interaction cases (2D 33, 3D 139).
    pub n_cases: usize,
    /// `q^d`: source modes and target points per case.
    pub n_modes: usize,
    /// Full entries, `n_cases · q^{2d}`.
    pub n_entries: u64,
    /// Bytes of the dense table's values (float64).
    pub dense_bytes: u64,
}

/// `n` with thousands separators (messages name sizes people compare).
pub(in crate::nearfield) fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The size of a table of dimension `dim` (2 or 3) and order `q`
/// (`1..=MAX_QUAD_ORDER`), refused when it has more than
/// [`MAX_TABLE_ENTRIES`] entries, with the size it needs and the limit.
/// The table builders, [`crate::nearfield::DenseOrbits::build`] and the reduced
/// layouts call it first; a caller reporting sizes (`hipkern nearfield
/// stats`) calls the same.
pub fn check_table_size(dim: usize, q: usize) -> Result<TableSize> {
    if dim != 2 && dim != 3 {
        return Err(Error::InvalidInput(format!(
            "near-field table: dimension {dim}: must be 2 or 3"
        )));
    }
    if q == 0 || q > MAX_QUAD_ORDER {
        return Err(Error::InvalidInput(format!(
            "near-field table: q = {q}: must be in 1..={MAX_QUAD_ORDER}"
        )));
    }
    let n_cases = Cases::new(dim)?.len();
    let n_modes = q.pow(dim as u32);
    // q ≤ 64 and dim ≤ 3: n_cases·q^{2d} ≤ 139·2^36, no overflow in u64.
    let n_entries = n_cases as u64 * (n_modes as u64) * (n_modes as u64);
    let dense_bytes = n_entries * 8;
    if n_entries > MAX_TABLE_ENTRIES {
        let largest_q = (1..=q)
            .rev()
            .find(|&k| n_cases as u64 * (k as u64).pow(2 * dim as u32) <= MAX_TABLE_ENTRIES)
            .unwrap_or(1);
        return Err(Error::InvalidInput(format!(
            "near-field table of dimension {dim}, q = {q}: {} entries ({} bytes as float64) \
             exceed the limit of {} entries (entry ids are 32-bit); dimension {dim} allows \
             q ≤ {largest_q}",
            grouped(n_entries),
            grouped(dense_bytes),
            grouped(MAX_TABLE_ENTRIES)
        )));
    }
    Ok(TableSize {
        dim,
        q,
        n_cases,
        n_modes,
        n_entries,
        dense_bytes,
    })
}

/// Refuses a kernel and box extent whose entries would not be finite or
/// not accurate in float64 (module docs): `L` finite and in
/// [`EXTENT_RANGE`], Yukawa's `λ·L` in [`YUKAWA_LAMBDA_EXTENT_RANGE`], a
/// directional derivative's nonzero components in
/// [`DIRECTION_COMPONENT_RANGE`]. Every entry and table computation calls
/// it before any quadrature.
pub fn check_kernel_and_extent(kernel: &Kernel, extent: f64) -> Result<()> {
    let (lo, hi) = EXTENT_RANGE;
    if !(extent.is_finite() && extent > 0.0) {
        return Err(Error::InvalidInput(format!(
            "box extent L = {extent}: must be finite and positive, in [{lo:e}, {hi:e}]"
        )));
    }
    if !(lo..=hi).contains(&extent) {
        return Err(Error::InvalidInput(format!(
            "box extent L = {extent:e} is outside [{lo:e}, {hi:e}], the extents whose entries \
             float64 represents (scale the problem's units)"
        )));
    }
    if let BaseKernel::Yukawa { lambda } = kernel.base() {
        let (lo, hi) = YUKAWA_LAMBDA_EXTENT_RANGE;
        let x = lambda * extent;
        if !(lo..=hi).contains(&x) {
            return Err(Error::InvalidInput(format!(
                "Yukawa λ = {lambda:e} with box extent L = {extent:e}: λ·L = {x:e} is outside \
                 [{lo:e}, {hi:e}], where K₀/K₁ and e^(−λr) are representable at every \
                 quadrature node"
            )));
        }
    }
    if let Some(Derivative::DirectionalSource(v)) = kernel.derivative() {
        let (lo, hi) = DIRECTION_COMPONENT_RANGE;
        if let Some((k, x)) = v
            .iter()
            .enumerate()
            .find(|(_, x)| **x != 0.0 && !(lo..=hi).contains(&x.abs()))
        {
            return Err(Error::InvalidInput(format!(
                "derivative direction component {k} = {x:e}: each component must be 0 or of \
                 magnitude in [{lo:e}, {hi:e}] (the entries are linear in the direction: scale \
                 them afterwards)"
            )));
        }
    }
    Ok(())
}

/// Refuses a free target point (finite components checked by the caller)
/// farther than [`TARGET_REACH`]`·L` from the box's centre on an axis, or
/// inside the box closer than [`MIN_FACE_DISTANCE`]`·L` to a face on an
/// axis (on the face itself is accepted).
pub(in crate::nearfield) fn check_target_point(x: &[f64], extent: f64) -> Result<()> {
    let half = 0.5 * extent;
    for (k, &c) in x.iter().enumerate() {
        if (c - half).abs() > TARGET_REACH * extent {
            return Err(Error::InvalidInput(format!(
                "near-field entry: target point component {k} = {c:e} is more than \
                 {TARGET_REACH:e}·L from the box's centre {half:e} (L = {extent:e})"
            )));
        }
        let face = c.min(extent - c);
        if face > 0.0 && face < MIN_FACE_DISTANCE * extent {
            return Err(Error::InvalidInput(format!(
                "near-field entry: target point component {k} = {c:e} lies inside the box \
                 {face:e} from a face: closer than {MIN_FACE_DISTANCE:e}·L (L = {extent:e}) \
                 puts quadrature nodes nearer the target than float64 resolves; move it onto \
                 the face or farther in"
            )));
        }
    }
    Ok(())
}

/// Refuses computed values that are not finite (a safety net behind the
/// range checks): how many of them and the first, by `name(index)`.
pub(in crate::nearfield) fn check_finite(
    what: &str,
    values: &[f64],
    name: &dyn Fn(usize) -> String,
) -> Result<()> {
    let mut bad = values.iter().enumerate().filter(|(_, v)| !v.is_finite());
    if let Some((i, v)) = bad.next() {
        let n = 1 + bad.count();
        return Err(Error::InvalidInput(format!(
            "{what}: {} of {} computed values are not finite, the first {} = {v}; the inputs \
             are outside what float64 represents",
            grouped(n as u64),
            grouped(values.len() as u64),
            name(i)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_the_limit() {
        let s = check_table_size(3, 3).unwrap();
        assert_eq!((s.n_cases, s.n_modes, s.n_entries), (139, 27, 101_331));
        assert_eq!(s.dense_bytes, 810_648);
        assert!(check_table_size(3, 15).is_ok());
        let e = check_table_size(3, 16).unwrap_err().to_string();
        assert!(e.contains("2,332,033,024 entries"), "{e}");
        assert!(e.contains("2,147,483,647"), "{e}");
        assert!(e.contains("q ≤ 15"), "{e}");
        let e = check_table_size(3, 64).unwrap_err().to_string();
        assert!(e.contains("76,4"), "{e}");
        assert_eq!(check_table_size(2, 64).unwrap().n_entries, 553_648_128);
        assert!(check_table_size(1, 2).is_err());
        assert!(check_table_size(2, 0).is_err());
        assert!(check_table_size(2, 65).is_err());
    }

    #[test]
    fn grouping() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1000), "1,000");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn finite_check_names_count_and_first() {
        let name = |i: usize| format!("entry {i}");
        assert!(check_finite("t", &[1.0, 2.0], &name).is_ok());
        let e = check_finite("t", &[1.0, f64::NAN, f64::INFINITY], &name)
            .unwrap_err()
            .to_string();
        assert!(e.contains("2 of 3"), "{e}");
        assert!(e.contains("entry 1 = NaN"), "{e}");
    }
}
