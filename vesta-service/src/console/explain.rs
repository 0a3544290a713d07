//! The explain and make page: an ID pasted in any accepted form, explained in the server's
//! layout or any preset one (every field with its bits, the instant in UTC and local time, the
//! machine and its pool, the ID in every form); and an ID made from fields by `/makeid`'s own
//! code, so the checks and the messages are the API's. Plain GET forms: it works without
//! script, and a result is a link one can share.

use chrono::{Local, TimeZone};
use vesta_core::{Clock, Epoch, Explanation, FieldKind, Form, Layout, Preset};
use vesta_embed::Issuer;

use super::html::Html;
use crate::make::values_from_query;
use crate::ops::Service;
use crate::query::{BadRequest, Query, parse_id_param, shorten};

/// The layout choice naming the server's own layout.
const OWN: &str = "server";

/// What the page shows of the make form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MakeForm<'a> {
    /// None at all: `[server] make = false`, so nothing on the page makes an ID.
    Off,
    /// The form, blank (the explain page).
    Blank,
    /// The form filled from `/ui/make`'s query, and the ID it makes (or why not).
    Made(Option<&'a str>),
}

/// The explain form (with `explain`'s result when it has an `id`), then the make form as
/// `make` says.
pub fn page<C: Clock + 'static>(
    service: &Service<C>,
    explain: Option<&str>,
    make: MakeForm<'_>,
) -> String {
    let issuer = service.issuer();
    let mut h = Html::default();
    let asked = Query::parse(explain, "/ui/explain", &["id", "layout"]);
    let (id_text, layout_name) = match &asked {
        Ok(q) => (q.get("id").unwrap_or(""), q.get("layout").unwrap_or(OWN)),
        Err(_) => ("", OWN),
    };
    explain_form(&mut h, issuer.layout(), id_text, layout_name);
    match asked {
        Err(e) => {
            h.error(e);
        }
        Ok(q) if q.get("id").is_some() => match explained(issuer.layout(), &q) {
            Ok(x) => explanation(&mut h, &x),
            Err(e) => {
                h.error(e);
            }
        },
        Ok(_) => {}
    }
    let made_query = match make {
        MakeForm::Off => return h.into_string(),
        MakeForm::Blank => None,
        MakeForm::Made(q) => Some(without_blanks(q.unwrap_or(""))),
    };
    make_form(&mut h, issuer, made_query.as_deref());
    if let Some(q) = &made_query {
        match made(service, q) {
            Ok(id) => {
                h.raw("<p id=\"made\">Made ID <output>")
                    .text(id)
                    .raw("</output> (<a href=\"/ui/explain?id=")
                    .text(id)
                    .raw("\">explain it</a>)</p>\n");
                explanation(&mut h, &issuer.explain(id));
            }
            Err(e) => {
                h.error(e);
            }
        }
    }
    h.into_string()
}

/// The ID `/ui/make?{query}` makes: the query read by `/makeid`'s code, the ID made by the
/// service's `make` op (its checks and refusals), the error worded as `/makeid` words it.
fn made<C: Clock + 'static>(service: &Service<C>, query: &str) -> Result<u64, String> {
    let issuer = service.issuer();
    let values = values_from_query(issuer.layout(), Some(query), &issuer.own_values())
        .map_err(|e| e.message)?;
    service.make(&values).map_err(|e| match e.field() {
        Some(field) => format!("invalid parameter {field}: {}", e.message()),
        None => e.message().to_owned(),
    })
}

/// The explanation asked for in `q` (its `id` and `layout`).
fn explained(own: &Layout, q: &Query<'_>) -> Result<Explanation, BadRequest> {
    let layout = match q.get("layout").unwrap_or(OWN) {
        OWN => own.clone(),
        name => name.parse::<Preset>().map(Preset::layout).map_err(|_| {
            BadRequest::invalid_param(
                "layout",
                format_args!(
                    "`{}` is not a layout here: {OWN} (this server's), {}",
                    shorten(name),
                    preset_names()
                ),
            )
        })?,
    };
    let id = parse_id_param("id", q.get("id").unwrap_or(""))?;
    Ok(Explanation::new(id, &layout))
}

