//! Seeded event fixtures (`docs/design/psf.md#fixtures`), deterministic on
//! every platform.
//!
//! All are for a 3840 × 2160 image and the default PSF (FWHM 2.7, β 4.5,
//! tail 1e−8); positions carry 20-bit sub-pixel phases (so moving an event
//! by whole pixels keeps its phase exactly). The shapes follow the
//! measurement report the sink comes from (`seeds/psf_replay.txt`): every
//! real event there has support R = 45.84777786185942 px; fluxes here are
//! log-distributed over four decades (faint stars common), colours
//! blackbody-like with unit luminance `Y(r, g, b) = 1`.
//!
//! | fixture     | events | 32×32 centre tiles | notes |
//! |-------------|-------:|-------------------:|-------|
//! | `dense`     | 65,536 | 30 (a 6×5 block)   | a crowded field, peak tile ≈ 12% of the events |
//! | `dispersed` | 65,536 | thousands          | `dense` moved apart: same phases, flux, support, contributions |
//! | `magnified` | 16,454 | 367 (an arc)       | a strongly lensed region, ≤ ~180 per tile |
//! | `ordinary`  | 12,765 | 8                  | an ordinary field, peak tile ≈ 37% |
//! | `boundary`  | 32,771 | many               | edges, wings, exact and intermediate phases, hot spots, far-outside events, varied supports, and events too large for the cache in the middle chunk |
use super::event::StarEvent;
use super::image::LUMA;
use super::model::MoffatPsf;
use super::reference::event_contributions;
use super::support::{anchor_phase, support_box};
use super::{CENTRE_TILE, DEFAULT_HEIGHT, DEFAULT_PHASES, DEFAULT_WIDTH};
use crate::rng::SplitMix64;
use crate::runtime::{Error, Result};
use std::collections::BTreeMap;

/// The fixtures' names.
pub const FIXTURE_NAMES: [&str; 5] = ["dense", "dispersed", "magnified", "ordinary", "boundary"];

/// A named set of events for an image of a given size.
#[derive(Clone, Debug, PartialEq)]
pub struct Fixture {
    /// One of [`FIXTURE_NAMES`].
    pub name: &'static str,
    /// Image width the events are for.
    pub width: usize,
    /// Image height.
    pub height: usize,
    /// The PSF they are rendered with.
    pub psf: MoffatPsf,
    /// The events, in stream order.
    pub events: Vec<StarEvent>,
}

/// The fixture called `name` (one of [`FIXTURE_NAMES`]).
pub fn fixture(name: &str) -> Result<Fixture> {
    match name {
        "dense" => Ok(dense()),
        "dispersed" => Ok(dispersed()),
        "magnified" => Ok(magnified()),
        "ordinary" => Ok(ordinary()),
        "boundary" => Ok(boundary()),
        _ => Err(Error::InvalidInput(format!(
            "no fixture named {name:?} (there are {})",
            FIXTURE_NAMES.join(", ")
        ))),
    }
}

/// Events per occupied 32×32 centre tile: the tile `(⌊x⌋ div 32, ⌊y⌋ div 32)`
/// holding the event's centre, over events whose centre is on the image.
pub fn centre_tiles(
    events: &[StarEvent],
    width: usize,
    height: usize,
) -> BTreeMap<(i64, i64), usize> {
    let mut m = BTreeMap::new();
    for e in events {
        if e.x >= 0.0 && e.y >= 0.0 && e.x < width as f64 && e.y < height as f64 {
            let t = CENTRE_TILE as i64;
            *m.entry((e.x.floor() as i64 / t, e.y.floor() as i64 / t))
                .or_insert(0) += 1;
        }
    }
    m
}

