//! The generated descriptor fallback (seed `nearfield_symmetry.txt`:
//! "Unsupported constrained or sign-changing kernels use the generated
//! descriptor fallback").
//!
//! The arithmetic ORBIT path ([`crate::nearfield::OrbitDescriptors`]) models the
//! groups of scalar and axis-derivative kernels. Every other group (a
//! directional source derivative, whose allowed transforms are those that
//! keep its direction collinear) goes through these descriptors, and any
//! kernel may be forced onto them. They are data the evaluator reads, not
//! code specialised per kernel:
//!
//! - `transform_qpoint_map[g · n_q_points + m]`: node `m` under transform
//!   `g` (u16), `transform_case_map[g · n_cases + c]`: case `c` under `g`
//!   (u8), `transform_signs[g]`: the sign `g` puts on an entry (i8). The
//!   transforms are the kernel's group ([`crate::nearfield::kernel_group`]) in its
//!   fixed order, identity first.
//! - The representative of a full entry `(c, s, t)` is the smallest full
//!   id among its images `(case_map[g,c]·nq + qmap[g,s])·nq + qmap[g,t]`
//!   over every `g` (a fixed-size reduction over the transforms). Ties —
//!   several transforms reaching that id — prefer a positive transform
//!   sign, then the smaller transform id, so the rule is deterministic and
//!   warp-uniform. The entry's value is `sign(g*) · T[representative]`.
//! - `representative_lookup`: an open-addressed hash (linear probing,
//!   power-of-two size at least twice the representatives, Fibonacci
//!   hash) from representative full id to compact row; a lookup probes
//!   at most `probe_count` slots (the longest displacement found while
//!   filling it, plus one), stopping at the match, so a missing key costs
//!   exactly that bound and never more.
//! - `sign_lookup`: sparse `(full id, sign)` corrections, sorted by id,
//!   for entries whose generated sign differs from the dense oracle's
//!   `canonical_scales`. That only happens in orbits that are zero by
//!   symmetry (an entry mapped to minus itself), where the oracle's sign is
//!   a convention; it is normally empty and it is kept so that the
//!   generated metadata agrees with the oracle bit for bit.
//!
//! [`FallbackDescriptors::prepare`] builds all of it and validates it
//! against the dense oracle ([`crate::nearfield::DenseOrbits`]) for every full entry
//! (representative id, sign, and the row the hash returns) before it is
//! returned: a descriptor that disagrees is an error, never used.
use crate::nearfield::cases::Cases;
use crate::nearfield::kernels::Kernel;
use crate::nearfield::symmetry::{kernel_group, DenseOrbits};
use crate::runtime::{Error, Result};

/// The hash's empty-slot key.
pub const LOOKUP_EMPTY: u32 = u32::MAX;

/// The generated descriptor fallback of one kernel at one order (module
/// docs).
#[derive(Clone, Debug, PartialEq)]
pub struct FallbackDescriptors {
    dim: usize,
    q: usize,
    n_cases: usize,
    n_q_points: usize,
    /// `[n_transforms × n_q_points]`: node index under each transform.
    pub transform_qpoint_map: Vec<u16>,
    /// `[n_transforms × n_cases]`: case id under each transform.
    pub transform_case_map: Vec<u8>,
    /// `[n_transforms]`: ±1, the sign each transform puts on an entry.
    pub transform_signs: Vec<i8>,
    /// The representatives (smallest full id of each orbit), ascending; the
    /// compact row of `representatives[r]` is `r`.
    pub representatives: Vec<u32>,
    /// Open-addressed hash keys (full ids; [`LOOKUP_EMPTY`] = empty slot).
    pub representative_lookup_keys: Vec<u32>,
    /// The compact row of each occupied slot.
    pub representative_lookup_rows: Vec<u32>,
    /// Slots every lookup probes.
    pub probe_count: u32,
    /// Full ids whose sign is corrected, ascending.
    pub sign_lookup_ids: Vec<u32>,
    /// Their signs (the oracle's).
    pub sign_lookup_signs: Vec<i8>,
    /// Per representative: its orbit is zero by symmetry.
    pub zero_by_symmetry: Vec<bool>,
}

/// Where a full entry's value is: `T[entry] = sign · rows[row]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FallbackSlot {
    /// The representative's full id.
    pub representative: u32,
    /// The compact row.
    pub row: u32,
    /// ±1.
    pub sign: i8,
}

fn hash_slot(id: u32, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (id.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
    }
}

