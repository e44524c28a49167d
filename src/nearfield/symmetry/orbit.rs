//! The arithmetic ORBIT addressing of a symmetry-reduced table (seed
//! `nearfield_symmetry.txt`, "Online reconstruction modes"): a full entry
//! `(case, s, t)` is mapped to a compact row and a sign with a few bytes of
//! per-case descriptors, no full-entry map and no hash.
//!
//! # Canonical form
//!
//! 1. *Case.* Each case `c` carries one allowed signed permutation `g_c`
//!    (`case_axis_perm`, `case_axis_sign`: `(g_c c)_k = sign_k ·
//!    c_{perm_k}`) that maps it to its case orbit's canonical vector `c*`:
//!    the absolute values, sorted descending (largest first, ties by axis
//!    index) over the axes the group may permute; a derivative axis `a`
//!    stays in place with `|c_a|`. `case_orbit_ranks[c]` numbers the
//!    canonical vectors in case-id order.
//! 2. *Modes.* `s` and `t` are moved by the same `g_c`; per axis `k` the
//!    pair `(s_k, t_k)` is coded `p_k = s_k·q + t_k`.
//! 3. *Zero-axis flips.* Where `c*_k = 0` the stabiliser may flip axis `k`
//!    (`(s_k, t_k) → (q−1−s_k, q−1−t_k)`, i.e. `p → q²−1−p`); the smaller
//!    code is kept. Flipping a derivative axis multiplies the sign by −1;
//!    if its pair is its own flip (`p = (q²−1)/2`, odd `q`, both nodes
//!    centred) the entry is zero by symmetry (sign 0).
//! 4. *Equal axes.* Axes of equal `c*_k` (a *group*, `case_axis_group`)
//!    may be permuted: their codes are sorted ascending by the fixed
//!    compare-exchange network (0,2), (0,1), (1,2), each exchange applied
//!    only between axes of one group.
//! 5. *Compact rank.* Each group's sorted codes `x_1 ≤ … ≤ x_m` over an
//!    alphabet of `A` codes (`q²`, or `⌈q²/2⌉` for flippable axes) have the
//!    multiset rank `Σ_i C(x_i + i − 1, i)` in `0..C(A+m−1, m)`; the ranks of
//!    the groups (in axis order of their first axis) are combined in mixed
//!    radix. The row is `case_value_offsets[case_orbit_ranks[c]] + rank`:
//!    each case orbit is one contiguous value segment.
//!
//! The sign of an entry is `Π_k sign_k^{axis_sign_power_k}` of `g_c` times
//! the derivative-axis flip of step 3: `T[c, s, t] = sign · row value`.
//!
//! # Encoding of `case_axis_group`
//!
//! Per case and axis (in the canonical frame): the index of the group's
//! first axis, plus [`GROUP_FLIPPABLE`] when `c*_k = 0`, plus
//! [`GROUP_DERIVATIVE`] on a derivative axis (its own group).
//!
//! Kernels modelled: the radial ones (full group) and axis target/source
//! derivatives (the axis fixed, odd order). Directional source derivatives
//! go through the descriptor fallback (an error here).
use crate::nearfield::cases::Cases;
use crate::nearfield::kernels::{Derivative, Kernel};
use crate::nearfield::symmetry::SignedPermutation;
use crate::runtime::{Error, Result};

/// Bit of `case_axis_group`: the axis may be flipped (`c*_k = 0`).
pub const GROUP_FLIPPABLE: u8 = 0x80;
/// Bit of `case_axis_group`: the derivative axis.
pub const GROUP_DERIVATIVE: u8 = 0x40;

/// The compare-exchange network over axis positions (3 axes; in 2D only
/// (0, 1) applies).
const NETWORK: [(usize, usize); 3] = [(0, 2), (0, 1), (1, 2)];

/// The arithmetic ORBIT descriptors of one kernel, dimension and `q`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrbitDescriptors {
    dim: usize,
    q: usize,
    /// Case orbit rank per case (`n_cases`).
    pub case_orbit_ranks: Vec<u16>,
    /// `g_c`'s permutation, `n_cases × dim`.
    pub case_axis_perm: Vec<u8>,
    /// `g_c`'s signs, `n_cases × dim`.
    pub case_axis_sign: Vec<i8>,
    /// Group label per case and axis (module docs), `n_cases × dim`.
    pub case_axis_group: Vec<u8>,
    /// First row of each case orbit's segment, `n_case_orbits + 1` (the
    /// last is the number of rows).
    pub case_value_offsets: Vec<u32>,
    /// Derivative order parity per axis (`dim`; 0 for scalar kernels).
    pub axis_sign_power: Vec<u8>,
    /// The canonical case id of each case orbit (host side only).
    pub canonical_cases: Vec<usize>,
}

