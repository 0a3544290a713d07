//! Making an ID from `/makeid`'s parameters (`time=&seq=[&<field>=...]`), to repair data: the
//! REST endpoint and the console's make form read the query with this same code, so they check
//! alike and say the same. `time` and `seq` are required; every other field (the node as `machine` or
//! `node`, or by its parts; Vesta's `genMethod`, `type` and `version`; a custom layout's fixed
//! fields) takes the server's own value unless given. Every value is range-checked and an
//! error names the field; a parameter the layout has no field for is refused naming it.

use std::collections::HashMap;

use vesta_core::{FieldKind, FieldValues, GenMethod, IdType, Layout};

use crate::query::{BadRequest, Query, parse_u64};

/// The parameters `/makeid` accepts in `layout`: `time`, `seq`, `machine`, then every other
/// field and node part by its own name from the bottom bit up (Vesta's: genMethod, type,
/// version), then `node`.
pub fn params(layout: &Layout) -> Vec<&str> {
    let mut names = vec!["time", "seq", "machine"];
    for f in layout.fields().iter().rev() {
        for name in std::iter::once(f.name.as_str()).chain(f.parts.iter().map(|p| p.name.as_str()))
        {
            if !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if !names.contains(&"node") {
        names.push("node");
    }
    names
}

/// The names a field answers to besides its own: its role's.
fn aliases(kind: FieldKind) -> &'static [&'static str] {
    match kind {
        FieldKind::Time => &["time"],
        FieldKind::Seq => &["seq"],
        FieldKind::Node => &["machine", "node"],
        FieldKind::Method => &["genMethod"],
        _ => &[],
    }
}

/// The ID that `/makeid?{query}` makes in `layout`, fields not given taken from `own` (the
/// server's values): [`values_from_query`], then [`Layout::make`]. Pure, so the fuzz target
/// runs what the endpoint runs (which makes the ID through the service's `make` op).
pub fn make_from_query(
    layout: &Layout,
    query: Option<&str>,
    own: &FieldValues,
) -> Result<u64, BadRequest> {
    let values = values_from_query(layout, query, own)?;
    layout
        .make(&values)
        .map_err(|e| BadRequest::invalid_param(e.field(), &e))
}

/// The field values `/makeid?{query}` asks for in `layout`, fields not given taken from `own`;
/// the query's names checked, its numbers parsed, the ranges left to the make.
pub fn values_from_query(
    layout: &Layout,
    query: Option<&str>,
    own: &FieldValues,
) -> Result<FieldValues, BadRequest> {
    let allowed = params(layout);
    let q = Query::parse(query, "/makeid", &allowed)?;
    values_from(
        layout,
        |name| q.get(name).map(|text| value_of(name, text)).transpose(),
        own,
    )
}

/// The field values of a make request given as a map of names to values (gRPC's `Make`) in
/// `layout`, fields not given taken from `own`: a name the layout has not is refused naming
/// it and listing the layout's.
pub fn values_from_fields(
    layout: &Layout,
    fields: &HashMap<String, u64>,
    own: &FieldValues,
) -> Result<FieldValues, BadRequest> {
    let allowed = params(layout);
    if let Some(name) = fields.keys().find(|n| !allowed.contains(&n.as_str())) {
        return Err(BadRequest::new(format!(
            "unknown field {name:?}: the {} layout has {}",
            layout.name(),
            allowed.join(", ")
        )));
    }
    values_from(layout, |name| Ok(fields.get(name).copied()), own)
}

/// The field values of a make request in `layout` whose values `given` answers by name (one
/// of [`params`]; `Ok(None)`: not given), fields not given taken from `own`: `time` and `seq`
/// are required. What [`values_from_query`] and the gRPC `Make` (a map of values) share.
pub fn values_from(
    layout: &Layout,
    mut given: impl FnMut(&str) -> Result<Option<u64>, BadRequest>,
    own: &FieldValues,
) -> Result<FieldValues, BadRequest> {
    let mut values = FieldValues::new();
    for f in layout.fields() {
        let mut names: Vec<&str> = vec![f.name.as_str()];
        let others = aliases(f.kind)
            .iter()
            .copied()
            .chain(f.parts.iter().map(|p| p.name.as_str()));
        for name in others {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        let mut any = false;
        for name in names {
            if let Some(value) = given(name)? {
                values.set(name, value);
                any = true;
            }
        }
        match f.kind {
            _ if any => {}
            FieldKind::Time | FieldKind::Seq => return Err(BadRequest::missing_param(&f.name)),
            // The server's own value: its machine, genMethod, version and type.
            FieldKind::Node => values.set("node", own.get("node").unwrap_or_default()),
            _ => {
                if let Some(v) = own.get(&f.name) {
                    values.set(f.name.as_str(), v);
                }
            }
        }
    }
    Ok(values)
}

/// A parameter's value: genMethod and Vesta's type also by name, the rest in plain decimal.
fn value_of(name: &str, text: &str) -> Result<u64, BadRequest> {
    match name {
        "genMethod" => text
            .parse::<GenMethod>()
            .map(GenMethod::code)
            .map_err(|e| BadRequest::invalid_param(name, e)),
        "type" => text
            .parse::<IdType>()
            .map(IdType::code)
            .map_err(|e| BadRequest::invalid_param(name, e)),
        _ => parse_u64(name, text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vesta_core::Preset;

    #[test]
    fn each_layout_accepts_its_own_names() {
        let mut vesta = params(IdType::MaxPeak.layout());
        vesta.sort_unstable();
        // Vesta's names, and `node` beside `machine`.
        let mut want = vec![
            "time",
            "seq",
            "machine",
            "genMethod",
            "type",
            "version",
            "node",
        ];
        want.sort_unstable();
        assert_eq!(vesta, want);
        let twitter = Preset::Twitter.layout();
        let tw = params(&twitter);
        for name in ["datacenterId", "workerId", "sequence", "node", "machine"] {
            assert!(tw.contains(&name), "{name}: {tw:?}");
        }
        assert!(!tw.contains(&"genMethod"));
    }
}