impl FallbackDescriptors {
    /// Generates the descriptors of `kernel` at `q` nodes per axis and
    /// validates them against the dense oracle for every full entry.
    pub fn prepare(kernel: &Kernel, q: usize) -> Result<FallbackDescriptors> {
        let oracle = DenseOrbits::build(kernel, q)?;
        let d = kernel.dim();
        let cases = Cases::new(d)?;
        let nq = q.pow(d as u32);
        if nq > usize::from(u16::MAX) + 1 || cases.len() > usize::from(u8::MAX) + 1 {
            return Err(Error::InvalidInput(format!(
                "descriptor fallback: {nq} target points or {} cases do not fit its u16/u8 maps",
                cases.len()
            )));
        }
        let group = kernel_group(kernel);
        let mut transform_qpoint_map = Vec::with_capacity(group.len() * nq);
        let mut transform_case_map = Vec::with_capacity(group.len() * cases.len());
        let mut transform_signs = Vec::with_capacity(group.len());
        let mut v = [0i32; 3];
        for (g, sg) in &group {
            transform_qpoint_map.extend((0..nq).map(|m| g.apply_node(m, q, d) as u16));
            for c in 0..cases.len() {
                g.apply_vector(cases.vector(c), &mut v[..d]);
                let image = cases.id_of_vector(&v[..d]).ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "descriptor fallback: case {c} has no image under {g:?}"
                    ))
                })?;
                transform_case_map.push(image as u8);
            }
            transform_signs.push(*sg);
        }
        let mut out = FallbackDescriptors {
            dim: d,
            q,
            n_cases: cases.len(),
            n_q_points: nq,
            transform_qpoint_map,
            transform_case_map,
            transform_signs,
            representatives: oracle.representatives.clone(),
            representative_lookup_keys: Vec::new(),
            representative_lookup_rows: Vec::new(),
            probe_count: 0,
            sign_lookup_ids: Vec::new(),
            sign_lookup_signs: Vec::new(),
            zero_by_symmetry: oracle.zero_by_symmetry.clone(),
        };
        out.fill_lookup();
        out.fill_sign_lookup(&oracle)?;
        out.validate(&oracle)?;
        Ok(out)
    }

    /// The open-addressed hash of the representatives.
    fn fill_lookup(&mut self) {
        let n = self.representatives.len();
        let size = (2 * n).next_power_of_two().max(1);
        let bits = size.trailing_zeros();
        let mut keys = vec![LOOKUP_EMPTY; size];
        let mut rows = vec![0u32; size];
        let mut longest = 0usize;
        for (row, &id) in self.representatives.iter().enumerate() {
            let h = hash_slot(id, bits);
            let mut p = 0;
            while keys[(h + p) & (size - 1)] != LOOKUP_EMPTY {
                p += 1;
            }
            keys[(h + p) & (size - 1)] = id;
            rows[(h + p) & (size - 1)] = row as u32;
            longest = longest.max(p);
        }
        self.representative_lookup_keys = keys;
        self.representative_lookup_rows = rows;
        self.probe_count = longest as u32 + 1;
    }

    /// The transform reduction (module docs): representative and sign
    /// before the sparse correction.
    fn generated(&self, case: usize, s: usize, t: usize) -> (u32, i8) {
        let nq = self.n_q_points;
        let mut best = u32::MAX;
        let mut sign = 1i8;
        for (g, &sg) in self.transform_signs.iter().enumerate() {
            let c = usize::from(self.transform_case_map[g * self.n_cases + case]);
            let s2 = usize::from(self.transform_qpoint_map[g * nq + s]);
            let t2 = usize::from(self.transform_qpoint_map[g * nq + t]);
            let id = ((c * nq + s2) * nq + t2) as u32;
            // Smaller id wins; on a tie a positive sign replaces a negative
            // one; otherwise the earlier transform stays.
            if id < best || (id == best && sg > 0 && sign < 0) {
                best = id;
                sign = sg;
            }
        }
        (best, sign)
    }

    /// The entries whose generated sign is not the oracle's.
    fn fill_sign_lookup(&mut self, oracle: &DenseOrbits) -> Result<()> {
        let nq = self.n_q_points;
        let n = self.n_cases * nq * nq;
        let mut ids = Vec::new();
        let mut signs = Vec::new();
        for e in 0..n {
            let (_, sign) = self.generated(e / (nq * nq), (e / nq) % nq, e % nq);
            let want = oracle.canonical_scales[e];
            if f64::from(sign) != want {
                let root = oracle.canonical_entry_ids[e] as u32;
                let r = self.representatives.binary_search(&root).map_err(|_| {
                    Error::InvalidInput(format!(
                        "descriptor fallback: entry {e}'s oracle root {root} is no representative"
                    ))
                })?;
                if !self.zero_by_symmetry[r] {
                    return Err(Error::InvalidInput(format!(
                        "descriptor fallback: entry {e} gets sign {sign} from the transforms \
                         but {want} from the dense oracle, in an orbit that is not zero by \
                         symmetry"
                    )));
                }
                ids.push(e as u32);
                signs.push(want as i8);
            }
        }
        self.sign_lookup_ids = ids;
        self.sign_lookup_signs = signs;
        Ok(())
    }

    /// Checks every full entry against the oracle (representative, sign,
    /// and the row the hash returns); the first disagreement is the error.
    pub fn validate(&self, oracle: &DenseOrbits) -> Result<()> {
        let nq = self.n_q_points;
        for (e, (&id, &scale)) in oracle
            .canonical_entry_ids
            .iter()
            .zip(&oracle.canonical_scales)
            .enumerate()
        {
            let slot = self.slot(e / (nq * nq), (e / nq) % nq, e % nq)?;
            if slot.representative != id as u32
                || f64::from(slot.sign) != scale
                || self.representatives[slot.row as usize] != id as u32
            {
                return Err(Error::InvalidInput(format!(
                    "descriptor fallback: entry {e} resolves to {slot:?}, the dense oracle says \
                     representative {id} with sign {scale}"
                )));
            }
        }
        Ok(())
    }

    /// Where the value of entry `(case, s, t)` is (module docs). An error
    /// only for indices out of range or a representative the hash does not
    /// hold (which [`FallbackDescriptors::prepare`] rules out).
    pub fn slot(&self, case: usize, s: usize, t: usize) -> Result<FallbackSlot> {
        if case >= self.n_cases || s >= self.n_q_points || t >= self.n_q_points {
            return Err(Error::InvalidInput(format!(
                "descriptor fallback: entry (case {case}, source mode {s}, target point {t}) out \
                 of range ({} cases, {} points)",
                self.n_cases, self.n_q_points
            )));
        }
        let (representative, mut sign) = self.generated(case, s, t);
        let full = ((case * self.n_q_points + s) * self.n_q_points + t) as u32;
        if let Ok(i) = self.sign_lookup_ids.binary_search(&full) {
            sign = self.sign_lookup_signs[i];
        }
        let size = self.representative_lookup_keys.len();
        let h = hash_slot(representative, size.trailing_zeros());
        for p in 0..self.probe_count as usize {
            let k = (h + p) & (size - 1);
            if self.representative_lookup_keys[k] == representative {
                return Ok(FallbackSlot {
                    representative,
                    row: self.representative_lookup_rows[k],
                    sign,
                });
            }
        }
        Err(Error::InvalidInput(format!(
            "descriptor fallback: representative {representative} not in the lookup within \
             {} probes",
            self.probe_count
        )))
    }

    /// Dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Nodes per axis.
    pub fn q(&self) -> usize {
        self.q
    }

    /// Number of transforms.
    pub fn n_transforms(&self) -> usize {
        self.transform_signs.len()
    }

    /// Compact rows (representatives).
    pub fn n_rows(&self) -> usize {
        self.representatives.len()
    }

    /// Bytes a device receives besides the compact rows: both maps, the
    /// transform signs, the hash (keys and rows), the probe count and the
    /// sparse sign lookup.
    pub fn metadata_bytes(&self) -> usize {
        self.transform_qpoint_map.len() * 2
            + self.transform_case_map.len()
            + self.transform_signs.len()
            + self.representative_lookup_keys.len() * 4
            + self.representative_lookup_rows.len() * 4
            + 4
            + self.sign_lookup_ids.len() * 4
            + self.sign_lookup_signs.len()
    }
}

