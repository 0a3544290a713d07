//! `vesta make`: an ID from chosen fields, to repair data. Every field is range-checked.

use anyhow::Context;
use vesta_core::{GenMethod, IdFields, IdType};

use super::common::EpochArgs;

/// Arguments of `vesta make`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Time: whole units since the epoch, or an RFC 3339 date-time (floored to its unit)
    #[arg(long, value_name = "UNITS|RFC3339", allow_negative_numbers = true)]
    time: String,
    /// Sequence number within the time unit
    #[arg(long, allow_negative_numbers = true)]
    seq: u64,
    /// Machine ID, 0..=1023
    #[arg(long, allow_negative_numbers = true)]
    machine: u64,
    /// max-peak, min-granularity, 0 or 1 [default: max-peak, or the config's]
    #[arg(long = "type", value_name = "TYPE")]
    id_type: Option<IdType>,
    /// embed, server, rest, reserved or 0..=3
    #[arg(long, value_name = "METHOD", default_value = "embed")]
    gen_method: GenMethod,
    /// The ID's version bit, 0 or 1 (not the program's version)
    #[arg(long = "version", value_name = "0|1", default_value_t = 0)]
    id_version: u8,
    #[command(flatten)]
    epoch: EpochArgs,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.epoch.issuer_config()?;
    let epoch = config.id.epoch;
    let id_type = args.id_type.unwrap_or(config.id.id_type);
    let time = parse_time(&args.time, id_type, epoch)?;
    let id = IdFields {
        version: args.id_version,
        id_type,
        gen_method: args.gen_method,
        time,
        seq: args.seq,
        machine: args.machine,
    }
    .encode()?;
    println!("{id}");
    Ok(())
}

/// Whole units, or an RFC 3339 instant converted to the unit containing it.
fn parse_time(text: &str, id_type: IdType, epoch: vesta_core::Epoch) -> anyhow::Result<u64> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u64>().map_err(|_| {
            anyhow::anyhow!(
                "time {t} is out of range for {id_type}: allowed 0..={}",
                id_type.layout().max_time()
            )
        });
    }
    let at = chrono::DateTime::parse_from_rfc3339(t)
        .with_context(|| {
            format!("--time `{t}` is not valid: expected whole units since the epoch or an RFC 3339 date-time")
        })?
        .to_utc();
    Ok(epoch.time_of_datetime(id_type.layout(), at)?)
}
