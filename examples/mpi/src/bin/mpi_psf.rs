//! A PSF frame split into horizontal bands, one per rank: every rank takes
//! the events whose support reaches its band (a lensed star field, the
//! same on every rank, with bright stars through the direct path), renders
//! them into a sink of its band's size (events shifted by the band's first
//! row), and rank 0 gathers the bands, row order being rank order, and
//! compares the frame with one rank rendering it whole (within rounding:
//! 1e-12 of the peak; the chunks' cached/direct order differs).
//!
//!     mpirun -np 4 mpi_psf [--cpu]
use hipkern::psf::sky::{lensed_sky, LensedSkyConfig};
use hipkern::psf::{CacheConfig, CpuSink, DeviceSink, MoffatPsf, PsfCache, SinkMode, StarEvent};
use hipkern::Result;
use hipkern_mpi_examples::{compare, fail, gather, verdict, Backend};
use mpi::traits::*;
use std::sync::Arc;

const WIDTH: usize = 640;
const HEIGHT: usize = 400;

fn render(
    backend: &Backend,
    cache: &Arc<PsfCache>,
    events: &[StarEvent],
    height: usize,
) -> Result<Vec<f64>> {
    match backend {
        Backend::Cpu => {
            let mut sink = CpuSink::new(cache.clone(), WIDTH, height)?;
            sink.accumulate_routed(events)?;
            Ok(sink.into_image().data().to_vec())
        }
        Backend::Device(d) => {
            let mut sink = DeviceSink::builder(d, cache.clone(), WIDTH, height)
                .mode(SinkMode::Tile32)
                .build()?;
            sink.accumulate_routed(events)?;
            Ok(sink.finish()?.data().to_vec())
        }
    }
}

fn main() {
    let universe = mpi::initialize().expect("MPI");
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let backend = Backend::choose(world.rank());
    let config = LensedSkyConfig {
        width: WIDTH,
        height: HEIGHT,
        stars: 4_000,
        cluster_stars: 400,
        einstein_radius_px: 60.0,
        max_support: 96.0,
        ..LensedSkyConfig::default()
    };
    let cache_config = CacheConfig {
        phases: 16,
        threads: 1,
    };
    let setup = lensed_sky(&config).and_then(|sky| {
        let cache = PsfCache::build_with(MoffatPsf::default(), &cache_config)?;
        Ok((sky.events, Arc::new(cache)))
    });
    let (events, cache) = setup.unwrap_or_else(|e| fail(&world, e));

    // Band `rank`: rows y0 .. y1; the events reaching it, shifted.
    let (y0, y1) = (rank * HEIGHT / size, (rank + 1) * HEIGHT / size);
    let band: Vec<StarEvent> = events
        .iter()
        .filter(|e| e.y + e.support + 1.0 >= y0 as f64 && e.y - e.support - 1.0 < y1 as f64)
        .map(|e| StarEvent {
            y: e.y - y0 as f64,
            ..*e
        })
        .collect();
    let image = render(&backend, &cache, &band, y1 - y0).unwrap_or_else(|e| fail(&world, e));
    let counts = gather(&world, &[band.len() as u64]);
    let frame = gather(&world, &image);
    let check =
        match (frame, counts) {
            (Some(frame), Some(counts)) => {
                let want =
                    render(&backend, &cache, &events, HEIGHT).unwrap_or_else(|e| fail(&world, e));
                let (err, bitwise) = compare(&frame, &want);
                Some((
                    err <= 1e-12,
                    format!(
                    "{size} bands ({}), {} events ({:?} per band, {} through the direct path): \
                     rel err {err:.1e} vs one rank, bitwise {bitwise}",
                    backend.name(),
                    events.len(),
                    counts,
                    events.iter().filter(|e| !PsfCache::fits(e.x, e.y, e.support)).count()
                ),
                ))
            }
            _ => None,
        };
    let status = verdict(&world, "mpi_psf", check);
    drop(universe); // MPI_Finalize before the exit status
    std::process::exit(status);
}
