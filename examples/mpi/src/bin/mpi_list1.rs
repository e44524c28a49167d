//! List 1 with the target boxes split across ranks: every rank holds the
//! tree, the table and the density (as an FMM's ranks hold their part of a
//! distributed tree and its near field), evaluates List 1 for a contiguous
//! share of the target boxes, cut to balance the pairs, and rank 0 gathers
//! the potentials in target order and compares them with one rank
//! evaluating every target: bitwise, on the CPU and under the device's
//! `Exact` contract.
//!
//!     mpirun -np 4 mpi_list1 [--cpu]
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Boxes, List1Contract,
    List1Evaluator, List1Layout, List1Tables, NearFieldTable, RandomTreeConfig, ReducedTable,
};
use hipkern::Result;
use hipkern_mpi_examples::{compare, fail, gather, verdict, Backend};
use mpi::traits::*;

const Q: usize = 3;

fn evaluate(
    backend: &Backend,
    table: &NearFieldTable,
    boxes: &List1Boxes<'_>,
    f: &[f64],
) -> Result<Vec<f64>> {
    match backend {
        Backend::Cpu => evaluate_list1(boxes, &List1Tables::Scaled(table), f),
        Backend::Device(d) => {
            let mut ev =
                List1Evaluator::from_tables(d, &List1Tables::Scaled(table), List1Layout::Dense)?;
            ev.set_contract(List1Contract::Exact);
            let stream = d.new_stream()?;
            ev.evaluate(&stream, boxes, f)
        }
    }
}

fn main() {
    let universe = mpi::initialize().expect("MPI");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let backend = Backend::choose(world.rank());
    let setup = (|| -> Result<_> {
        let kernel = Kernel::laplace(3)?;
        let table =
            ReducedTable::build(&kernel, Q, 1.0, &EntryQuadrature::default())?.to_dense()?;
        let tree = BalancedTree::random(&RandomTreeConfig::new(3, 11, 5))?;
        let points = tree.box_points(Q)?;
        let f: Vec<f64> = points
            .chunks(3)
            .map(|x| {
                (1.0 + x[0] - x[1] / 2.0)
                    * (-4.0 * ((x[0] - 0.4).powi(2) + (x[2] - 0.6).powi(2))).exp()
            })
            .collect();
        Ok((table, tree, f))
    })();
    let (table, tree, f) = setup.unwrap_or_else(|e| fail(&world, e));
    let (starts, sources) = (tree.list1_starts(), tree.list1_sources());
    let n = tree.n_boxes();

    // Targets a .. b of this rank: about an equal share of the pairs.
    let cut = |r: usize| {
        let goal = (sources.len() * r / size) as u32;
        starts.partition_point(|&s| s < goal).min(n)
    };
    let (a, b) = (cut(rank), cut(rank + 1));
    let targets: Vec<u32> = (a as u32..b as u32).collect();
    let offset = starts[a];
    let source_starts: Vec<u32> = starts[a..=b].iter().map(|s| s - offset).collect();
    let boxes = List1Boxes {
        dim: 3,
        root_extent: tree.root_extent(),
        centers: tree.centers(),
        levels: tree.levels(),
        target_boxes: &targets,
        source_starts: &source_starts,
        source_boxes: &sources[starts[a] as usize..starts[b] as usize],
    };
    let mine = evaluate(&backend, &table, &boxes, &f).unwrap_or_else(|e| fail(&world, e));
    let shares = gather(
        &world,
        &[targets.len() as u64, (starts[b] - starts[a]) as u64],
    );
    let all = gather(&world, &mine);
    let check = match (all, shares) {
        (Some(all), Some(shares)) => {
            let every: Vec<u32> = (0..n as u32).collect();
            let want = evaluate(&backend, &table, &tree.list1_boxes(&every), &f)
                .unwrap_or_else(|e| fail(&world, e));
            let (err, bitwise) = compare(&all, &want);
            Some((
                bitwise,
                format!(
                    "{size} ranks ({}), {n} target boxes, {} pairs, (targets, pairs) per rank {:?}: \
                     rel err {err:.1e}, bitwise {bitwise} vs one rank",
                    backend.name(),
                    sources.len(),
                    shares.chunks(2).map(|c| (c[0], c[1])).collect::<Vec<_>>()
                ),
            ))
        }
        _ => None,
    };
    let status = verdict(&world, "mpi_list1", check);
    drop(universe); // MPI_Finalize before the exit status
    std::process::exit(status);
}
