//! `vesta layout`: the layout in force as data — bit ranges, capacity, machine-ID pools, epoch,
//! end of life and how long is left until it (with a warning inside
//! `id.end_of_life_margin_days`). Vesta's layout shows both of its types. With `--json`, the
//! layout as the data another language's decoder needs (docs/layout-json.md).

use std::io::{self, Write};

use vesta_core::{Clock, Epoch, FieldKind, IdType, Layout, describe_span, time_left_ms};
use vesta_embed::SystemClock;

use super::common::LayoutArgs;

/// Arguments of `vesta layout`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Print the layout as JSON for decoders in other languages: the fields from the top bit
    /// down, the time unit and the epoch (docs/layout-json.md)
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.layout.layout_config()?;
    let layout = config.layout()?;
    if args.json {
        let mut out = io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &layout)?;
        writeln!(out)?;
        return Ok(());
    }
    let margin_ms = config.id.end_of_life_margin_ms();
    let server_pool_start = config.machine.server_pool_start;
    let now = SystemClock::precise().now_ms();
    let epoch = layout.epoch();
    let mut out = io::stdout().lock();
    writeln!(
        out,
        "epoch  {} ({} ms since 1970)",
        Epoch::rfc3339(epoch.unix_ms()),
        epoch.unix_ms()
    )?;
    let variants: Vec<Layout> = match layout.id_type() {
        Some(_) => IdType::ALL
            .iter()
            .map(|t| {
                layout
                    .for_id(t.code() << vesta_core::TYPE_SHIFT)
                    .into_owned()
            })
            .collect(),
        None => vec![layout],
    };
    for l in &variants {
        writeln!(out)?;
        let unit = unit_words(l);
        match l.id_type() {
            Some(t) => writeln!(out, "type {} {t} (time unit: {unit})", t.code())?,
            None => writeln!(out, "layout {} (time unit: {unit})", l.name())?,
        }
        for f in l.fields() {
            writeln!(
                out,
                "  {:<10} bits {:>2}-{:<2} ({:>2} bits, max {}){}",
                f.name,
                f.span.low_bit,
                f.span.high_bit(),
                f.span.bits,
                f.span.max(),
                match f.kind {
                    FieldKind::Fixed(v) if l.id_type().is_none() => format!(", always {v}"),
                    _ => String::new(),
                }
            )?;
            for p in &f.parts {
                writeln!(
                    out,
                    "    {:<8} bits {:>2}-{:<2} ({:>2} bits, max {})",
                    p.name,
                    p.span.low_bit,
                    p.span.high_bit(),
                    p.span.bits,
                    p.span.max()
                )?;
            }
        }
        if l.signed() {
            writeln!(
                out,
                "  bit 63     always 0 (the ID stays positive in SQL BIGINT and Java long)"
            )?;
        }
        write!(
            out,
            "  capacity   {} IDs per {} per machine",
            l.capacity_per_unit(),
            l.unit_name()
        )?;
        if l.unit_ms() != 1000 {
            write!(out, " ({} per second)", l.capacity_per_second())?;
        }
        writeln!(out)?;
        let pools = match server_pool_start {
            Some(start) => vesta_core::MachinePools::with_node_bits(l.node_bits(), start)?,
            None => l.default_pools(),
        };
        if pools.is_split() {
            writeln!(
                out,
                "  pools      embed {}..={}, server {}..={}",
                pools.embed().start(),
                pools.embed().end(),
                pools.server().start(),
                pools.server().end()
            )?;
        } else {
            writeln!(
                out,
                "  pools      none: every mode takes any of 0..={} (a server defaults to {}; \
                 [machine] server_pool_start splits them)",
                pools.max_machine(),
                pools.server_start()
            )?;
        }
        let end = l.end_of_life_ms();
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

/// `1 second`, `1 millisecond`, `10 ms`.
fn unit_words(l: &Layout) -> String {
    match l.unit_ms() {
        1 => "1 millisecond".into(),
        1000 => "1 second".into(),
        ms => format!("{ms} ms"),
    }
}