fn preset_names() -> String {
    Preset::ALL.map(Preset::name).join(", ")
}

fn explain_form(h: &mut Html, own: &Layout, id: &str, layout: &str) {
    h.raw("<form method=\"get\" action=\"/ui/explain\" id=\"explain\">\n")
        .raw("<label>ID (decimal, Java long, 0x hex, base32 or base62)")
        .raw("<input name=\"id\" required maxlength=\"64\" autocomplete=\"off\" spellcheck=\"false\" value=\"")
        .text(shorten(id))
        .raw("\"></label>\n<label>Layout<select name=\"layout\">");
    let mut option = |value: &str, label: &str| {
        let selected = if value == layout { " selected" } else { "" };
        h.raw("<option value=\"")
            .text(value)
            .raw("\"")
            .raw(selected)
            .raw(">")
            .text(label)
            .raw("</option>");
    };
    option(
        OWN,
        &format!(
            "this server's: {} from {}",
            own.full_name(),
            epoch_text(own)
        ),
    );
    for p in Preset::ALL {
        let l = p.layout();
        option(p.name(), &format!("{} from {}", p.name(), epoch_text(&l)));
    }
    h.raw("</select></label>\n<button type=\"submit\">Explain</button>\n</form>\n");
}

fn epoch_text(layout: &Layout) -> String {
    Epoch::rfc3339(layout.epoch().unix_ms())
}

/// Every field with its bits, then the instant, the machine and the forms.
fn explanation(h: &mut Html, x: &Explanation) {
    let layout = x.layout();
    h.heading(&format!("{} in the {} layout", x.id, layout.full_name()));
    if let Some(warning) = x.warning() {
        h.para("warn", warning);
    }
    h.table("fields", &["Field", "Value", "Bits"]);
    for f in layout.fields() {
        let shown = x.shown(f);
        let bits = bits_of(f.span.high_bit(), f.span.low_bit);
        h.row(&f.name, &[&f.name, &shown, &bits]);
        for p in &f.parts {
            let name = format!("{} (part of {})", p.name, f.name);
            let bits = bits_of(p.span.high_bit(), p.span.low_bit);
            h.row(&p.name, &[&name, &p.span.get(x.id), &bits]);
        }
    }
    h.end_table();
    h.facts("instant");
    h.fact("utc", "Time (UTC)", x.timestamp());
    h.fact("local", "Time (server's local zone)", local_time(x.unix_ms));
    h.fact("machine", "Machine", machine_and_pool(layout, x.node()));
    for form in Form::ALL {
        h.fact(form.name(), form.name(), form.encode(x.id).as_str());
    }
    h.fact("java", "Java long / SQL BIGINT", x.as_java_long());
    h.end_facts();
}

fn bits_of(high: u32, low: u32) -> String {
    if high == low {
        format!("{low}")
    } else {
        format!("{high}..{low}")
    }
}

/// `N (server pool 924..=1023)`: a machine ID and the pool of the layout it lies in, or `N (no
/// pools: any of 0..=1023)` in a layout whose node field is whole (the status page says it the
/// same way).
pub fn machine_and_pool(layout: &Layout, machine: u64) -> String {
    match layout.default_pools().pool_of(machine) {
        Some(("any", range)) => format!(
            "{machine} (no pools: any of {}..={})",
            range.start(),
            range.end()
        ),
        Some((name, range)) => format!(
            "{machine} ({name} pool {}..={})",
            range.start(),
            range.end()
        ),
        None => machine.to_string(),
    }
}

