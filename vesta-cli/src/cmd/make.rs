//! `vesta make`: an ID of the layout in force made from chosen fields, to repair data. Every
//! field is range-checked; one that is missing or that the layout does not have is named.

use anyhow::{Context, bail};
use vesta_core::{FieldValues, GenMethod, IdType, Layout};

use super::common::LayoutArgs;

/// Arguments of `vesta make`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Time: whole units since the epoch, or an RFC 3339 date-time (floored to its unit)
    #[arg(long, value_name = "UNITS|RFC3339", allow_negative_numbers = true)]
    time: String,
    /// Sequence number within the time unit
    #[arg(long, allow_negative_numbers = true)]
    seq: u64,
    /// The whole machine (node) field, e.g. 0..=1023 in Vesta's and Leaf's layouts
    #[arg(long, allow_negative_numbers = true)]
    machine: Option<u64>,
    /// Any field or node part by the layout's own name, e.g. --field datacenterId=3 (repeatable)
    #[arg(long = "field", value_name = "NAME=VALUE")]
    fields: Vec<String>,
    /// Vesta's type: max-peak, min-granularity, 0 or 1 [default: max-peak, or the config's]
    #[arg(long = "type", value_name = "TYPE")]
    id_type: Option<IdType>,
    /// Vesta's genMethod: embed, server, rest, reserved or 0..=3 [default: embed]
    #[arg(long, value_name = "METHOD")]
    gen_method: Option<GenMethod>,
    /// Vesta's version bit, 0 or 1 (not the program's version) [default: the config's, else 0]
    #[arg(long = "version", value_name = "0|1")]
    id_version: Option<u8>,
    #[command(flatten)]
    layout: LayoutArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let mut config = args.layout.issuer_config()?;
    if let Some(t) = args.id_type {
        config.id.id_type = Some(t);
    }
    let layout = config.layout()?;
    let mut values = FieldValues::new()
        .with("time", parse_time(&args.time, &layout)?)
        .with("seq", args.seq);
    if let Some(m) = args.machine {
        values.set("machine", m);
    }
    if layout.id_type().is_some() {
        values.set("genMethod", args.gen_method.unwrap_or_default().code());
    } else if args.gen_method.is_some() || args.id_version.is_some() {
        bail!(
            "--gen-method and --version are fields of Vesta's layouts, not of {}",
            layout.name()
        );
    }
    if let Some(v) = args.id_version {
        values.set("version", u64::from(v));
    }
    for f in &args.fields {
        let (name, value) = f
            .split_once('=')
            .with_context(|| format!("--field `{f}` is not valid: expected NAME=VALUE"))?;
        let value = value
            .trim()
            .parse::<u64>()
            .with_context(|| format!("--field {name}: `{value}` is not an unsigned integer"))?;
        values.set(name.trim(), value);
    }
    println!("{}", layout.make(&values)?);
    Ok(())
}

/// Whole units, or an RFC 3339 instant converted to the unit containing it.
fn parse_time(text: &str, layout: &Layout) -> anyhow::Result<u64> {
    let t = text.trim();
    let context = match layout.id_type() {
        Some(t) => t.name().to_owned(),
        None => layout.name().to_owned(),
    };
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "time {t} is out of range for {context}: allowed 0..={}",
                layout.max_time()
            )
        });
    }
    let at = chrono::DateTime::parse_from_rfc3339(t)
        .with_context(|| {
            format!("--time `{t}` is not valid: expected whole units since the epoch or an RFC 3339 date-time")
        })?
        .to_utc();
    Ok(layout.time_of_datetime(at)?)
}
