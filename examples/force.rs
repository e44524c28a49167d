//! Force/virial assembly (`docs/design/force.md`) with the safe API, on a small generated
//! system: a few frames of atoms in a box, a neighbour list within each
//! frame, per-edge gradients of a Gaussian pair energy.
//!
//! With a device (`Device::new(0)` succeeds): the CSR plan is built on the
//! device (stable counting sort) and compared with the host plan, then the
//! atomic-free assembly runs on float64 and on float32 inputs, each compared
//! with the float64 CPU reference (a direct edge loop). Without one: the
//! plan-based CPU reduction against the same reference. Per-frame virial
//! totals (and LAMMPS' Voigt 6) are printed either way.
//!
//!     cargo run --release --example force
//!
//! Exit status 0 when every comparison holds, 1 on a mismatch, 2 when a call
//! fails.
use hipkern::force::{
    assemble_device, assemble_reference_f64, assemble_with_plan, frame_virials, voigt, Assembly,
    CsrPlan, DevicePlan, Frames, VirialSplit,
};
use hipkern::rng::SplitMix64;
use hipkern::{Device, Result};
use std::process::ExitCode;

const FRAMES: usize = 4;
const ATOMS_PER_FRAME: usize = 800;
const NEIGHBOURS: usize = 32;
const BOX_SIDE: f64 = 12.0;
/// Relative max-norm error (‖out − ref‖∞ / ‖ref‖∞) accepted: the device sums
/// in float64 in plan order, the reference in edge order.
const TOL: f64 = 1e-12;

/// Edges (src, dst), gradients g = dE/d(edge_vec) and edge vectors
/// r_src − r_dst of E = Σ_e exp(−|edge_vec_e|²/4), frames of atoms laid
/// end to end (atom k of frame f is row f·ATOMS_PER_FRAME + k).
struct System {
    src: Vec<i32>,
    dst: Vec<i32>,
    g: Vec<f64>,
    edge_vec: Vec<f64>,
}

fn system(rng: &mut SplitMix64) -> System {
    let n = FRAMES * ATOMS_PER_FRAME;
    let pos: Vec<f64> = (0..3 * n)
        .map(|_| 0.5 * BOX_SIDE * (1.0 + rng.uniform_pm1()))
        .collect();
    let (mut src, mut dst, mut g, mut edge_vec) = (vec![], vec![], vec![], vec![]);
    for f in 0..FRAMES {
        for k in 0..ATOMS_PER_FRAME {
            let d = f * ATOMS_PER_FRAME + k;
            for _ in 0..rng.below(NEIGHBOURS + 1) {
                let s = f * ATOMS_PER_FRAME + rng.below(ATOMS_PER_FRAME);
                if s == d {
                    continue;
                }
                let r: Vec<f64> = (0..3).map(|a| pos[3 * s + a] - pos[3 * d + a]).collect();
                let e = (-(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]) / 4.0).exp();
                src.push(s as i32);
                dst.push(d as i32);
                g.extend(r.iter().map(|x| -0.5 * x * e));
                edge_vec.extend(r);
            }
        }
    }
    System {
        src,
        dst,
        g,
        edge_vec,
    }
}

/// ‖a − b‖∞ / ‖b‖∞ (NaN anywhere gives NaN, so a poisoned value fails).
fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let err = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f64, |m, e| {
            if e.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(e)
            }
        });
    err / scale
}

/// Prints one comparison; true when it holds.
fn report(what: &str, got: &Assembly, want: &Assembly) -> bool {
    let (ef, ew) = (
        rel_err(&got.force, &want.force),
        rel_err(&got.virial, &want.virial),
    );
    let ok = ef <= TOL && ew <= TOL;
    println!(
        "  {what:<34} force rel err {ef:.2e}, virial rel err {ew:.2e}  {}",
        if ok { "ok" } else { "MISMATCH" }
    );
    ok
}

fn run() -> Result<bool> {
    let mut rng = SplitMix64::new(2026);
    let sys = system(&mut rng);
    let n = FRAMES * ATOMS_PER_FRAME;
    let split = VirialSplit::Half;
    println!(
        "force: {FRAMES} frames x {ATOMS_PER_FRAME} atoms, {} edges, virial split {split:?}",
        sys.src.len()
    );
    let want = assemble_reference_f64(&sys.g, &sys.edge_vec, &sys.src, &sys.dst, n, None, split)?;
    let plan = CsrPlan::build(&sys.src, &sys.dst, n, None)?;
    let mut ok = true;

    let got = match Device::new(0) {
        Ok(device) => {
            println!("device 0: {}", device.properties().name);
            let stream = device.new_stream()?;
            // The plan built on the device from the endpoint indices.
            let dplan = DevicePlan::build_from_host(&stream, &sys.src, &sys.dst, n, None)?;
            let same = dplan.to_host()? == plan;
            println!(
                "  device plan = host plan: {}",
                if same { "yes" } else { "NO (MISMATCH)" }
            );
            ok &= same;
            // float64 inputs.
            let (g, r) = (device.htod_copy(&sys.g)?, device.htod_copy(&sys.edge_vec)?);
            let (f_d, w_d) = assemble_device(&stream, &dplan, &g, &r, split)?;
            stream.synchronize()?;
            let got = Assembly {
                force: f_d.to_vec()?,
                virial: w_d.to_vec()?,
            };
            ok &= report("device, f64 inputs vs reference:", &got, &want);
            // float32 inputs (float64 sums and outputs), against the
            // reference over the same float32 values.
            let g32: Vec<f32> = sys.g.iter().map(|&x| x as f32).collect();
            let r32: Vec<f32> = sys.edge_vec.iter().map(|&x| x as f32).collect();
            let want32 = assemble_reference_f64(&g32, &r32, &sys.src, &sys.dst, n, None, split)?;
            let (g, r) = (device.htod_copy(&g32)?, device.htod_copy(&r32)?);
            let (f_d, w_d) = assemble_device(&stream, &dplan, &g, &r, split)?;
            stream.synchronize()?;
            let got32 = Assembly {
                force: f_d.to_vec()?,
                virial: w_d.to_vec()?,
            };
            ok &= report("device, f32 inputs vs reference:", &got32, &want32);
            got
        }
        Err(e) => {
            println!("no device ({e}): the CPU plan-based reduction instead");
            let got = assemble_with_plan(&plan, &sys.g, &sys.edge_vec, split)?;
            ok &= report("cpu plan reduction vs reference:", &got, &want);
            got
        }
    };

    // Per-frame totals of the per-atom virial; Newton's third law makes each
    // frame's total force zero.
    let totals = frame_virials(&got.virial, Frames::Size(ATOMS_PER_FRAME))?;
    for (f, w) in totals.iter().enumerate() {
        let rows = f * ATOMS_PER_FRAME..(f + 1) * ATOMS_PER_FRAME;
        let fsum: Vec<f64> = (0..3)
            .map(|a| rows.clone().map(|k| got.force[3 * k + a]).sum())
            .collect();
        let v = voigt(w);
        println!(
            "  frame {f}: virial (xx yy zz xy xz yz) = {:.6e} {:.6e} {:.6e} {:.6e} {:.6e} {:.6e}; \
             |sum F| = {:.1e}",
            v[0],
            v[1],
            v[2],
            v[3],
            v[4],
            v[5],
            fsum.iter().fold(0.0f64, |m, x| m.max(x.abs()))
        );
    }
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => {
            println!("force: OK");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("force: MISMATCH");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("force: error: {e}");
            ExitCode::from(2)
        }
    }
}
