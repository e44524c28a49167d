//! `hipkern nearfield list1`: List 1 of a density over a generated 2:1
//! tree (`docs/design/list1.md`), on the device in one of the three table
//! layouts, or on the CPU; always compared with the float64 CPU evaluator
//! over the same table values.
//!
//! - The tree: `random:SEED:LEVELS` ([`BalancedTree::random`] with
//!   [`RandomTreeConfig::new`]'s defaults: root `[0, 1]^D`, every box
//!   above level 2 refined, three attractors, 10 % random refinement) or
//!   `uniform:LEVEL`. Every leaf is a target box with its List 1 list.
//! - The density, unless `--density` gives the values: at each node `x` of
//!   each leaf, `f(x) = (1 + x₀ − x₁/2 [+ x₂/4]) · exp(−4 |x − c|²)`, `c`
//!   the root's centre (smooth, not symmetric, no zero rows).
//! - The tables: `--layout dense` builds the dense table; `orbit` and
//!   `fallback` build the symmetry-reduced table (representatives only)
//!   and upload its compact rows with that layout's descriptors. The CPU
//!   reference uses the same values (the reduced table expanded). Yukawa
//!   has no scaling rule: one table per source level, built at that
//!   level's box side.
//! - Output: the potential's max-norm and 2-norm, the relative max-norm
//!   difference from the CPU evaluator, the times.
use super::nearfield::{check_table_flags_sized, List1Args};
use super::npy::read_rows;
use super::npz::{write_npy, write_npz, NpyArray, NpyData};
use super::output::OutputSet;
use super::Failure;
use hipkern::nearfield::{
    evaluate_list1, BalancedTree, EntryQuadrature, Kernel, List1Tables, NearFieldTable,
    RandomTreeConfig, ReducedTable, ScalingRule,
};
use std::time::Instant;

/// The parsed `--tree`.
enum TreeSpec {
    Random { seed: u64, levels: u32 },
    Uniform { level: u32 },
}

fn parse_tree(s: &str) -> Result<TreeSpec, Failure> {
    let bad = || {
        Failure::bad_input(format!(
            "--tree '{s}': expected random:SEED:LEVELS or uniform:LEVEL"
        ))
    };
    let parts: Vec<&str> = s.split(':').collect();
    match parts.as_slice() {
        ["random", seed, levels] => Ok(TreeSpec::Random {
            seed: seed.parse().map_err(|_| bad())?,
            levels: levels.parse().map_err(|_| bad())?,
        }),
        ["uniform", level] => Ok(TreeSpec::Uniform {
            level: level.parse().map_err(|_| bad())?,
        }),
        _ => Err(bad()),
    }
}

/// Which layout the device uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LayoutFlag {
    Dense,
    Orbit,
    Fallback,
}

/// The smooth default density (module docs) at a point.
pub(super) fn default_density(x: &[f64]) -> f64 {
    let coeff = [1.0, -0.5, 0.25];
    let lin: f64 = 1.0 + x.iter().zip(coeff).map(|(a, c)| a * c).sum::<f64>();
    let r2: f64 = x.iter().map(|a| (a - 0.5) * (a - 0.5)).sum();
    lin * (-4.0 * r2).exp()
}

/// The tables of every level a source box has (one for a kernel that
/// scales), and the reduced tables behind them for the symmetric layouts.
struct Tables {
    dense: Vec<NearFieldTable>,
    reduced: Vec<ReducedTable>,
    per_level: bool,
}

fn build_tables(
    kernel: &Kernel,
    q: usize,
    extent: f64,
    tree: &BalancedTree,
    layout: LayoutFlag,
) -> Result<Tables, Failure> {
    let quad = EntryQuadrature::default();
    let per_level = ScalingRule::of(kernel).is_err();
    let extents: Vec<f64> = if per_level {
        (0..=tree.max_level())
            .map(|l| tree.root_extent() / f64::from(1u32 << l))
            .collect()
    } else {
        vec![extent]
    };
    // Only the levels some leaf has are built; the others hold a copy of
    // a built one (never read: no source box has that level).
    let used = |l: usize| !per_level || tree.levels().iter().any(|&x| x as usize == l);
    let mut built: Vec<Option<(NearFieldTable, Option<ReducedTable>)>> = Vec::new();
    for (level, &l) in extents.iter().enumerate() {
        built.push(if !used(level) {
            None
        } else if layout == LayoutFlag::Dense {
            Some((NearFieldTable::build(kernel, q, l, &quad)?, None))
        } else {
            let r = ReducedTable::build(kernel, q, l, &quad)?;
            let t = r.to_dense()?;
            Some((t, Some(r)))
        });
    }
    let any = built
        .iter()
        .flatten()
        .next()
        .cloned()
        .ok_or_else(|| Failure::bad_input("the tree has no leaves"))?;
    let (dense, reduced): (Vec<_>, Vec<_>) = built
        .into_iter()
        .map(|b| b.unwrap_or_else(|| any.clone()))
        .unzip();
    let reduced: Vec<ReducedTable> = reduced.into_iter().flatten().collect();
    Ok(Tables {
        dense,
        reduced,
        per_level,
    })
}