struct Gen {
    rng: SplitMix64,
    psf: MoffatPsf,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: SplitMix64::new(seed),
            psf: MoffatPsf::default(),
        }
    }
    fn unit(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// A phase with 20 random bits, in [0, 1).
    fn phase(&mut self) -> f64 {
        (self.rng.next_u64() >> 44) as f64 / (1u64 << 20) as f64
    }
    fn below(&mut self, n: usize) -> usize {
        self.rng.below(n)
    }
    /// Flux log-distributed over [1e−2, 1e2], faint more common.
    fn flux(&mut self) -> f64 {
        let u = self.unit();
        10f64.powf(4.0 * u * u - 2.0)
    }
    /// A colour with unit luminance, from red to blue.
    fn colour(&mut self) -> [f64; 3] {
        let t = self.unit();
        let c = [1.3 - 0.7 * t, 1.0 - 0.1 * t, 0.4 + 0.9 * t];
        let y = LUMA[0] * c[0] + LUMA[1] * c[1] + LUMA[2] * c[2];
        c.map(|v| v / y)
    }
    fn event(&mut self, x: f64, y: f64, support: f64) -> StarEvent {
        let flux = self.flux();
        let [r, g, b] = self.colour();
        StarEvent {
            x,
            y,
            flux,
            r,
            g,
            b,
            support,
        }
    }
    /// `n` events with support R spread over `tiles` by `weights`: one per
    /// tile first (so every tile is occupied), the rest drawn by weight,
    /// uniform within the tile with 20-bit phases.
    fn tiled(&mut self, tiles: &[(i64, i64)], weights: &[f64], n: usize) -> Vec<StarEvent> {
        let r = self.psf.support_radius();
        let total: f64 = weights.iter().sum();
        let mut cum = Vec::with_capacity(weights.len());
        let mut acc = 0.0;
        for w in weights {
            acc += w / total;
            cum.push(acc);
        }
        let t = CENTRE_TILE as i64;
        (0..n)
            .map(|k| {
                let tile = if k < tiles.len() {
                    k
                } else {
                    let u = self.unit();
                    cum.partition_point(|&c| c <= u).min(tiles.len() - 1)
                };
                let (tx, ty) = tiles[tile];
                let x = (tx * t + self.below(CENTRE_TILE) as i64) as f64 + self.phase();
                let y = (ty * t + self.below(CENTRE_TILE) as i64) as f64 + self.phase();
                self.event(x, y, r)
            })
            .collect()
    }
}

fn fixture_of(name: &'static str, events: Vec<StarEvent>) -> Fixture {
    Fixture {
        name,
        width: DEFAULT_WIDTH,
        height: DEFAULT_HEIGHT,
        psf: MoffatPsf::default(),
        events,
    }
}

/// 65,536 events in 30 centre tiles (a 6×5 block at the image centre,
/// Gaussian weights), all supports wholly inside the image.
pub fn dense() -> Fixture {
    let mut g = Gen::new(0xD15E_0001);
    let mut tiles = Vec::new();
    let mut weights = Vec::new();
    for ty in 31..=35i64 {
        for tx in 57..=62i64 {
            let (dx, dy) = (tx as f64 - 59.6, ty as f64 - 33.2);
            tiles.push((tx, ty));
            weights.push((-(dx * dx + dy * dy) / (2.0 * 1.15 * 1.15)).exp());
        }
    }
    fixture_of("dense", g.tiled(&tiles, &weights, 65_536))
}

/// [`dense`] moved apart by [`disperse`].
pub fn dispersed() -> Fixture {
    let d = dense();
    fixture_of(
        "dispersed",
        disperse(&d.events, d.width, d.height, 0xD15E_0002),
    )
}

/// The events moved apart by whole pixels, keeping each one's phase,
/// flux, colour and support bitwise: an event whose support lies wholly
/// inside the `width × height` image gets a uniformly drawn anchor that
/// keeps it wholly inside; others (clipped ones) stay where they are, as
/// does any event whose phase a move would round. The event–pixel
/// contribution count is therefore unchanged.
pub fn disperse(events: &[StarEvent], width: usize, height: usize, seed: u64) -> Vec<StarEvent> {
    let mut g = Gen::new(seed);
    let (w, h) = (width as i64, height as i64);
    events
        .iter()
        .map(|e| {
            let (ax, fx) = anchor_phase(e.x);
            let (ay, fy) = anchor_phase(e.y);
            let Some(b) = support_box(fx, fy, e.support) else {
                return *e;
            };
            let inside =
                ax + b.ox_lo >= 0 && ax + b.ox_hi < w && ay + b.oy_lo >= 0 && ay + b.oy_hi < h;
            let (nx_lo, nx_hi) = (-b.ox_lo, w - 1 - b.ox_hi);
            let (ny_lo, ny_hi) = (-b.oy_lo, h - 1 - b.oy_hi);
            if !inside || nx_lo > nx_hi || ny_lo > ny_hi {
                return *e;
            }
            let nax = nx_lo + g.below((nx_hi - nx_lo + 1) as usize) as i64;
            let nay = ny_lo + g.below((ny_hi - ny_lo + 1) as usize) as i64;
            let moved = StarEvent {
                x: nax as f64 + fx,
                y: nay as f64 + fy,
                ..*e
            };
            if anchor_phase(moved.x) != (nax, fx) || anchor_phase(moved.y) != (nay, fy) {
                return *e;
            }
            moved
        })
        .collect()
}

