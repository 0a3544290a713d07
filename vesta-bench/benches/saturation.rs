//! Saturated throughput as a fraction of the layout's cap (2^20/s max-peak, 1,024,000/s
//! min-granularity; Sonyflake's 10 ms units and UidGenerator's seconds too) and the CPU it
//! costs. Run: `cargo bench -p vesta-bench --bench saturation`.
//!
//! One thread calls the generator flat out on the system clock, starting on a unit boundary, for
//! a whole number of units; it counts the IDs whose time falls in that window. Waiting for the
//! next unit sleeps, so CPU use shows what saturation costs the host.

use std::time::{Duration, Instant};

use rustix::time::{ClockId, clock_gettime};
use vesta_core::{Clock, Generator, GeneratorConfig, IdType, Layout, Preset};
use vesta_embed::SystemClock;

fn cpu_time() -> Duration {
    let ts = clock_gettime(ClockId::ProcessCPUTime);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Issues flat out for `units` whole time units; batch 1 uses `next_id`, more uses `next_ids`.
fn run(layout: &Layout, units: u64, batch: u64) {
    let clock = SystemClock::for_layout(layout);
    let cfg = GeneratorConfig {
        machine: 1,
        ..GeneratorConfig::for_layout(layout.clone())
    };
    let g = Generator::new(cfg, clock).expect("valid config");
    let time_of = |id: u64| layout.time_span().get(id);
    // Start on a unit boundary so every unit of the window is whole.
    let now = clock.now_ms();
    let first = layout.time_at(now).expect("clock after epoch") + 2;
    clock.wait_until_ms(layout.unix_ms_of(first));
    let end = first + units;
    let (wall0, cpu0) = (Instant::now(), cpu_time());
    let mut count = 0u64;
    'outer: loop {
        if batch == 1 {
            let id = g.next_id().expect("issue");
            let t = time_of(id);
            if t >= end {
                break;
            }
            count += u64::from(t >= first);
        } else {
            let b = g.next_ids(batch).expect("issue");
            for run in b.runs() {
                let t = time_of(run.first);
                if t >= end {
                    break 'outer;
                }
                if t >= first {
                    count += run.count;
                }
            }
        }
    }
    let (wall, cpu) = (wall0.elapsed(), cpu_time() - cpu0);
    let cap = layout.capacity_per_unit() * units;
    println!(
        "{:<16} {:<10} {:>5} units  {:>10} IDs  {:>7.3}% of cap  wall {:>6.3} s  CPU {:>6.3} s ({:>5.1}% of one core)  overflow waits {}",
        match layout.id_type() {
            Some(t) => t.name(),
            None => layout.name(),
        },
        if batch == 1 {
            "next_id".to_string()
        } else {
            format!("next_ids({batch})")
        },
        units,
        count,
        100.0 * count as f64 / cap as f64,
        wall.as_secs_f64(),
        cpu.as_secs_f64(),
        100.0 * cpu.as_secs_f64() / wall.as_secs_f64(),
        g.stats().overflow_waits,
    );
}

fn main() {
    // `cargo bench` passes `--bench`; anything else is ignored.
    println!("saturation: one thread, system clock, whole units");
    let (peak, gran) = (IdType::MaxPeak.layout(), IdType::MinGranularity.layout());
    // The peers' layouts with the units Vesta's do not have: 10 ms and (UidGenerator) seconds
    // from a recent epoch (its own ran out in 2024).
    let sonyflake = Preset::Sonyflake.layout();
    let uid = Preset::UidGenerator
        .layout()
        .with_epoch("2024-01-01T00:00:00+08:00".parse().expect("epoch"));
    run(peak, 5, 1);
    run(gran, 5000, 1);
    run(&sonyflake, 500, 1);
    run(&uid, 5, 1);
    run(peak, 5, 4096);
    run(gran, 5000, 256);
    run(&sonyflake, 500, 64);
    run(&uid, 5, 512);
}
