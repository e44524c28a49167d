//! The host side of List 1's target-tiled schedule
//! (`hipkern_list1_evaluate_tiled`): the target boxes cut into tiles of
//! `targets_per_tile` boxes (one device thread each), and per tile the keys
//! `table · n_cases + case` of its boxes' pairs with, per key and lane, the
//! pair of that lane's box.
//!
//! A tile's block builds one case matrix per key of the tile and every
//! lane with a pair of that key applies it; a lane without one idles for
//! that key. So the tiles gather boxes with the same keys: the boxes are
//! ordered by their sorted key lists (lexicographically, ties by box id:
//! the interior boxes of a uniform region all have the same 3^d same-level
//! keys and stay in tree order) and cut in that order. [`TargetTiling::slots`]
//! against the pair count measures what is left idle.

/// The tiles, the keys and the pair slots, as `hipkern_list1_tiles` takes
/// them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TargetTiling {
    pub targets_per_tile: usize,
    /// `n_tiles × targets_per_tile` target ids (`u32::MAX`: no box).
    pub tile_targets: Vec<u32>,
    /// `n_tiles + 1` offsets into `keys`.
    pub tile_key_offsets: Vec<u32>,
    /// Each tile's keys, ascending (a key repeats where a box has two
    /// pairs of one key).
    pub keys: Vec<u32>,
    /// `keys.len() × targets_per_tile` pair ids (`u32::MAX`: none).
    pub key_pairs: Vec<u32>,
}

impl TargetTiling {
    pub fn n_tiles(&self) -> usize {
        self.tile_key_offsets.len().saturating_sub(1)
    }

    /// Lane slots walked (keys × lanes): the device's work in units of one
    /// pair; the pair count over this is the tiles' utilisation.
    pub fn slots(&self) -> usize {
        self.key_pairs.len()
    }
}

const NONE: u32 = u32::MAX;