/// 16,454 events over 367 centre tiles along an arc (a lensed ring
/// around the image centre), uneven weights.
pub fn magnified() -> Fixture {
    let mut g = Gen::new(0xD15E_0003);
    let mut ring = Vec::new();
    for ty in 0..(DEFAULT_HEIGHT / CENTRE_TILE) as i64 {
        for tx in 0..(DEFAULT_WIDTH / CENTRE_TILE) as i64 {
            let (dx, dy) = (tx as f64 - 59.5, ty as f64 - 33.25);
            let r = (dx * dx + dy * dy).sqrt();
            if (18.5..21.5).contains(&r) {
                ring.push((tx, ty));
            }
        }
    }
    // A deterministic shuffle, then the first 367.
    for k in (1..ring.len()).rev() {
        let j = g.below(k + 1);
        ring.swap(k, j);
    }
    ring.truncate(367);
    ring.sort_unstable();
    let weights: Vec<f64> = (0..ring.len())
        .map(|_| {
            let u = g.unit();
            1.0 + 175.0 * u * u * u
        })
        .collect();
    fixture_of("magnified", g.tiled(&ring, &weights, 16_454))
}

/// 12,765 events over 8 centre tiles (a 4×2 block), one tile holding
/// about 37% of them.
pub fn ordinary() -> Fixture {
    let mut g = Gen::new(0xD15E_0004);
    let tiles: Vec<(i64, i64)> = (0..8).map(|k| (20 + k % 4, 50 + k / 4)).collect();
    let weights = [0.3675, 0.2, 0.12, 0.1, 0.08, 0.06, 0.0425, 0.03];
    fixture_of("ordinary", g.tiled(&tiles, &weights, 12_765))
}

/// Supports of the boundary fixture's events that are too large for the
/// cache (they go by the direct path).
pub const BOUNDARY_DIRECT_SUPPORTS: [f64; 8] = [48.0, 50.0, 55.0, 60.0, 75.0, 100.0, 150.0, 47.9];