fn local_time(unix_ms: u64) -> String {
    let ms = i64::try_from(unix_ms).unwrap_or(i64::MAX);
    match Local.timestamp_millis_opt(ms).single() {
        Some(t) => t.format("%Y-%m-%d %H:%M:%S%.3f %:z").to_string(),
        None => "out of range".into(),
    }
}

/// The make form's inputs: time and seq, the machine, and the layout's other fields by their
/// own names (a split node by its parts too). A blank input takes the server's own value.
fn make_inputs(layout: &Layout) -> Vec<(String, String)> {
    let mut inputs = vec![
        (
            "time".to_owned(),
            format!("time ({}s since the epoch)", layout.unit_name()),
        ),
        ("seq".to_owned(), "seq".to_owned()),
        ("machine".to_owned(), "machine".to_owned()),
    ];
    for f in layout.fields().iter().rev() {
        match f.kind {
            FieldKind::Method | FieldKind::Fixed(_) => {
                inputs.push((f.name.clone(), f.name.clone()));
            }
            FieldKind::Node if f.parts.len() > 1 => {
                for p in &f.parts {
                    inputs.push((p.name.clone(), format!("{} (part of machine)", p.name)));
                }
            }
            _ => {}
        }
    }
    inputs
}

fn make_form<C: Clock + 'static>(h: &mut Html, issuer: &Issuer<C>, given: Option<&str>) {
    let layout = issuer.layout();
    let names: Vec<String> = make_inputs(layout).into_iter().map(|(n, _)| n).collect();
    let allowed: Vec<&str> = names.iter().map(String::as_str).collect();
    let given = given.and_then(|q| Query::parse(Some(q), "/ui/make", &allowed).ok());
    let own = issuer.own_values();
    let now_time = layout.time_at(issuer.clock().now_ms()).unwrap_or_default();
    h.heading("Make an ID from fields");
    h.para(
        "muted",
        format_args!(
            "The same checks and messages as /makeid. A blank field takes this server's own \
             value; time is in {}s since {} (now: {now_time}).",
            layout.unit_name(),
            epoch_text(layout)
        ),
    );
    h.raw("<form method=\"get\" action=\"/ui/make\" id=\"make\">\n");
    for (name, label) in make_inputs(layout) {
        let placeholder = match name.as_str() {
            "time" => now_time.to_string(),
            "seq" => "0".to_owned(),
            "machine" => own.get("node").map(|v| v.to_string()).unwrap_or_default(),
            other => own.get(other).map(|v| v.to_string()).unwrap_or_default(),
        };
        let value = given.as_ref().and_then(|q| q.get(&name)).unwrap_or("");
        h.raw("<label>")
            .text(&label)
            .raw("<input class=\"num\" inputmode=\"numeric\" maxlength=\"64\" name=\"")
            .text(&name)
            .raw("\" placeholder=\"")
            .text(&placeholder)
            .raw("\" value=\"")
            .text(shorten(value))
            .raw("\"></label>\n");
    }
    h.raw("<button type=\"submit\">Make</button>\n</form>\n");
}

/// `raw` without its blank `name=` pairs: a form sends every input, and a blank one means
/// "the server's own value", which `/makeid` expresses by leaving the parameter out.
fn without_blanks(raw: &str) -> String {
    raw.split('&')
        .filter(|p| !p.is_empty() && !p.ends_with('='))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blank_inputs_are_left_out() {
        assert_eq!(
            without_blanks("time=5&seq=&machine=3&x"),
            "time=5&machine=3&x"
        );
        assert_eq!(without_blanks(""), "");
    }

    #[test]
    fn every_layout_offers_its_own_names() {
        let twitter = make_inputs(&Preset::Twitter.layout());
        let names: Vec<&str> = twitter.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.contains(&"datacenterId") && names.contains(&"workerId"),
            "{names:?}"
        );
        let vesta = make_inputs(vesta_core::IdType::MaxPeak.layout());
        let names: Vec<&str> = vesta.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["time", "seq", "machine", "genMethod", "type", "version"]
        );
    }
}
