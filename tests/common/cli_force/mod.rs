//! Shared by the `hipkern force` program tests (tests/cli_force*.rs). What
//! the checks rest on is written here, independent of the library: a
//! SplitMix64 generator, a `.npy` writer and reader, and the float64
//! reference (a direct loop over edges, with compensated sums so that it is
//! the exact result to about one ulp). The program run is `HIPKERN_BIN`
//! when set (scripts/device-tests.sh points it at the device build), else
//! the one cargo built with these tests.
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
pub mod cases;
pub mod jobs;
pub mod npy;
pub mod program;
