//! `vesta layout`: both layouts as data — bit ranges, capacity, epoch, end of life and how long
//! is left until it in the epoch in force (with a warning inside `id.end_of_life_margin_days`).

use std::io::{self, Write};

use vesta_core::{Clock, Epoch, IdType, describe_span, time_left_ms};
use vesta_embed::SystemClock;

use super::common::EpochArgs;

/// Arguments of `vesta layout`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    epoch: EpochArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let epoch = args.epoch.epoch()?;
    let margin_ms = args.epoch.issuer_config()?.id.end_of_life_margin_ms();
    let now = SystemClock::precise().now_ms();
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "epoch  {} ({} ms since 1970)",
        Epoch::rfc3339(epoch.unix_ms()),
        epoch.unix_ms()
    )?;
    for id_type in IdType::ALL {
        let l = id_type.layout();
        writeln!(out)?;
        writeln!(
            out,
            "type {} {} (time unit: 1 {})",
            id_type.code(),
            id_type,
            l.unit_name
        )?;
        for span in l.spans().iter().rev() {
            writeln!(
                out,
                "  {:<10} bits {:>2}-{:<2} ({:>2} bits, max {})",
                span.name,
                span.low_bit,
                span.high_bit(),
                span.bits,
                span.max()
            )?;
        }
        write!(
            out,
            "  capacity   {} IDs per {} per machine",
            l.capacity_per_unit(),
            l.unit_name
        )?;
        if l.unit_ms != 1000 {
            write!(out, " ({} per second)", l.capacity_per_second())?;
        }
        writeln!(out)?;
        let end = l.end_of_life_ms(epoch);
        let left = time_left_ms(end, now);
        writeln!(out, "  end of life {}", Epoch::rfc3339(end))?;
        writeln!(out, "  time left   {}", describe_span(left))?;
        if left <= margin_ms {
            writeln!(
                out,
                "  WARNING     less than id.end_of_life_margin_days ({}) left: plan a new \
                 epoch (docs/operations.md, end of life)",
                describe_span(margin_ms)
            )?;
        }
    }
    Ok(())
}
