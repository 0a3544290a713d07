//! The segments page (segment mode): the store's state, each tag's current and next segment
//! with its position, step, fetches and last error (what Leaf's `/cache` shows), and the
//! `leaf_alloc` rows as the database has them (Leaf's `/db`). The table is read with a bound,
//! so a slow database makes the page say so instead of hanging it.

use vesta_segment::{SegmentStatus, TagStatus};

use super::DB_READ_TIMEOUT;
use super::html::Html;
use crate::segments::Segments;

/// The whole page.
pub async fn page(segments: &Segments) -> String {
    let status = segments.status();
    let mut h = Html::default();
    h.facts("store");
    h.fact("db", "Database", &status.db);
    h.fact("state", "State", name(status.state));
    if let Some(e) = &status.error {
        h.fact("error", "Error", e);
    }
    h.fact(
        "issued",
        "Numbers issued since start",
        segments.numbers_issued(),
    );
    h.end_facts();
    cache(&mut h, &status.tags);
    table(&mut h, segments).await;
    h.into_string()
}

/// Each tag in use: both buffers, where the current one stands, and the fetch history.
fn cache(h: &mut Html, tags: &[TagStatus]) {
    h.heading("Buffers (tags in use)");
    if tags.is_empty() {
        h.para(
            "muted",
            "No tag asked for yet: a tag's buffers appear on its first request.",
        );
        return;
    }
    h.table(
        "cache",
        &[
            "Tag",
            "State",
            "Position",
            "Current segment",
            "Next segment",
            "Buffered",
            "Step",
            "Table step",
            "Fetches",
            "Errors",
            "Last fetch",
            "Last error",
        ],
    );
    for t in tags {
        let position = t
            .current
            .as_ref()
            .map_or_else(|| "-".to_owned(), |c| (c.end - c.remaining).to_string());
        let latency = t.last_fetch_latency_us.map_or_else(
            || "-".to_owned(),
            |us| format!("{:.1} ms", us as f64 / 1000.0),
        );
        let state = name(t.state);
        let fetching = if t.fetching { ", fetching" } else { "" };
        h.row(
            &t.tag,
            &[
                &t.tag,
                &format_args!("{state}{fetching}"),
                &position,
                &segment(t.current.as_ref()),
                &segment(t.next.as_ref()),
                &t.buffered,
                &t.step,
                &t.table_step,
                &t.fetches,
                &t.fetch_errors,
                &latency,
                &t.last_error.as_deref().unwrap_or("-"),
            ],
        );
    }
    h.end_table();
}

/// A state's name as `/healthz` writes it.
fn name(state: impl serde::Serialize) -> String {
    serde_json::to_value(state)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// `[start, end) remaining N`, or `-`.
fn segment(s: Option<&SegmentStatus>) -> String {
    match s {
        Some(s) => format!("[{}, {}) {} left", s.start, s.end, s.remaining),
        None => "-".into(),
    }
}

/// The `leaf_alloc` rows.
async fn table(h: &mut Html, segments: &Segments) {
    h.heading("leaf_alloc (the table)");
    let store = match segments.store() {
        Ok(store) => store,
        Err(e) => {
            h.error(e);
            return;
        }
    };
    let rows = match tokio::time::timeout(DB_READ_TIMEOUT, store.database().list()).await {
        Ok(Ok(rows)) => rows,
        Ok(Err(e)) => {
            h.error(format_args!("cannot read leaf_alloc: {e}"));
            return;
        }
        Err(_) => {
            h.error(format_args!(
                "leaf_alloc did not answer within {} s",
                DB_READ_TIMEOUT.as_secs()
            ));
            return;
        }
    };
    h.table(
        "db",
        &["biz_tag", "max_id", "step", "update_time", "description"],
    );
    for r in &rows {
        h.row(
            &r.tag,
            &[
                &r.tag,
                &r.max_id,
                &r.step,
                &r.updated.as_deref().unwrap_or("-"),
                &r.description.as_deref().unwrap_or(""),
            ],
        );
    }
    h.end_table();
}