/// 32,771 events for the edge cases, three chunks:
///
/// - exact phases `k/64` (k = 0..=64, so 0 and every multiple of 1/P) and a
///   grid of `(a/8, b/8)`; phase exactly 1 (an event at `x = −1e−20`);
/// - events along all four edges and at the corners, centres inside and
///   outside the image, their supports clipped (wings);
/// - events off the image whose wings reach in, and events wholly outside
///   (near and very far);
/// - hot spots: four positions with 4,000 events each (two exactly
///   coincident, two jittered by ≤ 0.01 px);
/// - supports from 0.2 px (some hold no pixel centre) to the largest that
///   fit the cache (46.5, 47.0, 47.49);
/// - intermediate (20-bit random) phases for the rest;
/// - 8 events whose supports ([`BOUNDARY_DIRECT_SUPPORTS`]) exceed the
///   cache radius, at indices 20,000 + 37·k in the middle chunk, for the
///   direct path (one of them centred off the image).
pub fn boundary() -> Fixture {
    let mut g = Gen::new(0xD15E_0005);
    let r = g.psf.support_radius();
    let (w, h) = (DEFAULT_WIDTH as f64, DEFAULT_HEIGHT as f64);
    let p = DEFAULT_PHASES as f64;
    let mut ev = Vec::new();
    // Exact phases.
    for k in 0..=DEFAULT_PHASES {
        let x = (200 + 100 * (k % 16)) as f64 + k as f64 / p;
        let y = (300 + 100 * (k / 16)) as f64 + ((7 * k) % 65) as f64 / p;
        ev.push(g.event(x, y, r));
    }
    for a in 0..8 {
        for b in 0..8 {
            let x = (2000 + 100 * a) as f64 + a as f64 / 8.0;
            let y = (300 + 100 * b) as f64 + b as f64 / 8.0;
            ev.push(g.event(x, y, r));
        }
    }
    ev.push(g.event(-1e-20, 700.25, r));
    ev.push(g.event(1500.5, -1e-20, r));
    // Edges: centres within 12 px of an edge, on both sides of it.
    for k in 0..100 {
        let along_x = 50.0 + (w - 100.0) * (k as f64 + g.phase()) / 100.0;
        let along_y = 50.0 + (h - 100.0) * (k as f64 + g.phase()) / 100.0;
        let d = 24.0 * g.unit() - 12.0;
        ev.push(g.event(along_x, d, r));
        ev.push(g.event(along_x, h + d, r));
        ev.push(g.event(d, along_y, r));
        ev.push(g.event(w + d, along_y, r));
    }
    // Corners.
    for (cx, cy) in [(0.0, 0.0), (w, 0.0), (0.0, h), (w, h)] {
        for _ in 0..5 {
            let (dx, dy) = (20.0 * g.unit() - 10.0, 20.0 * g.unit() - 10.0);
            ev.push(g.event(cx + dx, cy + dy, r));
        }
    }
    // Off the image, wings reaching in (1..45 px outside).
    for k in 0..100 {
        let d = 1.0 + 44.0 * g.unit();
        let along = g.unit();
        let e = match k % 4 {
            0 => g.event(-d, along * h, r),
            1 => g.event(w + d, along * h, r),
            2 => g.event(along * w, -d, r),
            _ => g.event(along * w, h + d, r),
        };
        ev.push(e);
    }
    // Wholly outside: just beyond the reach, and very far.
    for k in 0..40 {
        let d = r + 1.5 + 200.0 * g.unit();
        let e = match k % 5 {
            0 => g.event(-d, 1000.0, r),
            1 => g.event(w + d, 1000.0, r),
            2 => g.event(1000.0, -d, r),
            3 => g.event(1000.0, h + d, r),
            _ => g.event(-1e9, 1e12, r),
        };
        ev.push(e);
    }
    // Varied supports, cacheable.
    let supports = [
        0.2,
        0.5,
        std::f64::consts::FRAC_1_SQRT_2,
        1.0,
        2.5,
        7.0,
        20.0,
        r,
        46.5,
        47.0,
        47.49,
    ];
    for _ in 0..40 {
        for &s in &supports {
            let x = 50.0 + (w - 100.0) * g.unit();
            let y = 50.0 + (h - 100.0) * g.unit();
            ev.push(g.event(x, y, s));
        }
    }
    // Hot spots.
    for (k, (hx, hy)) in [
        (640.25, 480.75),
        (1920.0, 1080.0),
        (3000.5, 1500.125),
        (33.3, 2130.6),
    ]
    .into_iter()
    .enumerate()
    {
        for _ in 0..4000 {
            let (jx, jy) = if k < 2 {
                (0.0, 0.0)
            } else {
                (0.02 * g.unit() - 0.01, 0.02 * g.unit() - 0.01)
            };
            let mut e = g.event(hx + jx, hy + jy, r);
            e.flux *= 10.0;
            ev.push(e);
        }
    }
    // Intermediate phases, random supports, for the rest.
    let n_direct = BOUNDARY_DIRECT_SUPPORTS.len();
    while ev.len() < 32_771 - n_direct {
        let x = -60.0 + (w + 120.0) * g.unit();
        let y = -60.0 + (h + 120.0) * g.unit();
        let s = if g.unit() < 0.5 {
            r
        } else {
            0.3 + 46.2 * g.unit()
        };
        ev.push(g.event(x, y, s));
    }
    for k in (1..ev.len()).rev() {
        let j = g.below(k + 1);
        ev.swap(k, j);
    }
    for (k, &s) in BOUNDARY_DIRECT_SUPPORTS.iter().enumerate() {
        let (x, y) = match k {
            0 => (-20.5, 1000.5),
            1 => (w - 3.25, h - 7.75),
            _ => (300.0 + 400.0 * k as f64 + g.phase(), 1000.0 + g.phase()),
        };
        let e = g.event(x, y, s);
        ev.insert(20_000 + 37 * k, e);
    }
    fixture_of("boundary", ev)
}

/// Total event–pixel contributions of a fixture on its own image.
pub fn fixture_contributions(f: &Fixture) -> u64 {
    f.events
        .iter()
        .map(|e| event_contributions(e, f.width, f.height))
        .sum()
}
