//! Shared by the `hipkern nearfield` program tests (tests/cli_nearfield*.rs):
//! the program to run, and the .npz members it writes, read back with
//! ndarray-npy (an independent reader).
// Not every test binary that includes the common module uses these.
#![allow(dead_code)]
use std::ffi::OsString;
use std::process::Command;

pub fn bin() -> OsString {
    std::env::var_os("HIPKERN_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_hipkern").into())
}

/// The members of a .npz written by `hipkern nearfield build`, by name.
pub fn npz_members(path: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    use std::io::Read;
    let mut zip = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = std::collections::BTreeMap::new();
    for i in 0..zip.len() {
        let mut f = zip.by_index(i).unwrap();
        let mut bytes = Vec::new();
        f.read_to_end(&mut bytes).unwrap();
        out.insert(f.name().to_string(), bytes);
    }
    out
}

pub fn run_nearfield(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    Command::new(bin())
        .current_dir(dir)
        .arg("nearfield")
        .args(args)
        .output()
        .expect("run hipkern")
}

pub fn stdout_of(o: &std::process::Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what}: exit {:?}: {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

pub fn read_npz_f64(m: &std::collections::BTreeMap<String, Vec<u8>>, name: &str) -> Vec<f64> {
    use ndarray_npy::ReadNpyExt;
    ndarray::ArrayD::<f64>::read_npy(m[name].as_slice())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_raw_vec_and_offset()
        .0
}

pub fn read_npz<T: ndarray_npy::ReadableElement>(
    m: &std::collections::BTreeMap<String, Vec<u8>>,
    name: &str,
) -> Vec<T> {
    use ndarray_npy::ReadNpyExt;
    ndarray::ArrayD::<T>::read_npy(m[name].as_slice())
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .into_raw_vec_and_offset()
        .0
}