/// Tiles the targets of CSR `starts` (`n_targets + 1` offsets; pair `j` of
/// key `key(j)`) into tiles of `targets_per_tile` boxes.
pub(crate) fn tile_targets(
    starts: &[u32],
    key: impl Fn(usize) -> u32,
    targets_per_tile: usize,
) -> TargetTiling {
    let n_targets = starts.len().saturating_sub(1);
    let b = targets_per_tile.max(1);
    // Every target's pairs sorted by key (stable: list order within a key).
    let n_pairs = starts.last().map_or(0, |&s| s as usize);
    let mut sorted: Vec<(u32, u32)> = (0..n_pairs).map(|j| (key(j), j as u32)).collect();
    for i in 0..n_targets {
        sorted[starts[i] as usize..starts[i + 1] as usize].sort_by_key(|&(k, j)| (k, j));
    }
    let keys_of = |i: usize| {
        sorted[starts[i] as usize..starts[i + 1] as usize]
            .iter()
            .map(|&(k, _)| k)
    };
    let mut order: Vec<usize> = (0..n_targets).collect();
    order.sort_by(|&x, &y| keys_of(x).cmp(keys_of(y)).then(x.cmp(&y)));

    let n_tiles = n_targets.div_ceil(b);
    let mut t = TargetTiling {
        targets_per_tile: b,
        tile_targets: vec![NONE; n_tiles * b],
        tile_key_offsets: Vec::with_capacity(n_tiles + 1),
        ..TargetTiling::default()
    };
    t.tile_key_offsets.push(0);
    // (key, lane, pair) of one tile, sorted by key then lane (then list
    // order): each key's rows are its largest count on one lane.
    let mut entries: Vec<(u32, u32, u32)> = Vec::new();
    for (tile, boxes) in order.chunks(b).enumerate() {
        entries.clear();
        for (lane, &i) in boxes.iter().enumerate() {
            t.tile_targets[tile * b + lane] = i as u32;
            for &(k, j) in &sorted[starts[i] as usize..starts[i + 1] as usize] {
                entries.push((k, lane as u32, j));
            }
        }
        entries.sort_unstable();
        let mut x = 0;
        while x < entries.len() {
            let k = entries[x].0;
            let row0 = t.keys.len();
            let mut y = x;
            while y < entries.len() && entries[y].0 == k {
                // This lane's pairs of key k go to rows row0, row0 + 1, ...
                let lane = entries[y].1;
                let mut occurrence = 0;
                while y < entries.len() && entries[y].0 == k && entries[y].1 == lane {
                    let row = row0 + occurrence;
                    if row == t.keys.len() {
                        t.keys.push(k);
                        t.key_pairs.resize(t.keys.len() * b, NONE);
                    }
                    t.key_pairs[row * b + lane as usize] = entries[y].2;
                    occurrence += 1;
                    y += 1;
                }
            }
            x = y;
        }
        t.tile_key_offsets.push(t.keys.len() as u32);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::SplitMix64;

    /// Every target on exactly one lane; every pair in exactly one slot, on
    /// its own target's lane, under its own key; keys ascending per tile;
    /// no empty key row.
    fn check(starts: &[u32], keys: &[u32], b: usize) -> TargetTiling {
        let t = tile_targets(starts, |j| keys[j], b);
        let n_targets = starts.len() - 1;
        let n_pairs = keys.len();
        assert_eq!(t.n_tiles(), n_targets.div_ceil(b));
        assert_eq!(t.tile_targets.len(), t.n_tiles() * b);
        assert_eq!(t.key_pairs.len(), t.keys.len() * b);
        let mut target_seen = vec![false; n_targets];
        let mut pair_seen = vec![false; n_pairs];
        for tile in 0..t.n_tiles() {
            let (e0, e1) = (
                t.tile_key_offsets[tile] as usize,
                t.tile_key_offsets[tile + 1] as usize,
            );
            assert!(t.keys[e0..e1].windows(2).all(|w| w[0] <= w[1]));
            for e in e0..e1 {
                let row = &t.key_pairs[e * b..(e + 1) * b];
                assert!(row.iter().any(|&j| j != NONE), "key row {e} empty");
                for (lane, &j) in row.iter().enumerate() {
                    if j == NONE {
                        continue;
                    }
                    let i = t.tile_targets[tile * b + lane];
                    assert_ne!(i, NONE, "a pair on a lane without a box");
                    let j = j as usize;
                    assert!(
                        (starts[i as usize] as usize..starts[i as usize + 1] as usize).contains(&j)
                    );
                    assert_eq!(keys[j], t.keys[e]);
                    assert!(!pair_seen[j], "pair {j} twice");
                    pair_seen[j] = true;
                }
            }
            for lane in 0..b {
                let i = t.tile_targets[tile * b + lane];
                if i != NONE {
                    assert!(!target_seen[i as usize], "target {i} twice");
                    target_seen[i as usize] = true;
                }
            }
        }
        assert!(target_seen.iter().all(|&s| s), "a target on no lane");
        assert!(pair_seen.iter().all(|&s| s), "a pair in no slot");
        t
    }

    #[test]
    fn every_target_on_one_lane_every_pair_in_one_slot() {
        let mut rng = SplitMix64::new(0x7469_6c65_6431);
        for round in 0..200 {
            let n_targets = rng.below(150);
            let mut starts = vec![0u32];
            for _ in 0..n_targets {
                let n = rng.below(if round % 5 == 0 { 40 } else { 12 }) as u32;
                starts.push(starts.last().unwrap() + n);
            }
            let n_keys = 1 + rng.below(30) as u32;
            let n_pairs = *starts.last().unwrap() as usize;
            // Repeated keys within a list included (a repeated pair).
            let keys: Vec<u32> = (0..n_pairs)
                .map(|_| rng.below(n_keys as usize) as u32)
                .collect();
            check(&starts, &keys, [1, 2, 32, 64][round % 4]);
        }
    }

    #[test]
    fn same_key_lists_share_tiles_in_order() {
        // Targets 0, 2, 4 have keys {1, 5}; 1 and 3 have {2}; 5 none.
        let starts = [0u32, 2, 3, 5, 6, 8, 8];
        let keys = [5, 1, 2, 1, 5, 2, 1, 5];
        let t = check(&starts, &keys, 2);
        // Order: [] (5), then {1, 5} (0, 2, 4), then {2} (1, 3).
        assert_eq!(t.tile_targets, vec![5, 0, 2, 4, 1, 3]);
        assert_eq!(t.tile_key_offsets, vec![0, 2, 4, 5]);
        assert_eq!(t.keys, vec![1, 5, 1, 5, 2]);
        assert_eq!(t.key_pairs, vec![NONE, 1, NONE, 0, 3, 6, 4, 7, 2, 5]);
        assert_eq!(t.slots(), 10);
    }

    #[test]
    fn a_repeated_key_gets_a_second_row() {
        let starts = [0u32, 3, 4];
        let keys = [7, 7, 2, 7];
        let t = check(&starts, &keys, 2);
        assert_eq!(t.keys, vec![2, 7, 7]);
        assert_eq!(t.key_pairs, vec![2, NONE, 0, 3, 1, NONE]);
    }
}
