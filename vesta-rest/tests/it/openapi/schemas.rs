//! Every query parameter's schema accepts exactly the values the server accepts, probed at
//! and beyond its documented range on a max-peak and a min-granularity server.

use super::*;

/// Whether a query parameter's documented schema accepts `text` (the value as sent, decoded).
/// Integers are written in decimal digits with an optional minus sign.
pub(super) fn doc_accepts(spec: &Value, schema: &Value, text: &str) -> bool {
    let schema = resolve(spec, schema);
    let obj = schema.as_object().unwrap();
    for key in obj.keys() {
        assert!(
            [
                "anyOf",
                "type",
                "minimum",
                "maximum",
                "enum",
                "pattern",
                "description"
            ]
            .contains(&key.as_str()),
            "parameter schema keyword {key} is not checked by this test"
        );
    }
    if let Some(any) = obj.get("anyOf") {
        return any
            .as_array()
            .unwrap()
            .iter()
            .any(|s| doc_accepts(spec, s, text));
    }
    match obj["type"].as_str().unwrap() {
        "integer" => {
            let digits = text.strip_prefix('-').unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            let Ok(v) = text.parse::<i128>() else {
                return false;
            };
            let bound = |k: &str| {
                obj.get(k).map(|b| {
                    b.as_i64()
                        .map_or_else(|| i128::from(b.as_u64().unwrap()), i128::from)
                })
            };
            bound("minimum").is_none_or(|min| v >= min)
                && bound("maximum").is_none_or(|max| v <= max)
        }
        "string" => {
            if let Some(e) = obj.get("enum").and_then(Value::as_array) {
                return e.iter().any(|x| x.as_str() == Some(text));
            }
            let pattern = obj["pattern"]
                .as_str()
                .expect("a string parameter needs a pattern or enum");
            regex::Regex::new(pattern).unwrap().is_match(text)
        }
        other => panic!("parameter type {other} is not supported"),
    }
}

/// Values worth trying on a parameter: its schema's edges, enum members and example, plus
/// forms a client might send by mistake.
pub(super) fn probes(spec: &Value, param: &Value) -> Vec<String> {
    let mut out: Vec<String> = [
        "",
        " ",
        "0",
        "1",
        "-1",
        "2",
        "3",
        "4",
        "+1",
        " 1",
        "1 ",
        "1.5",
        "1e3",
        "abc",
        "0x10",
        "0X1f",
        "0x",
        "0x-1",
        "0x10000000000000000",
        "0x00000000000000001",
        "1023",
        "1024",
        "1048575",
        "1048576",
        "1073741823",
        "1073741824",
        "1099511627775",
        "1099511627776",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "REST",
        " rest",
        "Max-Peak",
        "min_granularity",
        // The fixed-width forms of an ID at and over the largest one, and texts that would be
        // one but begin with `0x` (always hex).
        "LygHa16AHYF",
        "LygHa16AHYG",
        "w000wo4jKxS",
        "zzzzzzzzzzz",
        "0X000000000",
        "0xZZZZZZZZZ",
        "FZZZZZZZZZZZZ",
        "fzzzzzzzzzzzz",
        "G000000000000",
        "0xZZZZZZZZZZZ",
        "0x1234567890a",
    ]
    .map(String::from)
    .to_vec();
    let mut schemas = vec![resolve(spec, &param["schema"])];
    if let Some(any) = schemas[0].get("anyOf").and_then(Value::as_array) {
        schemas = any.iter().map(|s| resolve(spec, s)).collect();
    }
    for s in schemas {
        for k in ["minimum", "maximum"] {
            if let Some(b) = s.get(k) {
                let b = b
                    .as_i64()
                    .map_or_else(|| i128::from(b.as_u64().unwrap()), i128::from);
                out.extend([b - 1, b, b + 1].map(|v| v.to_string()));
            }
        }
        if let Some(e) = s.get("enum").and_then(Value::as_array) {
            out.extend(e.iter().map(|v| v.as_str().unwrap().to_owned()));
        }
    }
    if let Some(ex) = param.get("example") {
        out.push(scalar(ex));
    }
    if let Some(exs) = param.get("examples").and_then(Value::as_object) {
        out.extend(exs.values().map(|e| scalar(&e["value"])));
    }
    out
}

