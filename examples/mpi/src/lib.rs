//! What the three MPI examples share: the backend of a rank, collectives
//! over flat `f64`/`u64` arrays, and the comparison on rank 0.
use hipkern::Device;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

/// Where a rank runs hipkern: the GPU `rank % devices` (one rank per GPU)
/// when a device opens, else the CPU paths. `--cpu` forces the CPU.
pub enum Backend {
    Cpu,
    Device(Device),
}

impl Backend {
    pub fn choose(rank: i32) -> Backend {
        if std::env::args().any(|a| a == "--cpu") {
            return Backend::Cpu;
        }
        match hipkern::runtime::device_count() {
            Ok(n) if n > 0 => match Device::new(rank as usize % n) {
                Ok(d) => Backend::Device(d),
                Err(_) => Backend::Cpu,
            },
            _ => Backend::Cpu,
        }
    }

    pub fn name(&self) -> String {
        match self {
            Backend::Cpu => "cpu".into(),
            Backend::Device(d) => format!("device {} ({})", d.ordinal(), d.properties().name),
        }
    }
}

fn counts_and_displs(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}

/// Every rank's `data`, concatenated in rank order, on rank 0 (None elsewhere).
pub fn gather<T: Equivalence + Default + Clone>(
    world: &SimpleCommunicator,
    data: &[T],
) -> Option<Vec<T>> {
    let root = world.process_at_rank(0);
    let n = data.len() as Count;
    if world.rank() == 0 {
        let mut counts = vec![0 as Count; world.size() as usize];
        root.gather_into_root(&n, &mut counts[..]);
        let displs = counts_and_displs(&counts);
        let total: Count = counts.iter().sum();
        let mut all = vec![T::default(); total as usize];
        let mut part = PartitionMut::new(&mut all[..], counts, displs);
        root.gather_varcount_into_root(data, &mut part);
        Some(all)
    } else {
        root.gather_into(&n);
        root.gather_varcount_into(data);
        None
    }
}

/// Sends `to[p]` to rank `p`; returns what each rank sent here, by rank.
pub fn all_to_all<T: Equivalence + Default + Clone>(
    world: &SimpleCommunicator,
    to: &[Vec<T>],
) -> Vec<Vec<T>> {
    let size = world.size() as usize;
    let send_counts: Vec<Count> = to.iter().map(|v| v.len() as Count).collect();
    let mut recv_counts = vec![0 as Count; size];
    world.all_to_all_into(&send_counts[..], &mut recv_counts[..]);
    let send: Vec<T> = to.concat();
    let send_displs = counts_and_displs(&send_counts);
    let recv_displs = counts_and_displs(&recv_counts);
    let total: Count = recv_counts.iter().sum();
    let mut recv = vec![T::default(); total as usize];
    {
        let part = Partition::new(&send[..], send_counts, send_displs);
        let mut rpart = PartitionMut::new(&mut recv[..], recv_counts.clone(), recv_displs.clone());
        world.all_to_all_varcount_into(&part, &mut rpart);
    }
    (0..size)
        .map(|p| {
            let (d, c) = (recv_displs[p] as usize, recv_counts[p] as usize);
            recv[d..d + c].to_vec()
        })
        .collect()
}

/// max |got − want| / max |want| (NaN anywhere: infinite), and whether
/// the two are the same bits.
pub fn compare(got: &[f64], want: &[f64]) -> (f64, bool) {
    if got.len() != want.len() {
        return (f64::INFINITY, false);
    }
    let scale = want
        .iter()
        .fold(0.0f64, |m, x| m.max(x.abs()))
        .max(f64::MIN_POSITIVE);
    let mut err = 0.0f64;
    for (a, b) in got.iter().zip(want) {
        let d = (a - b).abs();
        err = if d.is_nan() {
            f64::INFINITY
        } else {
            err.max(d)
        };
    }
    let bitwise = got
        .iter()
        .zip(want)
        .all(|(a, b)| a.to_bits() == b.to_bits());
    (err / scale, bitwise)
}

/// Rank 0's verdict line; the exit status every rank returns (0 or 1),
/// broadcast from rank 0.
pub fn verdict(world: &SimpleCommunicator, what: &str, ok: Option<(bool, String)>) -> i32 {
    let mut status: i32 = 0;
    if let Some((good, detail)) = ok {
        println!("{what}: {detail}  {}", if good { "ok" } else { "MISMATCH" });
        status = if good { 0 } else { 1 };
    }
    world.process_at_rank(0).broadcast_into(&mut status);
    status
}

/// A rank's failure: printed with its rank, then every rank is aborted
/// (exit 2 for bad input, 1 for the machine, as the program's).
pub fn fail(world: &SimpleCommunicator, e: hipkern::Error) -> ! {
    eprintln!("rank {}: {e}", world.rank());
    let code = if matches!(e, hipkern::Error::InvalidInput(_)) {
        2
    } else {
        1
    };
    world.abort(code)
}