/// Sign bit of a [`FallbackResolution`] entry (the rest is the row).
pub const RESOLUTION_NEGATIVE: u16 = 0x8000;

/// A plan-time table derived from the [`FallbackDescriptors`] so that the
/// device need not scan the candidate transforms per entry: the fallback's
/// own slots (smallest full id over the transforms, sparse sign
/// correction, the hash's row) of the entries of one canonical case per
/// case orbit, for every (source mode, target point) pair, and per case
/// the transform that takes it there. It is not the dense full-entry map:
/// it covers the case orbits' canonical cases only (3D: 10 of 139 cases
/// for a scalar kernel, so 7,290 of 101,331 entries at q = 3).
///
/// For case `c` let `h = case_transform[c]`, the first transform (in
/// order) taking `c` to its smallest image case `c* = case_map[h, c]`
/// (one of the fallback's candidate transforms), and `o = case_orbit[c]`
/// the index of `c*` among the canonical cases (ascending). Then
///
/// ```text
/// e = rows[(o · nq + qmap[h, s]) · nq + qmap[h, t]]
/// slot(c, s, t) = (row e & 0x7FFF, sign (−1 if e & 0x8000) · transform_signs[h])
/// ```
///
/// — the candidates of `c` are those of `c*` composed with `h`, so the
/// smallest full id is the image of `c*`'s. That holds because the
/// transforms form a group acting on cases and nodes;
/// [`FallbackDescriptors::resolution`] does not assume it: it checks the
/// identity above against [`FallbackDescriptors::slot`] for every full
/// entry (row and sign) and returns `None` when any entry disagrees, or
/// when a row does not fit 15 bits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FallbackResolution {
    /// `[n_cases]`: the case orbit of each case (index of its canonical case).
    pub case_orbit: Vec<u8>,
    /// `[n_cases]`: the transform taking each case to its canonical case.
    pub case_transform: Vec<u8>,
    /// `[n_orbits × nq × nq]`: row | [`RESOLUTION_NEGATIVE`] of the
    /// canonical case's entry `(s', t')`.
    pub rows: Vec<u16>,
}

