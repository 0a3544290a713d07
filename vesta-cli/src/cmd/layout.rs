//! `vesta layout`: both layouts as data — bit ranges, capacity, epoch and end of life.

use std::io::{self, Write};

use vesta_core::{Epoch, IdType};

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
        writeln!(
            out,
            "  end of life {}",
            Epoch::rfc3339(l.end_of_life_ms(epoch))
        )?;
    }
    Ok(())
}
