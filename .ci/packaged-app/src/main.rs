//! Uses the packaged hipkern as a dependent would: one force assembly on
//! the CPU (and on device 0 when there is one), checked against the
//! float64 reference; with `--features full`, a table through the cache.
use hipkern::force::{assemble_reference_f64, assemble_with_plan, CsrPlan, VirialSplit};
use std::process::ExitCode;

fn run() -> hipkern::Result<()> {
    println!("hipkern-sys platform: {}", hipkern::runtime::platform());
    // A ring of 5 atoms, each edge once in each direction.
    let n = 5;
    let (mut src, mut dst, mut g, mut r) = (vec![], vec![], vec![], vec![]);
    for k in 0..n as i32 {
        for (s, d) in [(k, (k + 1) % 5), ((k + 1) % 5, k)] {
            src.push(s);
            dst.push(d);
            let x = [0.1 * f64::from(s) - 0.2, 0.3, -0.05 * f64::from(d)];
            g.extend(x.map(|v| 2.0 * v));
            r.extend(x);
        }
    }
    let want = assemble_reference_f64(&g, &r, &src, &dst, n, None, VirialSplit::Half)?;
    let plan = CsrPlan::build(&src, &dst, n, None)?;
    let got = assemble_with_plan(&plan, &g, &r, VirialSplit::Half)?;
    let err = got
        .force
        .iter()
        .chain(&got.virial)
        .zip(want.force.iter().chain(&want.virial))
        .fold(0.0f64, |m, (a, b)| m.max((a - b).abs()));
    if !(err <= 1e-14) {
        return Err(hipkern::Error::InvalidInput(format!(
            "CPU assembly differs by {err:e}"
        )));
    }
    println!("cpu force assembly: matches the reference (max |diff| {err:.1e})");
    match hipkern::Device::new(0) {
        Ok(d) => println!("device 0: {}", d.properties().name),
        Err(e) => println!("no device: {e}"),
    }
    #[cfg(feature = "full")]
    {
        let dir = std::env::temp_dir().join(format!("hipkern-packaged-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| hipkern::Error::Io {
            action: "cannot create a scratch folder".into(),
            message: e.to_string(),
        })?;
        let cache = hipkern::nearfield::TableCache::open(&dir.join("cache.sqlite"))?;
        println!("table cache opened: {cache:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hipkern-packaged-app: {e}");
            ExitCode::from(1)
        }
    }
}
