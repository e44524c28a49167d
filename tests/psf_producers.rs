//! Many producers feeding one sink (`hipkern::psf::SinkHub`): the image from
//! many threads against one producer's and the float64 reference, bounded
//! memory, errors reaching their producer, and sequence order's refusals
//! (never a hang). The GPU tests feed a `DeviceSink`.
use hipkern::psf::{
    CacheConfig, ChunkOrder, CpuSink, DeviceSink, HdrImage, HubLimits, MoffatPsf, Producer,
    PsfCache, ScratchLimits, SinkHub, SinkMode, StarEvent,
};
use hipkern::rng::SplitMix64;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

const WIDTH: usize = 320;
const HEIGHT: usize = 200;
const TOL: f64 = 1e-10;

/// One small cache per binary (P = 8: fast to build; the hub does not
/// care about the phases).
fn cache() -> Arc<PsfCache> {
    static CACHE: OnceLock<Arc<PsfCache>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let config = CacheConfig {
                phases: 8,
                threads: 0,
            };
            Arc::new(PsfCache::build_with(MoffatPsf::default(), &config).unwrap())
        })
        .clone()
}

fn seed() -> u64 {
    // Fresh inputs every run; the seed is printed so a failure can be replayed.
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    eprintln!("seed {s}");
    s
}

/// Work items as a renderer emits them: items of 0..3000 events, stars
/// inside, across and far outside the frame, a few halos too large for
/// the cache (the direct path).
fn items(seed: u64, n_items: usize) -> Vec<Vec<StarEvent>> {
    let mut rng = SplitMix64::new(seed);
    let support = MoffatPsf::default().support_radius();
    let mut u = move || 0.5 * (1.0 + rng.uniform_pm1());
    (0..n_items)
        .map(|k| {
            let n = if k % 7 == 3 {
                0
            } else {
                (u() * 3000.0) as usize
            };
            (0..n)
                .map(|i| StarEvent {
                    // Every 97th event lands far outside the frame.
                    x: if i % 97 == 7 {
                        -5e3
                    } else {
                        -30.0 + (WIDTH as f64 + 60.0) * u()
                    },
                    y: -30.0 + (HEIGHT as f64 + 60.0) * u(),
                    flux: 10f64.powf(3.0 * u()),
                    r: u(),
                    g: u(),
                    b: u(),
                    support: if i == 5 && k % 5 == 0 { 60.0 } else { support },
                })
                .collect()
        })
        .collect()
}

fn bits(img: &HdrImage) -> Vec<u64> {
    img.data().iter().map(|v| v.to_bits()).collect()
}

fn reference(items: &[Vec<StarEvent>]) -> (HdrImage, hipkern::psf::SinkStats) {
    let mut sink = CpuSink::new(cache(), WIDTH, HEIGHT).unwrap();
    for it in items {
        sink.accumulate_routed(it).unwrap();
    }
    let stats = sink.stats();
    (sink.into_image(), stats)
}

fn check(what: &str, got: &HdrImage, want: &HdrImage) {
    let c = got.compare(want).unwrap();
    eprintln!("{what}: {c:.3}");
    c.accept(TOL).unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// `threads` threads take items in increasing order from a shared counter
/// (OpenMP's dynamic schedule) and push each through their own producer:
/// event by event for even items, with `extend` for odd ones.
fn feed<S: hipkern::psf::ChunkSink>(hub: &SinkHub<S>, items: &[Vec<StarEvent>], threads: usize) {
    let next = AtomicUsize::new(0);
    let sequence = hub.order() == ChunkOrder::Sequence;
    std::thread::scope(|s| {
        for _ in 0..threads {
            let mut p: Producer = hub.producer().unwrap();
            let next = &next;
            s.spawn(move || {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(k) else { break };
                    if sequence {
                        p.begin(k as u64).unwrap();
                    }
                    if k % 2 == 0 {
                        for e in item {
                            p.push(*e).unwrap();
                        }
                    } else {
                        p.extend(item).unwrap();
                    }
                }
                let st = p.finish().unwrap();
                assert!(st.events <= items.iter().map(Vec::len).sum::<usize>() as u64);
            });
        }
    });
}

fn cpu_hub(order: ChunkOrder, limits: HubLimits) -> SinkHub<CpuSink> {
    let sink = CpuSink::new(cache(), WIDTH, HEIGHT).unwrap();
    SinkHub::builder(sink)
        .order(order)
        .limits(limits)
        .start()
        .unwrap()
}

#[test]
fn producers_are_send() {
    fn send<T: Send>() {}
    send::<Producer>();
    send::<SinkHub<CpuSink>>();
    send::<SinkHub<DeviceSink>>();
}

