//! Host allocations whose size comes from the caller's input: sized with
//! checked arithmetic, compared with what the machine has, and made
//! fallibly, so that a size too large for this machine is an
//! [`Error::HostMemory`] naming what needed how many bytes, never an abort
//! (Rust's allocator aborts the process when an infallible allocation
//! fails) and never a Linux OOM kill half-way through a run (overcommit
//! lets an allocation larger than the machine succeed until it is touched).
use crate::runtime::{Error, Result};

/// Bytes of `count` values of `T`, or an [`Error::HostMemory`] when that
/// overflows 64 bits (so it can never be allocated).
pub fn bytes_of<T>(count: u128, what: &dyn Fn() -> String) -> Result<u64> {
    count
        .checked_mul(std::mem::size_of::<T>() as u128)
        .and_then(|b| u64::try_from(b).ok())
        .ok_or_else(|| Error::HostMemory {
            what: what(),
            needed_bytes: u64::MAX,
            available_bytes: available_bytes(),
        })
}

/// Bytes this machine can still give: `MemAvailable` plus `SwapFree` from
/// `/proc/meminfo`; `None` where that cannot be read (not Linux).
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_available(&text)
}

/// `MemAvailable + SwapFree` (both in kB) of a `/proc/meminfo` text.
fn parse_available(meminfo: &str) -> Option<u64> {
    let field = |name: &str| -> Option<u64> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kb: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        kb.checked_mul(1024)
    };
    let available = field("MemAvailable:")?;
    Some(available.saturating_add(field("SwapFree:").unwrap_or(0)))
}

/// Refuses `needed` bytes for `what` when they exceed `available` (where
/// known).
fn check_against(needed: u64, available: Option<u64>, what: &dyn Fn() -> String) -> Result<()> {
    match available {
        Some(a) if needed > a => Err(Error::HostMemory {
            what: what(),
            needed_bytes: needed,
            available_bytes: Some(a),
        }),
        _ => Ok(()),
    }
}

/// Refuses `needed` bytes for `what` when the machine does not have them
/// available now.
pub fn check_available(needed: u64, what: &dyn Fn() -> String) -> Result<()> {
    check_against(needed, available_bytes(), what)
}

/// An empty vector with room for `count` values of `T`, checked against
/// the machine and reserved fallibly (`what` names it in the error).
pub fn reserve_vec<T>(count: usize, what: &dyn Fn() -> String) -> Result<Vec<T>> {
    let needed = bytes_of::<T>(count as u128, what)?;
    check_available(needed, what)?;
    let mut v = Vec::new();
    v.try_reserve_exact(count).map_err(|_| Error::HostMemory {
        what: what(),
        needed_bytes: needed,
        available_bytes: None,
    })?;
    Ok(v)
}

/// `count` copies of `value`, allocated only after the size was checked
/// against the machine, and fallibly.
pub fn filled_vec<T: Clone>(count: usize, value: T, what: &dyn Fn() -> String) -> Result<Vec<T>> {
    let mut v = reserve_vec(count, what)?;
    v.resize(count, value);
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> String {
        "the test's array".to_string()
    }

    #[test]
    fn meminfo_is_parsed() {
        let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2000 kB\n\
                    SwapTotal: 0 kB\nSwapFree:       1000 kB\n";
        assert_eq!(parse_available(text), Some(3000 * 1024));
        assert_eq!(parse_available("MemAvailable: 5 kB\n"), Some(5 * 1024));
        assert_eq!(parse_available("MemTotal: 5 kB\n"), None);
        assert_eq!(parse_available("MemAvailable: lots\n"), None);
    }

    #[test]
    fn a_size_beyond_the_machine_is_an_error_naming_it() {
        assert!(check_against(10, Some(10), &name).is_ok());
        assert!(check_against(10, None, &name).is_ok());
        let e = check_against(11, Some(10), &name).unwrap_err();
        assert_eq!(
            e,
            Error::HostMemory {
                what: name(),
                needed_bytes: 11,
                available_bytes: Some(10)
            }
        );
        assert!(e.to_string().contains("the test's array needs 11 bytes"));
        let overflow = bytes_of::<f64>(1u128 << 62, &name).unwrap_err();
        assert!(matches!(
            overflow,
            Error::HostMemory {
                needed_bytes: u64::MAX,
                ..
            }
        ));
        assert_eq!(bytes_of::<f64>(3, &name), Ok(24));
    }

    #[test]
    fn filled_vec_refuses_what_cannot_be_allocated() {
        assert_eq!(filled_vec(3, 1.5f64, &name).unwrap(), vec![1.5; 3]);
        // 2^61 float64: 16 EiB, beyond any machine.
        let e = filled_vec(1usize << 61, 0.0f64, &name).unwrap_err();
        assert!(matches!(e, Error::HostMemory { .. }), "{e}");
    }
}
