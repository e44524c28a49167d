//! The interaction cases of a 2:1-balanced tree, their codes and ids, the
//! mapping from a (target box, source box) pair to its case, and the target
//! points of a case. Conventions and their sources: the module docs of
//! [`crate::nearfield`].

use crate::nearfield::quadrature::q_points;
use crate::runtime::{Error, Result};

/// Base of the case code: the integers −6..=6 (volumential's `base`, the
/// count of integers from the smallest to the largest case component).
pub const CASE_ENCODING_BASE: usize = 13;

/// Added to each case component before encoding (volumential's `shift`,
/// minus the smallest component).
pub const CASE_ENCODING_SHIFT: i32 = 6;

/// Tolerance of [`Cases::case_of_pair`], in units of the case vector, i.e.
/// of `h_s/4` (a length tolerance of `PAIR_TOLERANCE · h_s / 4`).
///
/// In exact arithmetic a pair of a 2:1 tree gives integer components, gaps
/// of exactly 0 between touching boxes and size ratios of exactly ½, 1 or 2.
/// Box centres of a real tree are dyadic offsets from a root whose corner
/// and extent need not be dyadic, so each centre carries a rounding error of
/// about `ε·|x|` (ε = 2.2e−16, `|x|` the coordinate's magnitude); measured
/// in `h_s/4` that is `4ε·|x|/h_s`, below 1e−6 as long as `|x|/h_s < 10^9`
/// (about 30 levels below a root at the origin's scale). Genuinely wrong
/// pairs (a quarter-box misalignment, a gap, an overlap) differ by at least
/// 1 in these units (0.5 for a misaligned size ratio), so 1e−6 separates the
/// two by six orders of magnitude. volumential accepts anything that rounds
/// to a valid code (`+ 1e−10` bias, then `+ 0.5` and truncation) and
/// reads −1 otherwise; this check is stricter on purpose.
pub const PAIR_TOLERANCE: f64 = 1e-6;

/// The three kinds of case, by the target box's size relative to the
/// source box's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CaseKind {
    /// Same size: the box itself (`c = 0`) or a neighbour (`max|c_k| = 4`,
    /// components in {−4, 0, 4}).
    SameSize,
    /// The target is half the source's size (`max|c_k| = 3`, components in
    /// {±1, ±3}).
    TargetSmaller,
    /// The target is twice the source's size (`max|c_k| = 6`, components in
    /// {±2, ±6}).
    TargetLarger,
}

impl CaseKind {
    /// `h_t / h_s`: 1, ½ or 2. Also the `size` factor of the target points
    /// (`(max|c_k| − 2)/2`, and 1 for `c = 0`).
    pub fn target_size_ratio(self) -> f64 {
        match self {
            CaseKind::SameSize => 1.0,
            CaseKind::TargetSmaller => 0.5,
            CaseKind::TargetLarger => 2.0,
        }
    }

    /// The kind of a case vector, or `None` if it is no case.
    fn of_vector(v: &[i32]) -> Option<CaseKind> {
        let max = v.iter().map(|c| c.abs()).max()?;
        let allowed: &[i32] = match max {
            0 => return Some(CaseKind::SameSize),
            4 => &[0, 4],
            3 => &[1, 3],
            6 => &[2, 6],
            _ => return None,
        };
        if v.iter().all(|c| allowed.contains(&c.abs())) {
            Some(match max {
                4 => CaseKind::SameSize,
                3 => CaseKind::TargetSmaller,
                _ => CaseKind::TargetLarger,
            })
        } else {
            None
        }
    }
}

/// The interaction cases of one dimension (2 or 3), in volumential's order.
#[derive(Clone, Debug)]
pub struct Cases {
    dim: usize,
    /// `len × dim`, row `id` the vector of case `id`.
    vectors: Vec<i32>,
    codes: Vec<usize>,
    kinds: Vec<CaseKind>,
    /// `13^dim` entries: code → case id, −1 where the code is no case.
    lookup: Vec<i32>,
}

