//! Raw bindings of `hipkern.h`, the C ABI of hipkern's kernel layer.
//!
//! Everything here is `unsafe` and mirrors the header one to one; the safe
//! API is the `hipkern` crate. The bindings are committed
//! (`src/bindings.rs`); the `bindgen` feature regenerates them from the
//! header into OUT_DIR and uses those instead, and its test checks that the
//! committed file is identical.
//!
//! On the `cpu` platform the same symbols exist (host stubs from
//! `hip/cpu_stub.c`) and return `HIPKERN_ERROR_NO_TOOLCHAIN`.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
#![allow(clippy::all)]
// The bindings carry the header's C comments as docs; their `a[i]` index
// notation is not a rustdoc link.
#![allow(rustdoc::broken_intra_doc_links)]

#[cfg(not(feature = "bindgen"))]
mod bindings;
#[cfg(not(feature = "bindgen"))]
pub use bindings::*;

#[cfg(feature = "bindgen")]
mod bindings {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
#[cfg(feature = "bindgen")]
pub use bindings::*;

/// The platform this crate was built for: "amd", "nvidia" or "cpu".
pub const PLATFORM: &str = env!("HIPKERN_SYS_PLATFORM");

#[cfg(test)]
#[path = "../build_support.rs"]
#[allow(dead_code)]
mod build_support;

#[cfg(test)]
mod build_support_tests;

#[cfg(all(test, feature = "bindgen"))]
mod bindings_are_current {
    #[test]
    fn committed_bindings_match_the_header() {
        let generated = include_str!(concat!(env!("OUT_DIR"), "/bindings.rs"));
        let committed = include_str!("bindings.rs");
        assert!(
            generated == committed,
            "sys/src/bindings.rs is stale: regenerate it with \
             `cargo build -p hipkern-sys --features bindgen` and copy OUT_DIR/bindings.rs"
        );
    }
}
