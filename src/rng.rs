//! A small seeded generator (SplitMix64) for fixtures, tests and
//! benchmarks: reproducible from its seed on every platform, no
//! dependency. Not for cryptography.

/// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state advanced by the
/// golden-ratio increment and mixed by two multiply-xorshift rounds.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator with this seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// A generator seeded from the clock (fresh inputs per test run); the
    /// seed is printed to stderr so a failing run can be repeated.
    pub fn from_clock() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x5EED);
        eprintln!("SplitMix64 seed {t}");
        SplitMix64(t)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (n > 0; the modulo bias is below 2⁻³² for n < 2³²).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform in `[-1, 1)` with 53 random bits.
    pub fn uniform_pm1(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}
