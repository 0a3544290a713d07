//! `vesta make`: an ID of the layout in force made from chosen fields, to repair data. Every
//! field is range-checked; one that is missing, that the layout does not have, or that is given
//! twice (by its flag and by `--field`, say) is named.

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
    let mut config = args.layout.layout_config()?;
    if let Some(t) = args.id_type {
        config.id.id_type = Some(t);
    }
    let layout = config.layout()?;
    if layout.id_type().is_none() && (args.gen_method.is_some() || args.id_version.is_some()) {
        bail!(
            "--gen-method and --version are fields of Vesta's layouts, not of {}",
            layout.name()
        );
    }
    let mut given = Given::new(&layout);
    given.add(
        "time",
        parse_time(&args.time, &layout)?,
        format!("--time {}", args.time.trim()),
    )?;
    given.add("seq", args.seq, format!("--seq {}", args.seq))?;
    if let Some(m) = args.machine {
        given.add("machine", m, format!("--machine {m}"))?;
    }
    if let Some(g) = args.gen_method {
        given.add("genMethod", g.code(), format!("--gen-method {g}"))?;
    }
    if let Some(v) = args.id_version {
        given.add("version", u64::from(v), format!("--version {v}"))?;
    }
    if let Some(t) = args.id_type {
        // The type chose the layout above; it is a field too, which --field may not set again.
        given.check("type", format!("--type {}", t.name()))?;
    }
    for f in &args.fields {
        let (name, value) = f
            .split_once('=')
            .with_context(|| format!("--field `{f}` is not valid: expected NAME=VALUE"))?;
        let value = value
            .trim()
            .parse::<u64>()
            .with_context(|| format!("--field {name}: `{value}` is not an unsigned integer"))?;
        given.add(
            name.trim(),
            value,
            format!("--field {}={value}", name.trim()),
        )?;
    }
    let mut values = given.values;
    if layout.id_type().is_some() && values.get("genMethod").is_none() {
        values.set("genMethod", GenMethod::default().code());
    }
    println!("{}", layout.make(&values)?);
    Ok(())
}

/// The field values given on the command line, each given once: a field set by its own flag
/// and again by `--field` (or twice by `--field`, or whole and by a part) is refused naming
/// both, whether the values differ or not, so no value silently wins over another.
struct Given<'a> {
    layout: &'a Layout,
    values: FieldValues,
    /// What set each field so far: its name, its bits in the layout (if it has it) and the
    /// words that set it.
    said: Vec<(String, Option<u64>, String)>,
}

impl<'a> Given<'a> {
    fn new(layout: &'a Layout) -> Self {
        Given {
            layout,
            values: FieldValues::new(),
            said: Vec::new(),
        }
    }

    /// Records `name = value`, set by `said`, unless that field was set already.
    fn add(&mut self, name: &str, value: u64, said: String) -> anyhow::Result<()> {
        self.check(name, said)?;
        self.values.set(name, value);
        Ok(())
    }

    /// Refuses `name` (set by `said`) if an earlier flag set the same bits or the same name.
    fn check(&mut self, name: &str, said: String) -> anyhow::Result<()> {
        let bits = bits_named(self.layout, name);
        let clash = self
            .said
            .iter()
            .find(|(n, b, _)| n == name || matches!((b, bits), (Some(a), Some(b)) if a & b != 0));
        if let Some((earlier, _, earlier_said)) = clash {
            let field = bits
                .and_then(|b| self.layout.fields().iter().find(|f| f.span.mask() & b != 0))
                .map_or(earlier.as_str(), |f| f.name.as_str());
            bail!("{earlier_said} and {said} both set {field}: give each field once");
        }
        self.said.push((name.to_owned(), bits, said));
        Ok(())
    }
}

/// The bits `name` stands for in `layout`: a field by its own name or its role (`machine`,
/// `time`, ...), or a node part; `None` for a name the layout has not (`make` names it).
fn bits_named(layout: &Layout, name: &str) -> Option<u64> {
    layout.field(name).map(|f| f.span.mask()).or_else(|| {
        layout
            .fields()
            .iter()
            .flat_map(|f| &f.parts)
            .find(|p| p.name == name)
            .map(|p| p.span.mask())
    })
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