impl FallbackResolution {
    /// Case orbits (canonical cases).
    pub fn n_orbits(&self) -> usize {
        self.case_orbit
            .iter()
            .map(|&o| usize::from(o) + 1)
            .max()
            .unwrap_or(0)
    }

    /// Bytes a device receives for it.
    pub fn bytes(&self) -> usize {
        self.case_orbit.len() + self.case_transform.len() + 2 * self.rows.len()
    }

    /// `(row, sign)` of entry `(case, s, t)` through the table (the
    /// identity in the type's docs), with `desc` the descriptors it was
    /// derived from (their node maps and transform signs); what the
    /// device's resolved fallback path reads. Panics for indices out of
    /// range.
    pub fn slot(&self, desc: &FallbackDescriptors, case: usize, s: usize, t: usize) -> (u32, i8) {
        let nq = desc.n_q_points;
        let h = usize::from(self.case_transform[case]);
        let o = usize::from(self.case_orbit[case]);
        let qmap = |m: usize| usize::from(desc.transform_qpoint_map[h * nq + m]);
        let e = self.rows[(o * nq + qmap(s)) * nq + qmap(t)];
        let hs = desc.transform_signs[h];
        let sign = if e & RESOLUTION_NEGATIVE != 0 {
            -hs
        } else {
            hs
        };
        (u32::from(e & !RESOLUTION_NEGATIVE), sign)
    }
}

impl FallbackDescriptors {
    /// The plan-time resolution table ([`FallbackResolution`]), checked
    /// against [`FallbackDescriptors::slot`] for every full entry; `None`
    /// when the identity fails for some entry, a row needs more than 15
    /// bits, or there are more than 256 canonical cases.
    pub fn resolution(&self) -> Option<FallbackResolution> {
        let (nq, nc, ng) = (self.n_q_points, self.n_cases, self.n_transforms());
        if self.n_rows() > usize::from(RESOLUTION_NEGATIVE) {
            return None;
        }
        let cmap = |g: usize, c: usize| usize::from(self.transform_case_map[g * nc + c]);
        let mut canon = vec![0usize; nc];
        let mut case_transform = vec![0u8; nc];
        for c in 0..nc {
            let mut best = (usize::MAX, 0usize);
            for g in 0..ng {
                if cmap(g, c) < best.0 {
                    best = (cmap(g, c), g);
                }
            }
            canon[c] = best.0;
            case_transform[c] = u8::try_from(best.1).ok()?;
        }
        let mut reps: Vec<usize> = canon.clone();
        reps.sort_unstable();
        reps.dedup();
        if reps.len() > 256 {
            return None;
        }
        let case_orbit: Vec<u8> = canon
            .iter()
            .map(|c| reps.binary_search(c).unwrap() as u8)
            .collect();
        let mut rows = Vec::with_capacity(reps.len() * nq * nq);
        for &r in &reps {
            for s in 0..nq {
                for t in 0..nq {
                    let slot = self.slot(r, s, t).ok()?;
                    let neg = if slot.sign < 0 {
                        RESOLUTION_NEGATIVE
                    } else {
                        0
                    };
                    rows.push(u16::try_from(slot.row).ok()? | neg);
                }
            }
        }
        let res = FallbackResolution {
            case_orbit,
            case_transform,
            rows,
        };
        for c in 0..nc {
            for s in 0..nq {
                for t in 0..nq {
                    let slot = self.slot(c, s, t).ok()?;
                    if res.slot(self, c, s, t) != (slot.row, slot.sign) {
                        return None;
                    }
                }
            }
        }
        Some(res)
    }
}