#[test]
fn sequence_order_from_eight_threads_is_bitwise_one_producers_image() {
    let items = items(seed(), 48);
    let limits = HubLimits {
        chunk_events: 700, // items span several chunks
        buffers: 9,        // one more than the producers: they wait
    };
    let mut one = cpu_hub(ChunkOrder::Sequence, limits);
    feed(&one, &items, 1);
    one.finish().unwrap();
    let one = one.into_sink().unwrap().into_image();
    let mut many = cpu_hub(ChunkOrder::Sequence, limits);
    feed(&many, &items, 8);
    let stats = many.finish().unwrap();
    let sink = many.into_sink().unwrap();
    let (want, want_stats) = reference(&items);
    assert_eq!(bits(sink.image()), bits(&one), "8 threads vs one producer");
    let total: usize = items.iter().map(Vec::len).sum();
    assert_eq!(stats.events, total as u64);
    let got = sink.stats();
    assert_eq!(
        (got.events, got.direct, got.outside, got.contributions),
        (
            want_stats.events,
            want_stats.direct,
            want_stats.outside,
            want_stats.contributions
        )
    );
    assert!(want_stats.direct > 0 && want_stats.outside > 0);
    check("sequence order vs the reference", sink.image(), &want);
    eprintln!("{stats:?}");
}

#[test]
fn arrival_order_from_many_threads_matches_the_reference() {
    let items = items(seed(), 40);
    for threads in [2, 5, 16] {
        let mut hub = cpu_hub(
            ChunkOrder::Arrival,
            HubLimits {
                chunk_events: 512,
                buffers: threads + 1, // the fewest a hub of `threads` producers takes
            },
        );
        feed(&hub, &items, threads);
        let stats = hub.finish().unwrap();
        let sink = hub.into_sink().unwrap();
        let (want, want_stats) = reference(&items);
        assert_eq!(sink.stats().events, want_stats.events);
        assert_eq!(sink.stats().contributions, want_stats.contributions);
        assert_eq!(stats.refused_chunks, 0);
        check(&format!("{threads} threads, arrival"), sink.image(), &want);
    }
}

#[test]
fn a_bad_event_is_refused_by_its_producer_and_changes_nothing() {
    let items = items(seed(), 2);
    let mut hub = cpu_hub(ChunkOrder::Arrival, HubLimits::default());
    let _p0 = hub.producer().unwrap();
    let mut p = hub.producer().unwrap();
    for e in &items[0][..17] {
        p.push(*e).unwrap();
    }
    let mut bad = items[0][0];
    bad.flux = f64::NAN;
    let e = p.push(bad).unwrap_err().to_string();
    assert!(e.contains("producer 1: event 17: flux = NaN"), "{e}");
    bad.flux = 1.0;
    bad.support = 2e12;
    let e = p.push(bad).unwrap_err().to_string();
    assert!(e.contains("producer 1: event 17: support"), "{e}");
    // extend: all or none, the bad event named by its number in the stream.
    let mut batch = items[1][..10].to_vec();
    batch[5].r = -1.0;
    let e = p.extend(&batch).unwrap_err().to_string();
    assert!(e.contains("event 22: r = -1e0 is negative"), "{e}");
    let stats = p.finish().unwrap();
    assert_eq!(stats.events, 17);
    drop(_p0);
    hub.finish().unwrap();
    let sink = hub.into_sink().unwrap();
    let mut want = CpuSink::new(cache(), WIDTH, HEIGHT).unwrap();
    want.accumulate_routed(&items[0][..17]).unwrap();
    assert_eq!(bits(sink.image()), bits(want.image()));
}

#[test]
fn finish_waits_for_no_one_and_changes_nothing_while_producers_live() {
    let items = items(seed(), 1);
    let mut hub = cpu_hub(ChunkOrder::Arrival, HubLimits::default());
    let mut p = hub.producer().unwrap();
    p.extend(&items[0]).unwrap();
    let e = hub.finish().unwrap_err().to_string();
    assert!(e.contains("1 producer(s) are still alive"), "{e}");
    let hub = hub.into_sink().unwrap_err(); // not finished: the hub comes back
    drop(p); // hands its chunk over
    let mut hub = hub;
    hub.finish().unwrap();
    assert!(hub.producer().is_err(), "a finished hub makes no producers");
    let sink = hub.into_sink().unwrap();
    assert_eq!(sink.stats().events, items[0].len() as u64);
}