/// Where a full entry lives in the compact layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrbitSlot {
    /// Compact row.
    pub row: usize,
    /// `T[entry] = sign · value[row]`; 0 when the entry is zero by symmetry.
    pub sign: i8,
}

fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    let mut r = 1usize;
    for i in 0..k {
        r = r * (n - i) / (i + 1);
    }
    r
}

impl OrbitDescriptors {
    /// The descriptors for `kernel` at `q` nodes per axis; an error for
    /// kernels the arithmetic path does not model (directional source
    /// derivatives: use the descriptor fallback).
    pub fn build(kernel: &Kernel, q: usize) -> Result<OrbitDescriptors> {
        let d = kernel.dim();
        if !(d == 2 || d == 3) {
            return Err(Error::InvalidInput(format!(
                "ORBIT descriptors: dimension {d}: must be 2 or 3"
            )));
        }
        if q == 0 || q > crate::nearfield::MAX_QUAD_ORDER {
            return Err(Error::InvalidInput(format!(
                "ORBIT descriptors: q = {q}: must be in 1..={}",
                crate::nearfield::MAX_QUAD_ORDER
            )));
        }
        let fixed_axis = match kernel.derivative() {
            None => None,
            Some(Derivative::AxisTarget(a)) | Some(Derivative::AxisSource(a)) => Some(*a),
            Some(Derivative::DirectionalSource(v)) => {
                return Err(Error::InvalidInput(format!(
                    "ORBIT descriptors: the directional source derivative along {v:?} is not \
                     modelled by the arithmetic path; use the descriptor fallback"
                )))
            }
        };
        let cases = Cases::new(d)?;
        let mut axis_sign_power = vec![0u8; d];
        if let Some(a) = fixed_axis {
            axis_sign_power[a] = 1;
        }
        let n = cases.len();
        let mut perm = Vec::with_capacity(n * d);
        let mut sign = Vec::with_capacity(n * d);
        let mut canon_of = Vec::with_capacity(n);
        for c in 0..n {
            let v = cases.vector(c);
            // Free positions get the free axes sorted by |c| descending.
            let free: Vec<usize> = (0..d).filter(|&k| Some(k) != fixed_axis).collect();
            let mut sorted = free.clone();
            sorted.sort_by_key(|&k| std::cmp::Reverse(v[k].abs()));
            let mut p = [0u8; 3];
            for (pos, &ax) in free.iter().zip(&sorted) {
                p[*pos] = ax as u8;
            }
            if let Some(a) = fixed_axis {
                p[a] = a as u8;
            }
            let mut cv = [0i32; 3];
            for k in 0..d {
                let src = v[usize::from(p[k])];
                sign.push(if src < 0 { -1i8 } else { 1 });
                perm.push(p[k]);
                cv[k] = src.abs();
            }
            canon_of.push(
                cases
                    .id_of_vector(&cv[..d])
                    .expect("the cases are closed under signed permutations"),
            );
        }
        let mut canonical_cases = canon_of.clone();
        canonical_cases.sort_unstable();
        canonical_cases.dedup();
        let case_orbit_ranks: Vec<u16> = canon_of
            .iter()
            .map(|c| canonical_cases.binary_search(c).unwrap() as u16)
            .collect();
        let mut groups = Vec::with_capacity(n * d);
        for &cc in &canon_of {
            groups.extend(Self::group_labels(cases.vector(cc), fixed_axis));
        }
        let mut desc = OrbitDescriptors {
            dim: d,
            q,
            case_orbit_ranks,
            case_axis_perm: perm,
            case_axis_sign: sign,
            case_axis_group: groups,
            case_value_offsets: Vec::new(),
            axis_sign_power,
            canonical_cases: canonical_cases.clone(),
        };
        let mut offsets = vec![0u32];
        for &cc in &canonical_cases {
            let c_any = canon_of.iter().position(|&x| x == cc).unwrap();
            let size = desc.segment_size(c_any);
            offsets.push(offsets.last().unwrap() + size as u32);
        }
        desc.case_value_offsets = offsets;
        Ok(desc)
    }

    /// Group labels of a canonical case vector (module docs).
    fn group_labels(cv: &[i32], fixed_axis: Option<usize>) -> Vec<u8> {
        let d = cv.len();
        (0..d)
            .map(|k| {
                let flip = if cv[k] == 0 { GROUP_FLIPPABLE } else { 0 };
                if Some(k) == fixed_axis {
                    return k as u8 | GROUP_DERIVATIVE | flip;
                }
                let first = (0..d)
                    .find(|&j| Some(j) != fixed_axis && cv[j] == cv[k])
                    .unwrap();
                first as u8 | flip
            })
            .collect()
    }