/// The case vector of a pair in units of `h_s/4`, the largest gap per
/// axis between the boxes (`|c_k| − 2(1 + ratio)`, the half-sum of their
/// sides), and whether they are one box: the arithmetic that
/// [`Cases::case_of_pair`] and [`Cases::aligned_case`] share. On the stack
/// (`d ≤ 3`): the accepted path allocates nothing.
#[inline(always)]
fn pair_offsets(
    d: usize,
    center_t: &[f64],
    center_s: &[f64],
    h_s: f64,
    ratio: f64,
) -> ([f64; 3], f64, bool) {
    let mut raw = [0.0f64; 3];
    for k in 0..d {
        raw[k] = 4.0 * (center_t[k] - center_s[k]) / h_s;
    }
    let half_sum = 2.0 * (1.0 + ratio);
    let gap = raw[..d]
        .iter()
        .map(|c| c.abs() - half_sum)
        .fold(f64::NEG_INFINITY, f64::max);
    let same_box = ratio == 1.0 && raw[..d].iter().all(|c| c.abs() <= PAIR_TOLERANCE);
    (raw, gap, same_box)
}

impl Cases {
    /// All cases of dimension `dim` (2: 33 cases, 3: 139), sorted by code.
    ///
    /// Enumerates every vector in `{−6..6}^dim` in increasing code order and
    /// keeps those that are a case ([`CaseKind`]).
    pub fn new(dim: usize) -> Result<Cases> {
        if dim != 2 && dim != 3 {
            return Err(Error::InvalidInput(format!(
                "near-field cases: dimension {dim} is not supported (2 or 3)"
            )));
        }
        let n_codes = CASE_ENCODING_BASE.pow(dim as u32);
        let mut cases = Cases {
            dim,
            vectors: Vec::new(),
            codes: Vec::new(),
            kinds: Vec::new(),
            lookup: vec![-1; n_codes],
        };
        let mut v = vec![0i32; dim];
        for code in 0..n_codes {
            // Decode: last component least significant.
            let mut r = code;
            for k in (0..dim).rev() {
                v[k] = (r % CASE_ENCODING_BASE) as i32 - CASE_ENCODING_SHIFT;
                r /= CASE_ENCODING_BASE;
            }
            if let Some(kind) = CaseKind::of_vector(&v) {
                cases.lookup[code] = cases.codes.len() as i32;
                cases.vectors.extend_from_slice(&v);
                cases.codes.push(code);
                cases.kinds.push(kind);
            }
        }
        Ok(cases)
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The number of cases (33 in 2D, 139 in 3D).
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// Never true (kept for the `len` convention).
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// The case vector of case `id` (`dim` components).
    ///
    /// # Panics
    /// If `id >= self.len()`.
    pub fn vector(&self, id: usize) -> &[i32] {
        assert!(
            id < self.len(),
            "case id {id} out of range 0..{}",
            self.len()
        );
        &self.vectors[id * self.dim..(id + 1) * self.dim]
    }

    /// The code of case `id`: Horner of `c_k + 6` in base 13, first
    /// component most significant.
    ///
    /// # Panics
    /// If `id >= self.len()`.
    pub fn code(&self, id: usize) -> usize {
        assert!(
            id < self.len(),
            "case id {id} out of range 0..{}",
            self.len()
        );
        self.codes[id]
    }

    /// The kind of case `id`.
    ///
    /// # Panics
    /// If `id >= self.len()`.
    pub fn kind(&self, id: usize) -> CaseKind {
        assert!(
            id < self.len(),
            "case id {id} out of range 0..{}",
            self.len()
        );
        self.kinds[id]
    }

    /// The code of any vector with `dim` components in −6..=6 (a case or
    /// not); `None` for a wrong length or a component out of range.
    pub fn encode(&self, v: &[i32]) -> Option<usize> {
        if v.len() != self.dim {
            return None;
        }
        let mut code = 0usize;
        for &c in v {
            if !(-CASE_ENCODING_SHIFT..=CASE_ENCODING_SHIFT).contains(&c) {
                return None;
            }
            code = code * CASE_ENCODING_BASE + (c + CASE_ENCODING_SHIFT) as usize;
        }
        Some(code)
    }

    /// The id of the case with vector `v`, or `None` if `v` is no case.
    pub fn id_of_vector(&self, v: &[i32]) -> Option<usize> {
        let code = self.encode(v)?;
        usize::try_from(self.lookup[code]).ok()
    }

    /// The id of the case with code `code`, or `None`.
    pub fn id_of_code(&self, code: usize) -> Option<usize> {
        usize::try_from(*self.lookup.get(code)?).ok()
    }

    /// volumential's `case_indices`: the lookup array of length `13^dim`
    /// from code to case id, −1 where a code is no case (2D: 169 entries,
    /// 3D: 2197). volumential stores it as a numpy int (int64) array; the
    /// values are the same.
    pub fn case_indices(&self) -> &[i32] {
        &self.lookup
    }

    /// The id of the self case (`c = 0`).
    pub fn self_case(&self) -> usize {
        self.id_of_vector(&vec![0; self.dim])
            .expect("the zero vector is a case")
    }

    /// Entries of a full table of order `q`: `len · q^{2·dim}`.
    pub fn n_entries(&self, q: usize) -> usize {
        self.len() * q.pow(2 * self.dim as u32)
    }

    /// The entry id `case·q^{2d} + s·q^d + t` (`s` the source mode, `t` the
    /// target point), checked.
    pub fn entry_id(&self, case: usize, s: usize, t: usize, q: usize) -> Result<usize> {
        let nq = q.pow(self.dim as u32);
        if q == 0 || case >= self.len() || s >= nq || t >= nq {
            return Err(Error::InvalidInput(format!(
                "entry (case {case}, source mode {s}, target point {t}) with q = {q}: \
                 need case < {}, modes and points < q^{} = {nq}, q ≥ 1",
                self.len(),
                self.dim
            )));
        }
        Ok((case * nq + s) * nq + t)
    }

    /// The case of a (target box, source box) pair of a 2:1-balanced tree:
    /// `c = 4·(center_t − center_s)/h_s` looked up as volumential's List 1
    /// does, after checking that the pair is one of a 2:1 tree's List 1
    /// pairs.
    ///
    /// Centres have `dim` components; `h_t`, `h_s` are the boxes' sides.
    /// Errors (`InvalidInput`, naming the problem): wrong lengths, values
    /// that are not finite or not positive; sizes whose level difference is
    /// more than one, or not a power of two apart; boxes that do not touch
    /// (the gap is named); boxes that overlap (a different box inside or
    /// across the other); touching boxes that are not aligned as two boxes
    /// of one tree would be (e.g. shifted by a quarter box). Float
    /// comparisons use [`PAIR_TOLERANCE`] (units of `h_s/4`).
    pub fn case_of_pair(
        &self,
        center_t: &[f64],
        h_t: f64,
        center_s: &[f64],
        h_s: f64,
    ) -> Result<usize> {
        let d = self.dim;
        let bad = |s: String| Err(Error::InvalidInput(format!("list 1 pair: {s}")));
        if center_t.len() != d || center_s.len() != d {
            return bad(format!(
                "box centres have {} and {} components, dimension is {d}",
                center_t.len(),
                center_s.len()
            ));
        }
        if !(h_t.is_finite() && h_t > 0.0 && h_s.is_finite() && h_s > 0.0) {
            return bad(format!(
                "box sizes must be finite and positive (target {h_t}, source {h_s})"
            ));
        }
        if let Some(x) = center_t.iter().chain(center_s).find(|x| !x.is_finite()) {
            return bad(format!("box centre component {x} is not finite"));
        }

        // Size ratio: 1/2, 1 or 2 to within the tolerance, relative.
        let ratio = h_t / h_s;
        let ratio = match [0.5, 1.0, 2.0]
            .into_iter()
            .find(|r| (ratio / r - 1.0).abs() <= PAIR_TOLERANCE)
        {
            Some(r) => r,
            None => {
                let l = ratio.log2();
                let k = l.round();
                return if (l - k).abs() <= PAIR_TOLERANCE {
                    bad(format!(
                        "level difference {} is more than one (target size {h_t}, \
                         source size {h_s}); a 2:1-balanced tree has none",
                        k.abs()
                    ))
                } else {
                    bad(format!(
                        "box sizes are not a power of two apart (target {h_t}, \
                         source {h_s}, ratio {ratio})"
                    ))
                };
            }
        };

        let (raw_d, gap, same_box) = pair_offsets(d, center_t, center_s, h_s, ratio);
        let raw = &raw_d[..d];
        if !same_box {
            if gap > PAIR_TOLERANCE {
                return bad(format!(
                    "the boxes do not touch (target centre {center_t:?} size {h_t}, \
                     source centre {center_s:?} size {h_s}: gap {} along the worst axis)",
                    gap * h_s / 4.0
                ));
            }
            if gap < -PAIR_TOLERANCE {
                return bad(format!(
                    "the boxes overlap (target centre {center_t:?} size {h_t}, \
                     source centre {center_s:?} size {h_s}: interiors intersect by at \
                     least {} along every axis{})",
                    -gap * h_s / 4.0,
                    if ratio == 1.0 {
                        ""
                    } else {
                        "; one box may lie inside the other"
                    }
                ));
            }
        }

        let mut v_d = [0i32; 3];
        let v = &mut v_d[..d];
        for k in 0..d {
            let r = raw[k].round();
            if (raw[k] - r).abs() > PAIR_TOLERANCE {
                return bad(format!(
                    "the boxes touch but are not aligned as boxes of one tree \
                     (case vector component {k} is {}, not an integer)",
                    raw[k]
                ));
            }
            v[k] = r as i32;
        }
        self.id_of_vector(v).ok_or_else(|| {
            Error::InvalidInput(format!(
                "list 1 pair: the boxes touch but are not aligned as boxes of one \
                 tree (case vector {v:?} is no interaction case)"
            ))
        })
    }

    /// [`Self::case_of_pair`]'s accepted path alone, for a plan's every
    /// pair: `Some(case)` where it returns `Ok(case)` and the sizes are
    /// exactly 1/2, 1 or 2 apart (boxes of one tree: sides are the root's
    /// divided by powers of two); `None` otherwise, where the caller asks
    /// `case_of_pair` for the verdict and its message. The same arithmetic
    /// ([`pair_offsets`]) without the checks the caller made once per box
    /// (lengths, finite centres and sides): 830,584 pairs at 32,768 boxes.
    /// The work is done with the dimension as a constant, so that the
    /// loops unroll (with the offsets inlined: 2.1× faster than a run-time
    /// one).
    #[inline(always)]
    pub(crate) fn aligned_case(
        &self,
        center_t: &[f64],
        h_t: f64,
        center_s: &[f64],
        h_s: f64,
    ) -> Option<usize> {
        if self.dim == 3 {
            self.aligned_case_in::<3>(center_t, h_t, center_s, h_s)
        } else {
            self.aligned_case_in::<2>(center_t, h_t, center_s, h_s)
        }
    }

    /// [`Self::aligned_case`] in dimension `D` (`self.dim`).
    #[inline(always)]
    fn aligned_case_in<const D: usize>(
        &self,
        center_t: &[f64],
        h_t: f64,
        center_s: &[f64],
        h_s: f64,
    ) -> Option<usize> {
        debug_assert_eq!(D, self.dim);
        let ratio = h_t / h_s;
        if !(ratio == 0.5 || ratio == 1.0 || ratio == 2.0) {
            return None;
        }
        let (raw, gap, same_box) = pair_offsets(D, center_t, center_s, h_s, ratio);
        if !same_box && gap.abs() > PAIR_TOLERANCE {
            return None;
        }
        // |x| ≤ 6 + PAIR_TOLERANCE here (the gap), where adding and
        // subtracting 1.5·2^52 rounds to the nearest integer: the same
        // integer as `round` wherever the tolerance below accepts (they
        // differ only at halves, which it refuses), without `round`'s
        // libm call (a third of this function's time on x86-64).
        // (The range of each component is `id_of_vector`'s check.)
        const ROUNDER: f64 = 6_755_399_441_055_744.0;
        let mut v = [0i32; 3];
        for (v, &x) in v.iter_mut().zip(&raw[..D]) {
            let r = (x + ROUNDER) - ROUNDER;
            if (x - r).abs() > PAIR_TOLERANCE || r.is_nan() {
                return None;
            }
            *v = r as i32;
        }
        self.id_of_vector(&v[..D])
    }

    /// The target points of case `case` for a source box `[0, L]^dim` with
    /// `q` nodes per axis: `q^dim` points × `dim`, row-major, in the order
    /// of [`q_points`]:
    ///
    /// `x_t = L/2 + (c/4)·L + size·(ξ_t − L/2)`, `size = 1` for `c = 0`,
    /// else `(max|c_k| − 2)/2`,
    ///
    /// evaluated in that order, as volumential's `find_target_point` and
    /// `_get_case_target_points` do. The self case returns the source nodes
    /// themselves (the formula reproduces them to within one rounding).
    pub fn target_points(&self, case: usize, q: usize, l: f64) -> Result<Vec<f64>> {
        if case >= self.len() {
            return Err(Error::InvalidInput(format!(
                "case id {case} out of range 0..{}",
                self.len()
            )));
        }
        let mut pts = q_points(q, l, self.dim)?;
        let c = self.vector(case);
        if c.iter().all(|&x| x == 0) {
            return Ok(pts);
        }
        let size = f64::from(c.iter().map(|x| x.abs()).max().unwrap_or(0) - 2) / 2.0;
        let half = 0.5 * l;
        for p in pts.chunks_exact_mut(self.dim) {
            for (x, &ck) in p.iter_mut().zip(c) {
                let centre = half + f64::from(ck) / 4.0 * l;
                *x = centre + size * (*x - half);
            }
        }
        Ok(pts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// `aligned_case` gives `case_of_pair`'s verdict on boxes of one tree
    /// (sides a root's over powers of two), accepted or not: case vectors
    /// on and off the lattice, nudged to either side of the tolerance,
    /// level differences up to two, a root extent that is no power of two.
    #[test]
    fn the_accepted_path_agrees_with_case_of_pair() {
        let mut rng = SplitMix64::new(0x616c_6967_6e65);
        let nudges = [0.0, 0.4e-6, -0.4e-6, 0.9e-6, -1.1e-6, 3e-6, 0.25, 0.5];
        for dim in [2, 3] {
            let cases = Cases::new(dim).unwrap();
            let mut accepted = 0;
            for _ in 0..200_000 {
                let root = [1.0, 0.7, 3.0][rng.below(3)];
                let lt = 2 + rng.below(6) as i32;
                let ls = lt + rng.below(5) as i32 - 2;
                let (h_t, h_s) = (root / f64::from(1 << lt), root / f64::from(1 << ls));
                let ct: Vec<f64> = (0..dim).map(|_| rng.uniform_pm1() * root).collect();
                // Half the time a case's own vector (accepted at its size
                // ratio), else any vector.
                let case = cases.vector(rng.below(cases.len())).to_vec();
                let own = rng.below(2) == 0;
                let cs: Vec<f64> = (0..dim)
                    .map(|k| {
                        let c = ct[k];
                        let v = if own {
                            f64::from(case[k])
                        } else {
                            rng.below(15) as f64 - 7.0
                        };
                        let nudge = if rng.below(3) == 0 {
                            nudges[rng.below(nudges.len())]
                        } else {
                            0.0
                        };
                        c - (v + nudge) * h_s / 4.0
                    })
                    .collect();
                let fast = cases.aligned_case(&ct, h_t, &cs, h_s);
                let slow = cases.case_of_pair(&ct, h_t, &cs, h_s).ok();
                assert_eq!(fast, slow, "{dim}D: {ct:?} {h_t} {cs:?} {h_s}");
                accepted += usize::from(fast.is_some());
            }
            assert!(accepted > 10_000, "{dim}D: only {accepted} pairs accepted");
        }
    }
}
