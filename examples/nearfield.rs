//! Near-field tables and List 1 (`docs/design/nearfield.md`,
//! `docs/design/list1.md`) with the safe API: a 3D
//! Laplace q = 3 table built from its symmetry representatives only
//! (`ReducedTable`, about a second), its dense reconstruction
//! (`NearFieldTable`), a random 2:1-balanced octree (`BalancedTree`) and a
//! smooth density at every leaf's nodes.
//!
//! The CPU float64 evaluator (`evaluate_list1`) is the reference. With a
//! device (`Device::new(0)` succeeds) the device evaluator
//! (`List1Evaluator`) runs in the dense layout and in the arithmetic ORBIT
//! layout (compact rows, no full-entry maps on the device), under the
//! fast contract (the default: within 1e−13 of the CPU's result, the
//! fastest kernel for the tree) and the exact one (bitwise the CPU's),
//! each compared with the reference and naming the kernel its plan chose.
//! Without one, the CPU result alone. Either way the
//! table is checked against a closed form: the self case's entries summed
//! over the source modes at the box centre are the potential of the unit
//! cube at its centre, (3 ln(2+√3) − π/2)/(4π).
//!
//!     cargo run --release --example nearfield
//!
//! Exit status 0 when every check holds, 1 on a mismatch, 2 when a call
//! fails.
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Contract, List1Evaluator,
    List1Layout, List1ReducedTables, List1Tables, RandomTreeConfig, ReducedTable,
};
use hipkern::{Device, Result};
use std::f64::consts::PI;
use std::process::ExitCode;
use std::time::Instant;

const DIM: usize = 3;
const Q: usize = 3;
const MAX_LEVEL: u32 = 4;
/// Relative max-norm error accepted against the CPU evaluator: the fast
/// contract's bound (the exact one must also be bitwise equal).
const TOL: f64 = 1e-13;

/// ‖a − b‖∞ / ‖b‖∞ and whether a and b are bitwise equal.
fn compare(a: &[f64], b: &[f64]) -> (f64, bool) {
    let scale = b.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let mut err = 0.0f64;
    for (x, y) in a.iter().zip(b) {
        let e = (x - y).abs();
        err = if e.is_nan() { f64::NAN } else { err.max(e) };
        if err.is_nan() {
            break;
        }
    }
    let bitwise = a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits());
    (err / scale, bitwise)
}

fn run() -> Result<bool> {
    let kernel = Kernel::laplace(DIM)?;
    let quad = EntryQuadrature::default();
    let t0 = Instant::now();
    let reduced = ReducedTable::build(&kernel, Q, 1.0, &quad)?;
    let dense = reduced.to_dense()?;
    println!(
        "nearfield: 3D Laplace q={Q} table, {} full entries from {} representatives, built in {:.2} s",
        reduced.n_full_entries(),
        reduced.reduced_entry_ids().len(),
        t0.elapsed().as_secs_f64()
    );

    // The closed form: Σ_s T[self, s, centre] = ∫_{[0,1]^3} G(centre − y) dy.
    let centre = (Q.pow(DIM as u32) - 1) / 2; // node (1, 1, 1) of q = 3
    let self_case = dense.cases().self_case();
    let mut sum = 0.0;
    for s in 0..dense.n_modes() {
        sum += dense.get(self_case, s, centre)?;
    }
    let exact = (3.0 * (2.0 + 3f64.sqrt()).ln() - PI / 2.0) / (4.0 * PI);
    let table_err = ((sum - exact) / exact).abs();
    let mut ok = table_err <= 1e-12;
    println!(
        "  table: sum_s T[self, s, centre] = {sum:.17}, closed form {exact:.17}, rel err {table_err:.1e}  {}",
        if table_err <= 1e-12 { "ok" } else { "MISMATCH" }
    );

    // A random 2:1 octree on [0, 1]^3, every leaf a target box.
    let tree = BalancedTree::random(&RandomTreeConfig::new(DIM, 7, MAX_LEVEL))?;
    let targets = tree.all_boxes();
    let boxes = tree.list1_boxes(&targets);
    let nq = dense.n_modes();
    let points = tree.box_points(Q)?;
    let density: Vec<f64> = points
        .chunks(DIM)
        .map(|x| {
            let r2: f64 = x.iter().map(|v| (v - 0.5) * (v - 0.5)).sum();
            (1.0 + x[0] - x[1] / 2.0 + x[2] / 4.0) * (-4.0 * r2).exp()
        })
        .collect();
    println!(
        "  tree: {} leaves (levels up to {}), {} List 1 pairs",
        tree.n_boxes(),
        tree.max_level(),
        tree.list1_sources().len()
    );

    let t0 = Instant::now();
    let want = evaluate_list1(&boxes, &List1Tables::Scaled(&dense), &density)?;
    let norm = want.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    println!(
        "  cpu evaluator: {} target points, max|u| = {norm:.6e}, {:.3} s",
        want.len(),
        t0.elapsed().as_secs_f64()
    );
    assert_eq!(want.len(), tree.n_boxes() * nq);

    match Device::new(0) {
        Ok(device) => {
            println!("device 0: {}", device.properties().name);
            let stream = device.new_stream()?;
            let evaluators = [
                List1Evaluator::from_tables(
                    &device,
                    &List1Tables::Scaled(&dense),
                    List1Layout::Dense,
                )?,
                List1Evaluator::from_reduced(
                    &device,
                    &List1ReducedTables::Scaled(&reduced),
                    List1Layout::Orbit,
                )?,
            ];
            for mut ev in evaluators {
                for contract in [List1Contract::Fast, List1Contract::Exact] {
                    ev.set_contract(contract);
                    // A plan kept for many densities (evaluate() alone
                    // plans for one evaluation: the device-built exact one).
                    let mut plan = ev.plan(&boxes)?;
                    let kernel = plan.kernel();
                    let got = ev.evaluate_plan(&stream, &mut plan, &density)?;
                    let (err, bitwise) = compare(&got, &want);
                    // Exact promises the CPU's bits; fast its value within 1e-13.
                    let good = err <= TOL && (contract == List1Contract::Fast || bitwise);
                    ok &= good;
                    println!(
                        "  device {:<5} {contract:<5} {kernel:<10} ({:>7} bytes uploaded): rel err {err:.2e}, bitwise equal: {}  {}",
                        ev.layout().name(),
                        ev.upload_bytes().total(),
                        if bitwise { "yes" } else { "no" },
                        if good { "ok" } else { "MISMATCH" }
                    );
                }
            }
        }
        Err(e) => println!("no device ({e}): the CPU evaluator only"),
    }
    Ok(ok)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => {
            println!("nearfield: OK");
            ExitCode::SUCCESS
        }
        Ok(false) => {
            println!("nearfield: MISMATCH");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("nearfield: error: {e}");
            ExitCode::from(2)
        }
    }
}
