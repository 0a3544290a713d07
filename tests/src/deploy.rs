//! The deployment files under `deploy/` as the tests read them: the systemd units' keys, the
//! alert rules, the dashboard's queries, and the metric selectors (name and label names) that
//! both use, so a test can look each one up in a real scrape.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use yaml_rust2::{Yaml, YamlLoader};

/// The workspace root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// `rel` (e.g. `deploy/prometheus/vesta.rules.yml`) under the workspace root.
pub fn path(rel: &str) -> PathBuf {
    root().join(rel)
}

/// The text of `rel` under the workspace root.
pub fn read(rel: &str) -> String {
    let p = path(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A systemd unit file: `(section, key, value)` in file order (keys may repeat).
#[derive(Debug)]
pub struct Unit(pub Vec<(String, String, String)>);

impl Unit {
    /// Parses unit-file text (comments, sections, `Key=Value` lines).
    pub fn parse(text: &str) -> Unit {
        let mut section = String::new();
        let mut entries = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
                continue;
            }
            if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                section = name.to_owned();
            } else if let Some((k, v)) = line.split_once('=') {
                entries.push((section.clone(), k.trim().to_owned(), v.trim().to_owned()));
            } else {
                panic!("not a unit-file line: {line:?}");
            }
        }
        Unit(entries)
    }

    /// The last value of `key` in `section` (later assignments win, as in systemd).
    pub fn get(&self, section: &str, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(s, k, _)| s == section && k == key)
            .map(|(_, _, v)| v.as_str())
    }
}

/// One alert rule of `deploy/prometheus/vesta.rules.yml`.
#[derive(Debug)]
pub struct AlertRule {
    /// Its group's name.
    pub group: String,
    /// `alert:`.
    pub name: String,
    /// `expr:`.
    pub expr: String,
    /// `labels:`.
    pub labels: BTreeMap<String, String>,
    /// `annotations:`.
    pub annotations: BTreeMap<String, String>,
}