#[test]
fn sequence_order_refuses_misuse_naming_it() {
    let ev = items(seed(), 3);
    let arrival = cpu_hub(ChunkOrder::Arrival, HubLimits::default());
    let e = arrival
        .producer()
        .unwrap()
        .begin(0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sequence order"), "{e}");

    let mut hub = cpu_hub(ChunkOrder::Sequence, HubLimits::default());
    let mut a = hub.producer().unwrap();
    let mut b = hub.producer().unwrap();
    let e = a.push(ev[0][0]).unwrap_err().to_string();
    assert!(e.contains("before begin(seq)"), "{e}");
    a.begin(1).unwrap();
    let e = a.begin(1).unwrap_err().to_string();
    assert!(e.contains("must increase"), "{e}");
    let e = b.begin(1).unwrap_err().to_string();
    assert!(e.contains("already begun"), "{e}");
    a.extend(&ev[1]).unwrap();
    b.begin(3).unwrap();
    b.extend(&ev[2]).unwrap();
    drop((a, b));
    // Item 0 and 2 never came: finish names the first, changing nothing.
    let e = hub.finish().unwrap_err().to_string();
    assert!(e.contains("sequence number 0 never came"), "{e}");
    let mut c = hub.producer().unwrap();
    c.begin(0).unwrap();
    c.extend(&ev[0]).unwrap();
    c.begin(2).unwrap(); // an empty item
    c.finish().unwrap();
    hub.finish().unwrap();
    let sink = hub.into_sink().unwrap();
    let (want, _) = reference(&[ev[0].clone(), ev[1].clone(), Vec::new(), ev[2].clone()]);
    assert_eq!(bits(sink.image()), bits(&want));
}

#[test]
fn a_skipped_number_is_an_error_not_a_hang() {
    let ev = items(seed(), 1);
    let hub = cpu_hub(
        ChunkOrder::Sequence,
        HubLimits {
            chunk_events: 4,
            buffers: 2,
        },
    );
    let mut p = hub.producer().unwrap();
    p.begin(1).unwrap(); // item 0 is begun by no one
    let mut err = None;
    for e in ev[0].iter().cycle().take(64) {
        if let Err(x) = p.push(*e) {
            err = Some(x.to_string());
            break;
        }
    }
    let err = err.expect("the producer must be refused, not wait forever");
    assert!(err.contains("item 0 is begun by no producer"), "{err}");
}

#[test]
fn a_hub_takes_one_producer_fewer_than_its_buffers() {
    let hub = cpu_hub(
        ChunkOrder::Arrival,
        HubLimits {
            chunk_events: 8,
            buffers: 3,
        },
    );
    let (a, b) = (hub.producer().unwrap(), hub.producer().unwrap());
    let e = hub.producer().unwrap_err().to_string();
    assert!(e.contains("at most 2 producers"), "{e}");
    drop(a);
    let _c = hub.producer().unwrap();
    drop(b);
}

#[test]
fn limits_are_checked() {
    for (chunk_events, buffers) in [(0, 4), (16_385, 4), (16, 1)] {
        let sink = CpuSink::new(cache(), WIDTH, HEIGHT).unwrap();
        let e = SinkHub::builder(sink)
            .limits(HubLimits {
                chunk_events,
                buffers,
            })
            .start()
            .unwrap_err()
            .to_string();
        assert!(e.contains("must be in"), "{e}");
    }
}

// ---- GPU ----------------------------------------------------------------

fn device_sink(mode: SinkMode, scratch: ScratchLimits) -> DeviceSink {
    let d = hipkern::Device::new(0).expect("a GPU is required for this test");
    DeviceSink::builder(&d, cache(), WIDTH, HEIGHT)
        .mode(mode)
        .scratch(scratch)
        .build()
        .unwrap()
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_many_producers_feed_the_device_sink_in_every_mode() {
    let items = items(seed(), 64);
    let (want, want_stats) = reference(&items);
    for mode in [
        SinkMode::Atomic,
        SinkMode::Tile16,
        SinkMode::Tile32,
        SinkMode::Adaptive,
    ] {
        let mut images = Vec::new();
        for threads in [1, 8] {
            let sink = device_sink(mode, ScratchLimits::default());
            let mut hub = SinkHub::builder(sink)
                .order(ChunkOrder::Sequence)
                .start()
                .unwrap();
            feed(&hub, &items, threads);
            hub.finish().unwrap();
            let mut sink = hub.into_sink().unwrap();
            let img = sink.finish().unwrap();
            assert_eq!(sink.stats().events, want_stats.events, "{mode:?}");
            assert_eq!(sink.stats().contributions, want_stats.contributions);
            check(&format!("{mode:?}, {threads} threads"), &img, &want);
            images.push(img);
        }
        // Bitwise where every chunk is tiled: adaptive sends small chunks
        // (and these items end in some) to atomic.
        if matches!(mode, SinkMode::Tile16 | SinkMode::Tile32) {
            assert_eq!(
                bits(&images[0]),
                bits(&images[1]),
                "{mode:?}: 8 threads vs 1"
            );
        }
    }
}

#[test]
#[cfg_attr(
    hipkern_platform = "cpu",
    ignore = "needs a GPU (a cpu-platform build)"
)]
fn gpu_chunks_too_large_for_the_scratch_are_split_and_nothing_is_lost() {
    let items = items(seed(), 24);
    let (want, _) = reference(&items);
    let scratch = ScratchLimits {
        references: 64 << 10,
        ..ScratchLimits::default()
    };
    let mut hub = SinkHub::builder(device_sink(SinkMode::Tile32, scratch))
        .start()
        .unwrap();
    feed(&hub, &items, 4);
    let stats = hub.finish().unwrap();
    assert!(
        stats.splits > 0,
        "the small scratch must force splits: {stats:?}"
    );
    assert_eq!(stats.refused_chunks, 0);
    let mut sink = hub.into_sink().unwrap();
    check("split chunks", &sink.finish().unwrap(), &want);
}
