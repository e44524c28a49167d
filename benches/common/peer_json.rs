//! The flat JSON records the torch peers write (scripts/force_torch_peer.py,
//! scripts/psf_torch_peer.py): `{"key": number, ...}`; values that are not
//! numbers are skipped.

/// A peer's numbers by key.
pub struct Peer(Vec<(String, f64)>);

impl Peer {
    /// The number under `k`, if the record has one.
    pub fn get(&self, k: &str) -> Option<f64> {
        self.0.iter().find(|(n, _)| n == k).map(|(_, v)| *v)
    }
}

/// The numeric fields of a flat JSON record.
pub fn parse(s: &str) -> Peer {
    let body = s.trim().trim_start_matches('{').trim_end_matches('}');
    Peer(
        body.split(',')
            .filter_map(|kv| {
                let (k, v) = kv.split_once(':')?;
                Some((
                    k.trim().trim_matches('"').to_string(),
                    v.trim().parse().ok()?,
                ))
            })
            .collect(),
    )
}