fn norms(u: &[f64]) -> (f64, f64) {
    let max = u.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let two = u.iter().map(|x| x * x).sum::<f64>().sqrt();
    (max, two)
}

/// Runs the subcommand; the report's lines.
pub(super) fn execute(a: &List1Args) -> Result<Vec<String>, Failure> {
    let kernel = check_table_flags_sized(&a.table)?;
    let (d, q) = (a.table.dim, a.table.q);
    let spec = parse_tree(&a.tree)?;
    let layout = match a.layout.as_str() {
        "dense" => LayoutFlag::Dense,
        "orbit" => LayoutFlag::Orbit,
        "fallback" => LayoutFlag::Fallback,
        other => {
            return Err(Failure::bad_input(format!(
                "unknown --layout '{other}' (dense, orbit or fallback)"
            )))
        }
    };
    let on_device = match a.backend.as_str() {
        "device" => true,
        "cpu" => false,
        other => {
            return Err(Failure::bad_input(format!(
                "unknown --backend '{other}' (device or cpu)"
            )))
        }
    };
    let contract = a
        .contract
        .parse::<hipkern::nearfield::List1Contract>()
        .map_err(|e| Failure::bad_input(format!("--contract: {e}")))?;
    if layout == LayoutFlag::Orbit {
        // Refused before any work: the arithmetic path models scalar and
        // axis-derivative groups only.
        hipkern::nearfield::OrbitDescriptors::build(&kernel, q)
            .map_err(|e| Failure::bad_input(format!("--layout orbit: {e}")))?;
    }
    // Every output planned (and checked against --density and each other)
    // before any work: one set, written all or none at the end.
    let mut set = OutputSet::new();
    if let Some(p) = &a.density {
        set.input("--density", p)?;
    }
    let tree_out = match &a.tree_out {
        Some(p) => Some(set.output("--tree-out", p)?),
        None => None,
    };
    let out = match &a.out {
        Some(p) => Some(set.output("--out", p)?),
        None => None,
    };
    let tree = match spec {
        TreeSpec::Random { seed, levels } => {
            BalancedTree::random(&RandomTreeConfig::new(d, seed, levels))?
        }
        TreeSpec::Uniform { level } => BalancedTree::uniform(d, level, &vec![0.0; d], 1.0)?,
    };
    let nq = q.pow(d as u32);
    let n = tree.n_boxes();
    let points = tree.box_points(q)?;
    let density: Vec<f64> = match &a.density {
        Some(path) => {
            let rows = read_rows("--density", path, nq)?;
            if rows.n_rows != n {
                return Err(Failure::bad_input(format!(
                    "--density {} has {} rows; the tree has {n} leaves (shape must be ({n}, {nq}))",
                    path.display(),
                    rows.n_rows
                )));
            }
            let values = rows.values.as_f64().into_owned();
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(Failure::bad_input(format!(
                    "--density {}: value [{}, {}] is {}; the density must be finite",
                    path.display(),
                    i / nq,
                    i % nq,
                    values[i]
                )));
            }
            values
        }
        None => points.chunks_exact(d).map(default_density).collect(),
    };
    let mut lines = vec![format!(
        "tree: {}, {n} leaves, levels {}..={}, {} List 1 pairs; {} points",
        a.tree,
        tree.levels().iter().min().unwrap_or(&0),
        tree.max_level(),
        tree.list1_sources().len(),
        n * nq
    )];
    let start = Instant::now();
    let tables = build_tables(&kernel, q, a.table.extent, &tree, layout)?;
    lines.push(format!(
        "tables: {} {} table{} built in {:.2} s",
        tables.dense.len(),
        if layout == LayoutFlag::Dense {
            "dense"
        } else {
            "symmetry-reduced"
        },
        if tables.dense.len() == 1 {
            ""
        } else {
            "s (one per level)"
        },
        start.elapsed().as_secs_f64()
    ));
    let targets = tree.all_boxes();
    let boxes = tree.list1_boxes(&targets);
    let list1_tables = if tables.per_level {
        List1Tables::PerLevel(&tables.dense)
    } else {
        List1Tables::Scaled(&tables.dense[0])
    };
    let start = Instant::now();
    let reference = evaluate_list1(&boxes, &list1_tables, &density)?;
    let cpu_seconds = start.elapsed().as_secs_f64();
    let (u, backend_line) = if on_device {
        // Opened here, after every input is checked (bad inputs stay exit
        // status 2 on a machine without a device).
        let device = super::open_device("--backend device", "use --backend cpu")?;
        let (u, line, _) = super::list1_device::evaluate(
            &device,
            &boxes,
            &tables.dense,
            &tables.reduced,
            tables.per_level,
            layout,
            contract,
            &density,
        )?;
        (u, line)
    } else {
        (
            reference.clone(),
            format!("backend cpu: float64 CPU evaluator, {cpu_seconds:.3} s"),
        )
    };
    lines.push(backend_line);
    let (max, two) = norms(&u);
    // A value the device left unwritten (NaN) reads as an infinite
    // difference, never as agreement.
    let (diff, rel) = super::max_difference(&u, &reference);
    lines.push(format!("norm: max {max:.16e}, 2-norm {two:.16e}"));
    lines.push(format!(
        "difference from the CPU evaluator ({cpu_seconds:.3} s): max abs {diff:.3e}, relative (max-norm) {rel:.3e}"
    ));
    let bad = u.iter().filter(|v| !v.is_finite()).count();
    if bad > 0 {
        // Finite tables and density give a finite potential: a value that
        // is not is the machine's failure, and is not written.
        return Err(Failure::environment(format!(
            "the potential has {bad} values that are not finite (of {}); nothing was written",
            u.len()
        )));
    }
    if let (Some(id), Some(path)) = (tree_out, &a.tree_out) {
        let extents: Vec<f64> = (0..n).map(|b| tree.box_extent(b)).collect();
        let (dim_v, q_v, root_v) = ([d as i64], [q as i64], [tree.root_extent()]);
        let arrays = [
            NpyArray {
                name: "centers",
                shape: vec![n, d],
                data: NpyData::F64(tree.centers()),
            },
            NpyArray {
                name: "extents",
                shape: vec![n],
                data: NpyData::F64(&extents),
            },
            NpyArray {
                name: "levels",
                shape: vec![n],
                data: NpyData::U32(tree.levels()),
            },
            NpyArray {
                name: "list1_starts",
                shape: vec![tree.list1_starts().len()],
                data: NpyData::U32(tree.list1_starts()),
            },
            NpyArray {
                name: "list1_sources",
                shape: vec![tree.list1_sources().len()],
                data: NpyData::U32(tree.list1_sources()),
            },
            NpyArray {
                name: "points",
                shape: vec![n, nq, d],
                data: NpyData::F64(&points),
            },
            NpyArray {
                name: "root_lower",
                shape: vec![d],
                data: NpyData::F64(tree.root_lower()),
            },
            NpyArray {
                name: "root_extent",
                shape: vec![],
                data: NpyData::F64(&root_v),
            },
            NpyArray {
                name: "dim",
                shape: vec![],
                data: NpyData::I64(&dim_v),
            },
            NpyArray {
                name: "q",
                shape: vec![],
                data: NpyData::I64(&q_v),
            },
            NpyArray {
                name: "density",
                shape: vec![n, nq],
                data: NpyData::F64(&density),
            },
        ];
        set.stage(id, |w| write_npz(w, &arrays))?;
        lines.push(format!("wrote {}", path.display()));
    }
    if let (Some(id), Some(path)) = (out, &a.out) {
        set.stage(id, |w| write_npy(w, &[n, nq], &NpyData::F64(&u)))?;
        lines.push(format!("wrote {}", path.display()));
    }
    set.commit()?;
    Ok(lines)
}
