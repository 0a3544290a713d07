//! The spec's paths are exactly the server's endpoints, with their methods (an undeclared one
//! is a 405 with `Allow`) and exactly the query parameters the server accepts.

use super::*;

#[tokio::test]
async fn spec_paths_are_the_servers_endpoints() {
    let spec = spec();
    let documented: BTreeSet<&str> = spec["paths"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let served: BTreeSet<&str> = Endpoint::ALL.iter().filter_map(|e| e.path()).collect();
    assert_eq!(documented, served);
    for (path, item) in spec["paths"].as_object().unwrap() {
        let endpoint = Endpoint::from_path(&fill(path, "t").replace("{key}", "k"));
        assert_eq!(endpoint.any_method(), is_leaf(item), "{path}");
        if is_leaf(item) {
            assert_eq!(
                declared(item),
                METHODS,
                "{path}: Leaf's paths declare every method"
            );
        } else {
            assert_eq!(declared(item), ["get"], "{path}: GET only");
        }
    }
}

/// The methods an OpenAPI path item can declare.
pub(super) const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

/// The methods `item` declares, in [`METHODS`]' order.
pub(super) fn declared(item: &Value) -> Vec<&'static str> {
    METHODS
        .into_iter()
        .filter(|m| item.get(*m).is_some())
        .collect()
}

/// A method a path does not declare is a 405 naming the path, with `Allow: GET` (what
/// schemathesis checks: `TRACE /decodeSnowflakeId` was a 404 while the path only declared
/// GET); one it declares is never a 405 — on a server of either layout, with segments.
#[tokio::test]
async fn a_method_a_path_does_not_declare_is_a_405() {
    let spec = spec();
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1000)]).await;
    let vesta = with_segments(system_issuer(), rest(), &section).await;
    let leaf = with_segments(leaf_issuer(), rest(), &section).await;
    let mut tried = 0;
    for (template, item) in spec["paths"].as_object().unwrap() {
        let path = fill(template, "orders").replace("{key}", "k");
        let declared = declared(item);
        for server in [&vesta, &leaf] {
            for method in METHODS {
                let m = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
                let r = server.client().request(m, &path).await;
                if declared.contains(&method) {
                    assert_ne!(r.status, 405, "{method} {path} is declared: {r:?}");
                    continue;
                }
                assert_eq!(r.status, 405, "{method} {path}: {r:?}");
                assert_eq!(r.header("allow"), "GET", "{method} {path}");
                if method != "head" {
                    let want = format!(
                        "method {} is not allowed on {template}: use GET",
                        method.to_uppercase()
                    );
                    assert_eq!(r.error(), want);
                }
                tried += 1;
            }
        }
    }
    assert!(tried > 100, "{tried}");
    vesta.stop().await;
    leaf.stop().await;
}

#[tokio::test]
async fn spec_parameters_are_the_servers_parameters() {
    let spec = spec();
    let dir = tempfile::tempdir().unwrap();
    let section = segment_db(dir.path(), &[("orders", 1000)]).await;
    let server = with_segments(system_issuer(), rest(), &section).await;
    let leaf = with_segments(leaf_issuer(), rest(), &section).await;
    for (template, item) in spec["paths"].as_object().unwrap() {
        let c = if is_leaf(item) {
            leaf.client()
        } else {
            server.client()
        };
        let all = parameters(&spec, item);
        // A path parameter is part of the path: filled with its example, always required.
        let mut path = template.clone();
        for p in all.iter().filter(|p| p["in"] == "path") {
            assert_eq!(
                p["required"], true,
                "{template}: path parameters are required"
            );
            let name = p["name"].as_str().unwrap();
            path = path.replace(&format!("{{{name}}}"), &scalar(&p["example"]));
        }
        assert!(
            !path.contains('{'),
            "{template}: a path parameter is not documented"
        );
        let params: Vec<(String, bool)> = all
            .iter()
            .filter(|p| p["in"] != "path")
            .map(|p| {
                assert_eq!(p["in"], "query");
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["required"] == true,
                )
            })
            .collect();
        if is_leaf(item) {
            leaf_parameters(&c, &path, &params).await;
            continue;
        }
        // The server lists what it accepts when given an unknown parameter.
        let r = c.get(&format!("{path}?zzz=1")).await;
        assert_eq!(r.status, 400);
        let msg = r.error();
        let accepted = msg
            .split_once(" accepts ")
            .unwrap_or_else(|| panic!("{msg}"))
            .1;
        let served: BTreeSet<&str> = if accepted == "no parameters" {
            BTreeSet::new()
        } else {
            accepted.split(", ").collect()
        };
        let documented: BTreeSet<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(documented, served, "{path}");
        assert!(msg.contains(&format!(": {template} accepts ")), "{msg}");
        // Required means required: leaving one out is a 400 naming it.
        for (name, required) in &params {
            let others: Vec<String> = params
                .iter()
                .filter(|(n, req)| n != name && *req)
                .map(|(n, _)| format!("{n}=1"))
                .collect();
            let r = c.get(&format!("{path}?{}", others.join("&"))).await;
            if *required {
                assert_eq!(r.status, 400, "{path} without {name}");
                assert_eq!(r.error(), format!("missing required parameter {name}"));
            } else {
                assert_eq!(r.status, 200, "{path} without optional {name}: {}", r.body);
            }
        }
    }
    server.stop().await;
    leaf.stop().await;
}

/// A Leaf path ignores unknown parameters (200 with them) and, as Spring does, answers a
/// missing required one with a 400 naming it.
pub(super) async fn leaf_parameters(c: &Client, path: &str, params: &[(String, bool)]) {
    let given: Vec<String> = params
        .iter()
        .filter(|(_, req)| *req)
        .map(|(n, _)| format!("{n}=1"))
        .collect();
    let r = c.get(&format!("{path}?{}&zzz=1", given.join("&"))).await;
    assert_eq!(
        r.status, 200,
        "{path}: an unknown parameter is ignored: {}",
        r.body
    );
    for (name, required) in params {
        if *required {
            let r = c.get(path).await;
            assert_eq!(r.status, 400, "{path} without {name}");
            assert!(
                r.body.contains(&format!("'{name}' is not present")),
                "{}",
                r.body
            );
        }
    }
}

// Two workers: the cluster members' beats (a lease of 3 s) run beside the test's own work.