    /// Alphabet size of an axis: `q²` codes, or `⌈q²/2⌉` if flippable.
    fn alphabet(&self, label: u8) -> usize {
        let q2 = self.q * self.q;
        if label & GROUP_FLIPPABLE != 0 {
            q2.div_ceil(2)
        } else {
            q2
        }
    }

    /// The groups of case `c`: (label, member axes), in order of first axis.
    fn groups(&self, c: usize) -> Vec<(u8, Vec<usize>)> {
        let d = self.dim;
        let labels = &self.case_axis_group[c * d..(c + 1) * d];
        let mut out: Vec<(u8, Vec<usize>)> = Vec::new();
        for (k, &l) in labels.iter().enumerate() {
            match out.iter_mut().find(|g| g.0 == l) {
                Some(g) => g.1.push(k),
                None => out.push((l, vec![k])),
            }
        }
        out
    }

    fn segment_size(&self, c: usize) -> usize {
        self.groups(c)
            .iter()
            .map(|(l, m)| binomial(self.alphabet(*l) + m.len() - 1, m.len()))
            .product()
    }

    /// Number of compact rows (representatives).
    pub fn n_rows(&self) -> usize {
        *self.case_value_offsets.last().unwrap() as usize
    }

    /// Number of case orbits.
    pub fn n_case_orbits(&self) -> usize {
        self.canonical_cases.len()
    }

    /// Bytes the arithmetic path sends to a device: `case_orbit_ranks`
    /// (u16), `case_axis_perm` (u8), `case_axis_sign` (i8),
    /// `case_axis_group` (u8), `case_value_offsets` (u32) and
    /// `axis_sign_power` (u8).
    pub fn metadata_bytes(&self) -> usize {
        2 * self.case_orbit_ranks.len()
            + self.case_axis_perm.len()
            + self.case_axis_sign.len()
            + self.case_axis_group.len()
            + 4 * self.case_value_offsets.len()
            + self.axis_sign_power.len()
    }

    /// The slot of full entry `(case, s, t)` (module docs). Panics on ids
    /// out of range (callers validate).
    pub fn slot(&self, case: usize, s: usize, t: usize) -> OrbitSlot {
        let (d, q) = (self.dim, self.q);
        let q2 = q * q;
        let g = SignedPermutation {
            perm: {
                let mut p = [0u8; 3];
                p[..d].copy_from_slice(&self.case_axis_perm[case * d..(case + 1) * d]);
                p
            },
            sign: {
                let mut sg = [1i8; 3];
                sg[..d].copy_from_slice(&self.case_axis_sign[case * d..(case + 1) * d]);
                sg
            },
        };
        let (s2, t2) = (g.apply_node(s, q, d), g.apply_node(t, q, d));
        let mut sign = 1i8;
        for k in 0..d {
            if self.axis_sign_power[k] & 1 == 1 {
                sign *= g.sign[k];
            }
        }
        let labels = &self.case_axis_group[case * d..(case + 1) * d];
        let mut code = [0usize; 3];
        for k in 0..d {
            let sk = (s2 / q.pow((d - 1 - k) as u32)) % q;
            let tk = (t2 / q.pow((d - 1 - k) as u32)) % q;
            let mut p = sk * q + tk;
            if labels[k] & GROUP_FLIPPABLE != 0 {
                let flipped = q2 - 1 - p;
                if labels[k] & GROUP_DERIVATIVE != 0 && flipped == p {
                    sign = 0;
                }
                if flipped < p {
                    p = flipped;
                    if labels[k] & GROUP_DERIVATIVE != 0 {
                        sign = -sign;
                    }
                }
            }
            code[k] = p;
        }
        for (i, j) in NETWORK {
            if j < d && labels[i] == labels[j] && code[i] > code[j] {
                code.swap(i, j);
            }
        }
        let mut rank = 0usize;
        for (l, members) in self.groups(case) {
            let m = members.len();
            let count = binomial(self.alphabet(l) + m - 1, m);
            let r: usize = members
                .iter()
                .enumerate()
                .map(|(i, &k)| binomial(code[k] + i, i + 1))
                .sum();
            rank = rank * count + r;
        }
        let orbit = usize::from(self.case_orbit_ranks[case]);
        OrbitSlot {
            row: self.case_value_offsets[orbit] as usize + rank,
            sign,
        }
    }
}
