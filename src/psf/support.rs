//! Which pixels an event touches: the per-row ranges of its circular support.
//!
//! # The contract (the device code reproduces it bit for bit)
//!
//! An event at `(x, y)` with support radius `s` has anchor
//! `(ax, ay) = (⌊x⌋, ⌊y⌋)` and phase `(fx, fy) = (x − ax, y − ay)` (each in
//! `[0, 1]`: `x − ⌊x⌋` is exact in float64, and can round up to 1 only for a
//! tiny negative `x`). Pixels are named by offsets `(ox, oy)` from the anchor,
//! pixel `(ax + ox, ay + oy)`. Every step below is one IEEE-754 float64
//! operation, correctly rounded (no fused multiply-add: device code uses
//! `__dmul_rn`/`__dadd_rn`/`__dsub_rn`/`__dsqrt_rn`, or compiles with FMA
//! contraction off and IEEE square roots; `ceil`/`floor` are exact):
//!
//! ```text
//! dy  = (oy + 0.5) − fy            (oy + 0.5 exact for |oy| < 2^52)
//! h2  = s·s − dy·dy
//! row oy is in the support  ⟺  h2 ≥ 0
//! w   = sqrt(h2)
//! c   = fx − 0.5
//! ox ∈ [ceil(c − w), floor(c + w)]  (may be empty)
//! ```
//!
//! i.e. the pixel centre `(ox + ½ − fx, oy + ½ − fy)` relative to the
//! event lies within `s` (evaluated in that order). The shape depends only
//! on `(fx, fy, s)`, so moving an event by whole pixels keeps it exactly
//! (the dispersed fixture relies on that). The rows in the support are
//! contiguous (`dy·dy` is monotone in `|dy|`), and row 0 (where
//! `|dy| ≤ ½`) is the widest: every other row's range lies inside it.
//! [`support_rows`] finds the rows, [`row_span`] one row's columns,
//! [`support_box`] the bounding box of offsets.

/// The anchor pixel `⌊v⌋` (saturating to the i64 range) and the phase
/// `v − ⌊v⌋` of one coordinate.
pub fn anchor_phase(v: f64) -> (i64, f64) {
    let a = v.floor();
    (a as i64, v - a)
}

/// `h2 = s·s − dy·dy` of row offset `oy` (see the module's contract).
#[inline]
pub fn row_h2(fy: f64, s: f64, oy: i64) -> f64 {
    let dy = (oy as f64 + 0.5) - fy;
    s * s - dy * dy
}

/// The inclusive column offsets `[lo, hi]` of row `oy`, or `None` when the
/// row is not in the support or its range is empty.
#[inline]
pub fn row_span(fx: f64, fy: f64, s: f64, oy: i64) -> Option<(i64, i64)> {
    let h2 = row_h2(fy, s, oy);
    if h2.is_nan() || h2 < 0.0 {
        return None;
    }
    let w = h2.sqrt();
    let c = fx - 0.5;
    let lo = (c - w).ceil() as i64;
    let hi = (c + w).floor() as i64;
    (lo <= hi).then_some((lo, hi))
}

/// The inclusive row offsets `[lo, hi]` whose `h2 ≥ 0`, or `None`. Found
/// from the estimate `[ceil(fy − ½ − s), floor(fy − ½ + s)]` corrected one
/// row at a time against the `h2` test (at most a step or two).
pub fn support_rows(fy: f64, s: f64) -> Option<(i64, i64)> {
    if row_h2(fy, s, 0) < 0.0 || row_h2(fy, s, 0).is_nan() {
        return None;
    }
    let c = fy - 0.5;
    let mut lo = ((c - s).ceil() as i64).min(0);
    let mut hi = ((c + s).floor() as i64).max(0);
    while lo > i64::MIN && row_h2(fy, s, lo - 1) >= 0.0 {
        lo -= 1;
    }
    while row_h2(fy, s, lo) < 0.0 {
        lo += 1;
    }
    while hi < i64::MAX && row_h2(fy, s, hi + 1) >= 0.0 {
        hi += 1;
    }
    while row_h2(fy, s, hi) < 0.0 {
        hi -= 1;
    }
    Some((lo, hi))
}

/// The bounding box of an event's support in offsets from its anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SupportBox {
    /// First row offset in the support.
    pub oy_lo: i64,
    /// Last row offset in the support.
    pub oy_hi: i64,
    /// Smallest column offset (that of row 0, the widest).
    pub ox_lo: i64,
    /// Largest column offset.
    pub ox_hi: i64,
}

/// The support's bounding box, or `None` when the support holds no pixel
/// centre at all.
pub fn support_box(fx: f64, fy: f64, s: f64) -> Option<SupportBox> {
    let (oy_lo, oy_hi) = support_rows(fy, s)?;
    let (ox_lo, ox_hi) = row_span(fx, fy, s, 0)?;
    Some(SupportBox {
        oy_lo,
        oy_hi,
        ox_lo,
        ox_hi,
    })
}