fn yaml(rel: &str) -> Yaml {
    YamlLoader::load_from_str(&read(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
        .remove(0)
}

fn string_map(y: &Yaml) -> BTreeMap<String, String> {
    y.as_hash()
        .map(|h| {
            h.iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| format!("{v:?}"), str::to_owned);
                    (k.as_str().unwrap_or_default().to_owned(), v)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The alert rules, in file order.
pub fn alert_rules() -> Vec<AlertRule> {
    let doc = yaml("deploy/prometheus/vesta.rules.yml");
    let mut rules = Vec::new();
    for group in doc["groups"].as_vec().expect("groups") {
        let group_name = group["name"].as_str().expect("group name");
        for rule in group["rules"].as_vec().expect("rules") {
            rules.push(AlertRule {
                group: group_name.to_owned(),
                name: rule["alert"].as_str().expect("alert name").to_owned(),
                expr: rule["expr"].as_str().expect("expr").to_owned(),
                labels: string_map(&rule["labels"]),
                annotations: string_map(&rule["annotations"]),
            });
        }
    }
    rules
}

/// `(alert name, expects it firing)` for every `alert_rule_test` case of the promtool tests.
pub fn promtool_cases() -> Vec<(String, bool)> {
    let doc = yaml("deploy/prometheus/vesta.rules.test.yml");
    let mut cases = Vec::new();
    for test in doc["tests"].as_vec().expect("tests") {
        for case in test["alert_rule_test"].as_vec().expect("alert_rule_test") {
            let name = case["alertname"].as_str().expect("alertname").to_owned();
            let firing = case["exp_alerts"].as_vec().is_some_and(|a| !a.is_empty());
            cases.push((name, firing));
        }
    }
    cases
}

/// The Grafana dashboard, parsed.
pub fn dashboard() -> serde_json::Value {
    serde_json::from_str(&read("deploy/grafana/vesta.json")).expect("the dashboard is JSON")
}

/// `(panel title, expr)` of every query of the dashboard.
pub fn dashboard_queries() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in dashboard()["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_owned();
            let expr = target["expr"].as_str().expect("a target without expr");
            out.push((title, expr.to_owned()));
        }
    }
    out
}

/// A metric a query reads, with the label names it matches on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Selector {
    /// The metric name (`vesta_...`, or `up`).
    pub metric: String,
    /// Label names in its `{...}` matchers.
    pub labels: Vec<String>,
}

impl Selector {
    /// True for the segment-mode metrics, which only servers with a segment database export.
    pub fn is_segment(&self) -> bool {
        self.metric.starts_with("vesta_segment_")
    }
}

/// Every metric selector in a PromQL expression: `vesta_*` names (and `up`), with the label
/// names of their matchers. Words inside quotes, `by (...)` and `on (...)` are not selectors.
pub fn selectors(expr: &str) -> Vec<Selector> {
    let bytes = expr.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b':';
    while i < bytes.len() {
        if bytes[i] == b'"' {
            i += 1 + expr[i + 1..].find('"').expect("closing quote");
            i += 1;
            continue;
        }
        if !word(bytes[i]) || (i > 0 && word(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && word(bytes[i]) {
            i += 1;
        }
        let name = &expr[start..i];
        if !(name.starts_with("vesta_") || name == "up") {
            continue;
        }
        let mut labels = Vec::new();
        if bytes.get(i) == Some(&b'{') {
            // Matchers: `label op "value"`, separated by commas, up to the closing brace.
            i += 1;
            loop {
                while matches!(bytes.get(i), Some(b' ' | b',' | b'\n')) {
                    i += 1;
                }
                if bytes.get(i).is_none_or(|b| *b == b'}') {
                    i += 1;
                    break;
                }
                let label_start = i;
                while i < bytes.len() && word(bytes[i]) {
                    i += 1;
                }
                labels.push(expr[label_start..i].to_owned());
                let q1 = i + expr[i..].find('"').expect("quoted value");
                let q2 = q1 + 1 + expr[q1 + 1..].find('"').expect("closing quote");
                i = q2 + 1;
            }
        }
        out.push(Selector {
            metric: name.to_owned(),
            labels,
        });
    }
    out
}

/// Every selector the alert rules and the dashboard use, deduplicated.
pub fn all_selectors() -> Vec<Selector> {
    let mut all: Vec<Selector> = alert_rules()
        .iter()
        .flat_map(|r| selectors(&r.expr))
        .chain(dashboard_queries().iter().flat_map(|(_, e)| selectors(e)))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// GitHub's anchor of a Markdown heading's text: lower case, punctuation dropped, spaces to
/// dashes.
pub fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of every heading of a Markdown document (code blocks skipped).
pub fn anchors(markdown: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in markdown.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_names_with_their_label_names() {
        let s = selectors(
            r#"sum by (job, instance) (rate(vesta_http_requests_total{status=~"5.."}[5m])) / on (job) vesta_x{a="b, c=}", d!="e"} > 0 or up{job=~"vesta.*"} == 0"#,
        );
        let got: Vec<_> = s
            .iter()
            .map(|s| (s.metric.as_str(), s.labels.clone()))
            .collect();
        assert_eq!(
            got,
            [
                ("vesta_http_requests_total", vec!["status".to_owned()]),
                ("vesta_x", vec!["a".to_owned(), "d".to_owned()]),
                ("up", vec!["job".to_owned()]),
            ]
        );
        assert!(selectors(r#"label_values(vesta_y, "vesta_z")"#).len() == 1);
    }

    #[test]
    fn anchors_follow_githubs_rule() {
        assert_eq!(anchor(" VestaNotIssuing"), "vestanotissuing");
        assert_eq!(
            anchor("End of life: a new epoch"),
            "end-of-life-a-new-epoch"
        );
    }
}