/// Percent-encodes everything but unreserved characters, so the server decodes `text` exactly.
pub(super) fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn spec_parameter_schemas_accept_exactly_what_the_server_accepts() {
    let spec = spec();
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 100_000)]).await;
    let peak = with_segments(system_issuer(), rest(), &section).await;
    let mut config = issuer_config();
    config.id.id_type = Some(IdType::MinGranularity);
    config.machine.id = Some(925);
    let gran = with_segments(Issuer::start(config).unwrap(), rest(), &section).await;
    let leaf_server = with_segments(leaf_issuer(), rest(), &section).await;
    let vesta_clients = [peak.client(), gran.client()];
    let leaf_clients = [leaf_server.client()];
    let mut tried = 0;
    for (template, item) in spec["paths"].as_object().unwrap() {
        let params = parameters(&spec, item);
        if params.is_empty() {
            continue;
        }
        let clients: &[Client] = if is_leaf(item) {
            &leaf_clients
        } else {
            &vesta_clients
        };
        // Leaf's path answers a tag it does not know (whatever it looks like) as Leaf does.
        let leaf = template.starts_with("/api/");
        for p in &params {
            let name = p["name"].as_str().unwrap();
            let in_path = p["in"] == "path";
            let others: Vec<String> = params
                .iter()
                .filter(|o| o["name"] != p["name"] && o["required"] == true && o["in"] == "query")
                .map(|o| {
                    format!(
                        "{}={}",
                        o["name"].as_str().unwrap(),
                        encode(&scalar(&o["example"]))
                    )
                })
                .collect();
            let tag = params
                .iter()
                .find(|o| o["in"] == "path" && o["name"] != p["name"])
                .map_or_else(String::new, |o| encode(&scalar(&o["example"])));
            for v in probes(&spec, p) {
                if in_path && v.is_empty() && leaf {
                    continue; // `/api/segment/get/` is no path of Leaf's either (404)
                }
                let mut query = others.clone();
                let path = if in_path {
                    fill(template, &encode(&v))
                } else {
                    query.push(format!("{name}={}", encode(&v)));
                    fill(template, &tag)
                };
                let target = format!("{path}?{}", query.join("&"));
                let mut accepted = false;
                let mut refusals = Vec::new();
                for c in clients {
                    let r = c.get(&target).await;
                    if r.status == 400 {
                        refusals.push(r.error().to_owned());
                    }
                    match r.status {
                        200 => accepted = true,
                        // A well-formed tag that has no row; Leaf's answer for any unknown key.
                        404 if in_path && r.error().starts_with("unknown tag") => accepted = true,
                        500 if in_path && leaf && r.body.contains("status=EXCEPTION") => {
                            accepted = true
                        }
                        400 => assert!(
                            r.error().contains(name),
                            "{target}: the 400 does not name {name}: {}",
                            r.body
                        ),
                        other => panic!("{target}: {other} {}", r.body),
                    }
                }
                let documented = doc_accepts(&spec, &p["schema"], &v);
                assert_eq!(
                    documented,
                    accepted,
                    "{template} {name}={v:?}: the schema {} it, the server {} it",
                    if documented { "accepts" } else { "refuses" },
                    if accepted { "accepts" } else { "refuses" },
                );
                // A value the schema accepts that one server refuses is over that server's own
                // bound (its type's): the 400 names the field and the range it allows.
                if documented {
                    for error in &refusals {
                        assert!(
                            error.contains(&format!("{name} {v} is out of range"))
                                && error.contains("allowed 0..="),
                            "{target}: a value within the schema refused without its range: \
                             {error}"
                        );
                    }
                }
                tried += 1;
            }
        }
    }
    assert!(tried > 400, "{tried}");
    peak.stop().await;
    gran.stop().await;
    leaf_server.stop().await;
}
