//! The REST server's query decoding and `/makeid` under arbitrary query strings.

use super::*;

/// The REST server's query decoding and `/makeid` for every layout, with arbitrary query
/// strings (the first byte picks the endpoint). A decoded query gives back only parameters the
/// endpoint accepts; a number accepted is plain decimal; no error message echoes more than a
/// bounded slice of the input; `/makeid` either makes an ID whose fields are those asked for or
/// refuses naming a field.
pub fn rest_query(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let Ok(raw) = std::str::from_utf8(rest) else {
        return;
    };
    let layouts = layouts();
    let makeid: Vec<(String, Vec<&str>)> = layouts
        .iter()
        .map(|l| (format!("/makeid ({})", l.name()), makeid_params(l)))
        .collect();
    let mut endpoints: Vec<(&str, &[&str])> = vec![
        ("/genid", &["format"]),
        ("/genids", &["count", "format"]),
        ("/expid", &["id"]),
        ("/transtime", &["time"]),
    ];
    endpoints.extend(makeid.iter().map(|(e, p)| (e.as_str(), p.as_slice())));
    let (endpoint, allowed) = endpoints[pick as usize % endpoints.len()];
    let query = match Query::parse(Some(raw), endpoint, allowed) {
        Ok(q) => q,
        Err(e) => {
            assert!(
                e.message.len() <= MAX_MESSAGE_BYTES,
                "{} bytes: {}",
                e.message.len(),
                e.message
            );
            return;
        }
    };
    for name in allowed {
        let Some(value) = query.get(name) else {
            continue;
        };
        match parse_u64(name, value) {
            Ok(n) => {
                assert!(!value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()));
                assert_eq!(value.trim_start_matches('0').parse::<u64>().unwrap_or(0), n);
            }
            Err(e) => assert!(e.message.len() <= MAX_MESSAGE_BYTES, "{}", e.message),
        }
        match *name {
            "id" => {
                let _ = parse_id_text(value);
            }
            "genMethod" => {
                let _ = value.parse::<GenMethod>();
            }
            "type" => {
                let _ = value.parse::<IdType>();
            }
            "format" => {
                if let Err(e) = value.parse::<Form>() {
                    assert!(e.to_string().len() <= MAX_MESSAGE_BYTES, "{e}");
                }
            }
            _ => {}
        }
    }
    // Names not in the endpoint's list are never handed out.
    for name in makeid
        .iter()
        .flat_map(|(_, p)| p)
        .chain(&["count", "id", "format"])
    {
        if !allowed.contains(name) {
            assert_eq!(query.get(name), None);
        }
    }
    // `/makeid` in each layout, the node defaulting to 1 and fixed fields to the layout's own.
    if let Some(i) = makeid.iter().position(|(e, _)| e == endpoint) {
        let layout = &layouts[i];
        let own = FieldValues::new().with("node", 1);
        match make_from_query(layout, Some(raw), &own) {
            Ok(id) => {
                let x = Explanation::new(id, layout);
                for (name, value) in x.values() {
                    if let Some(text) = query.get(name)
                        && let Ok(asked) = parse_u64(name, text)
                    {
                        assert_eq!(asked, value, "{name} of a made ID");
                    }
                }
            }
            Err(e) => assert!(e.message.len() <= MAX_MESSAGE_BYTES, "{}", e.message),
        }
    }
}
