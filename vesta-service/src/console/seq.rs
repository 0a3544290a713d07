//! The per-key sequences page (`[seq] db`): a lookup of one key's current number, what is in
//! memory and what the table did since start (raises, their failures and mean latency, loads,
//! evictions, fenced sections flagged), and the sequences' database and settings.
//!
//! The lookup reads, never writes: it uses [`Sequences::peek`], not `current`, because loading
//! a section that is not in memory would write its row and take memory. A key whose section is
//! not loaded is answered from its stored row, read with a bound like the segments page's.

use vesta_seq::{MAX_KEY_BYTES, SeqKey, SeqPeek, SeqStatus, Sequences};

use super::DB_READ_TIMEOUT;
use super::html::Html;
use crate::query::{BadRequest, Query, shorten};

/// The whole page: fenced sections first, the lookup form (with `?key=`, that key's number),
/// then the state.
pub async fn page(seqs: &Sequences, issued: u64, query: Option<&str>) -> String {
    let status = seqs.status();
    let mut h = Html::default();
    if status.fenced > 0 {
        h.error(format_args!(
            "{} section(s) fenced: another process raised them in vesta_seq (two servers on one \
             table?); this server refuses their keys. Stop the other process, then restart this \
             server (docs/operations.md, VestaSeqSectionFenced)",
            status.fenced
        ));
    }
    let asked = Query::parse(query, "/ui/seq", &["key"]);
    let key = asked.as_ref().ok().and_then(|q| q.get("key"));
    lookup_form(&mut h, key.unwrap_or(""));
    match (&asked, key) {
        (Err(e), _) => {
            h.error(e);
        }
        (Ok(_), Some(key)) => match SeqKey::parse(key.as_bytes()) {
            Ok(key) => lookup(&mut h, seqs, &key).await,
            // The API's sentence for the same key (`/seq/{key}` answers it as a 400).
            Err(e) => {
                h.error(BadRequest::invalid_param("key", e));
            }
        },
        (Ok(_), None) => {}
    }
    activity(&mut h, seqs, &status, issued);
    settings(&mut h, seqs);
    h.into_string()
}

/// The database (password hidden) and the settings in force.
fn settings(h: &mut Html, seqs: &Sequences) {
    let o = seqs.options();
    h.heading("Database and settings");
    h.facts("seq");
    h.fact("db", "Database", seqs.url());
    h.fact("step", "Step (first raise, largest batch)", o.step);
    h.fact(
        "max_step",
        "Max step (the adaptive step's ceiling)",
        o.max_step,
    );
    h.fact(
        "store_timeout_ms",
        "Store timeout",
        format_args!("{} ms", o.store_timeout.as_millis()),
    );
    h.fact(
        "max_memory_mb",
        "Max memory of the sections",
        format_args!("{} MiB", o.max_memory >> 20),
    );
    h.fact(
        "idle_s",
        "Idle section evicted after",
        format_args!("{} s", o.idle.as_secs()),
    );
    h.end_facts();
}

/// Memory and the table's work since start; failures and fenced sections flagged.
fn activity(h: &mut Html, seqs: &Sequences, s: &SeqStatus, issued: u64) {
    h.heading("Since start");
    let o = seqs.options();
    h.facts("activity");
    h.fact(
        "memory",
        "Memory of the sections",
        format_args!(
            "{:.1} of {} MiB",
            s.memory_bytes as f64 / f64::from(1 << 20),
            o.max_memory >> 20
        ),
    );
    h.fact(
        "sections",
        "Sections in memory",
        format_args!("{} ({} dense)", s.sections, s.dense_sections),
    );
    h.fact("numeric_keys", "Numeric keys in tables", s.numeric_keys);
    h.fact("string_keys", "String keys in memory", s.string_keys);
    h.fact("issued", "Numbers issued since start", issued);
    h.fact("raises", "Raises (the table's writes)", s.raises);
    h.fact_flagged(
        "raise_failures",
        "Raise failures",
        s.raise_failures,
        s.raise_failures > 0,
    );
    let latency = if s.raises == 0 {
        "-".to_owned()
    } else {
        format!("{:.1} ms", s.raise_micros as f64 / s.raises as f64 / 1000.0)
    };
    h.fact("raise_latency", "Mean raise latency", latency);
    h.fact("loads", "Section loads", s.loads);
    h.fact("evictions", "Evictions", s.evictions);
    h.fact_flagged("fenced", "Fenced sections", s.fenced, s.fenced > 0);
    h.end_facts();
}

/// The `GET` form, holding the key asked for (a key too long to be one is shown cut).
fn lookup_form(h: &mut Html, key: &str) {
    let shown = if key.len() <= MAX_KEY_BYTES {
        key.into()
    } else {
        shorten(key)
    };
    h.heading("Look up a key");
    h.raw("<form method=\"get\" action=\"/ui/seq\" id=\"lookup\">\n")
        .raw("<label>Key (a number, or text of 1 to 128 bytes)")
        .raw("<input name=\"key\" required maxlength=\"128\" autocomplete=\"off\" spellcheck=\"false\" value=\"")
        .text(shown)
        .raw("\"></label>\n<button type=\"submit\">Look up</button>\n</form>\n")
        .para(
            "muted",
            "Read only: the key does not move, and a key whose section is not in memory is \
             read from vesta_seq, not loaded.",
        );
}

/// The key's number, read without moving or loading anything.
async fn lookup(h: &mut Html, seqs: &Sequences, key: &SeqKey) {
    let peeked = match tokio::time::timeout(DB_READ_TIMEOUT, seqs.peek(key)).await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            h.error(e);
            return;
        }
        Err(_) => {
            h.error(format_args!(
                "vesta_seq did not answer within {} s",
                DB_READ_TIMEOUT.as_secs()
            ));
            return;
        }
    };
    if let SeqPeek::InMemory {
        fenced: Some(why), ..
    } = &peeked
    {
        h.error(why);
    }
    let kind = match key {
        SeqKey::Num(_) => "a number",
        SeqKey::Str(_) => "text",
    };
    h.facts("key");
    h.fact("key", "Key", format_args!("{key} ({kind})"));
    match peeked {
        SeqPeek::InMemory {
            current,
            max,
            fenced,
        } => {
            let state = if fenced.is_some() {
                "in memory, fenced"
            } else {
                "in memory"
            };
            h.fact_flagged("section", "Its section", state, fenced.is_some());
            h.fact("current", "Current number", current);
            h.fact("max", "Section's max (confirmed by the table)", max);
        }
        SeqPeek::Stored { max } => {
            h.fact(
                "section",
                "Its section",
                "not in memory (its row was read, not loaded)",
            );
            match max {
                Some(max) => {
                    h.fact(
                        "current",
                        "Current number",
                        format_args!(
                            "not in memory: its next number will be above the stored max {max}"
                        ),
                    );
                    h.fact("max", "Section's max (stored)", max);
                }
                None => {
                    h.fact(
                        "current",
                        "Current number",
                        "not in memory, and its section has no row in vesta_seq: never \
                         handed a number",
                    );
                    h.fact("max", "Section's max (stored)", "-");
                }
            }
        }
    }
    h.end_facts();
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use vesta_core::{GenMethod, IdType, ManualClock};
    use vesta_seq::{DbUrl, SeqOptions};

    use super::super::html::esc;
    use super::super::{Console, NoRefusals};
    use super::*;
    use crate::ops::testing::service;
    use crate::ops::{Answer, Service, Turn};

    async fn open(dir: &std::path::Path) -> Sequences {
        let url = DbUrl::parse(&format!("sqlite://{}/seq.db", dir.display())).unwrap();
        let options = SeqOptions {
            step: 10,
            ..SeqOptions::default()
        };
        let owner = vesta_seq::Owner::standalone().floors_in(dir.join("floors"));
        Sequences::open_as(&url, options, owner).await.unwrap()
    }

    /// A console on a service with `seqs`.
    fn console(seqs: &Sequences) -> (Console<Arc<ManualClock>>, Arc<Service<Arc<ManualClock>>>) {
        let (s, _clock) = service(IdType::MaxPeak, GenMethod::Server, 10);
        let s = Arc::new(s.with_seq(Some(seqs.clone())));
        (
            Console::new("REST", Arc::clone(&s), Box::new(NoRefusals)),
            s,
        )
    }

    /// A number of `key` through the service (counted as the API's are).
    async fn next(s: &Service<Arc<ManualClock>>, key: &str) -> u64 {
        match s.seq_next(key.as_bytes(), 1, Turn::Now) {
            Answer::Now(r) => r.unwrap().last,
            Answer::Later(l) => l.await.unwrap().last,
        }
    }

    /// The value cell of the first row `data-key="key"`.
    fn fact<'a>(html: &'a str, key: &str) -> Option<&'a str> {
        let row = &html[html.find(&format!("data-key=\"{key}\""))?..];
        let td = &row[row.find("<td")?..];
        let td = &td[td.find('>')? + 1..];
        Some(&td[..td.find("</td>")?])
    }

    /// The state: settings, memory and counters; a fenced count of 0 is not flagged.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_page_shows_the_sequences_state() {
        let dir = tempfile::tempdir().unwrap();
        let seqs = open(dir.path()).await;
        let (console, s) = console(&seqs);
        // Past the first step of 10 (a row created a step up): one raise at least.
        for _ in 0..11 {
            next(&s, "42").await;
        }
        next(&s, "chat:7").await;
        let page = console.answer("/ui/seq", None).await;
        assert_eq!(page.status, 200);
        let h = &page.html;
        assert!(
            h.contains("<a href=\"/ui/seq\" aria-current=\"page\">Sequences</a>"),
            "{h}"
        );
        let db = fact(h, "db").unwrap();
        assert!(
            db.starts_with("sqlite://") && db.ends_with("/seq.db"),
            "{db}"
        );
        assert_eq!(fact(h, "step"), Some("10"));
        assert_eq!(fact(h, "max_step"), Some("1000000"));
        assert_eq!(fact(h, "store_timeout_ms"), Some("3000 ms"));
        assert_eq!(fact(h, "max_memory_mb"), Some("256 MiB"));
        assert_eq!(fact(h, "idle_s"), Some("600 s"));
        // Section 0, and the string buckets one load brought (up to 1,024 on SQLite).
        let status = seqs.status();
        assert!(status.sections >= 2, "{status:?}");
        let sections = format!("{} (0 dense)", status.sections);
        assert_eq!(fact(h, "sections"), Some(sections.as_str()));
        assert_eq!(fact(h, "numeric_keys"), Some("1"));
        assert_eq!(fact(h, "string_keys"), Some("1"));
        assert!(fact(h, "memory").unwrap().ends_with(" of 256 MiB"), "{h}");
        assert_eq!(fact(h, "issued"), Some("12"));
        assert!(status.raises >= 1, "{status:?}");
        assert_eq!(fact(h, "raises"), Some(status.raises.to_string().as_str()));
        assert!(fact(h, "raise_latency").unwrap().ends_with(" ms"), "{h}");
        assert_eq!(fact(h, "raise_failures"), Some("0"));
        assert_eq!(fact(h, "loads"), Some(status.loads.to_string().as_str()));
        assert_eq!(fact(h, "evictions"), Some("0"));
        assert_eq!(fact(h, "fenced"), Some("0"));
        assert!(!h.contains("class=\"bad\""), "{h}");
        assert!(!h.contains("class=\"error\""), "{h}");
        assert!(h.contains("<form method=\"get\" action=\"/ui/seq\""), "{h}");
    }

    /// A loaded key shows its current number; a key of a section not in memory is read from
    /// its row, and the page neither loads nor raises it (the stored max stays, the counters
    /// stay, a never-used section still has no row).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lookup_reads_the_key_without_loading_or_writing() {
        let dir = tempfile::tempdir().unwrap();
        // An earlier process used key 100042 (section 1).
        let before = open(dir.path()).await;
        for _ in 0..3 {
            before.next(&SeqKey::Num(100_042)).await.unwrap();
        }
        before.close().await;
        drop(before);

        let seqs = open(dir.path()).await;
        let (console, s) = console(&seqs);
        for _ in 0..3 {
            next(&s, "42").await;
        }
        let page = console.answer("/ui/seq", Some("key=42")).await;
        assert_eq!(fact(&page.html, "current"), Some("3"), "{}", page.html);
        assert_eq!(fact(&page.html, "section"), Some("in memory"));
        assert_eq!(fact(&page.html, "key"), Some("42 (a number)"));

        let status = seqs.status();
        let mut stored = None;
        for _ in 0..2 {
            let page = console.answer("/ui/seq", Some("key=100042")).await;
            let h = &page.html;
            let max: u64 = fact(h, "max").unwrap().parse().unwrap();
            assert!(max >= 3, "{h}");
            assert_eq!(
                fact(h, "current").unwrap(),
                format!("not in memory: its next number will be above the stored max {max}")
            );
            assert_eq!(*stored.get_or_insert(max), max, "the stored max moved");
            let page = console.answer("/ui/seq", Some("key=9000000")).await;
            assert_eq!(
                fact(&page.html, "current"),
                Some(
                    "not in memory, and its section has no row in vesta_seq: never handed a \
                     number"
                ),
                "{}",
                page.html
            );
        }
        assert_eq!(seqs.status(), status, "the page loaded or raised a section");
        // A load (what the API's `current` does) finds the max the page read, unraised.
        assert_eq!(
            seqs.current(&SeqKey::Num(100_042)).await.unwrap(),
            stored.unwrap()
        );
        assert_eq!(seqs.status().loads, status.loads + 1);
        assert_eq!(
            fact(&console.answer("/ui/seq", None).await.html, "issued"),
            Some("3")
        );
    }

    /// A section fenced by another process on the table is flagged: an alert on top, the count
    /// and the looked-up key's section marked bad, the reason shown.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fenced_sections_are_flagged() {
        let dir = tempfile::tempdir().unwrap();
        let a = open(dir.path()).await;
        let k = SeqKey::Num(5);
        a.next(&k).await.unwrap();
        // Another process raises the row past what `a` last wrote (one holding no lease: an
        // older build, a hand edit).
        let other = sqlx::SqlitePool::connect(&format!("sqlite://{}/seq.db", dir.path().display()))
            .await
            .unwrap();
        sqlx::query("UPDATE vesta_seq SET max_seq = max_seq + 100, owner = 7 WHERE kind = 0")
            .execute(&other)
            .await
            .unwrap();
        other.close().await;
        let mut fenced = false;
        for _ in 0..20 {
            if let Err(e) = a.next(&k).await {
                assert!(matches!(e, vesta_seq::SeqError::Fenced { .. }), "{e:?}");
                fenced = true;
                break;
            }
        }
        assert!(fenced, "`a` was not fenced");
        let (console, _s) = console(&a);
        let page = console.answer("/ui/seq", Some("key=5")).await;
        let h = &page.html;
        assert!(
            h.contains("role=\"alert\">") && h.contains("section(s) fenced: another process"),
            "{h}"
        );
        let count = a.status().fenced;
        assert!(
            h.contains(&format!(
                "<tr data-key=\"fenced\"><th>Fenced sections</th><td class=\"bad\">{count}</td>"
            )),
            "{h}"
        );
        assert!(
            h.contains("<td class=\"bad\">in memory, fenced</td>"),
            "{h}"
        );
        assert!(h.contains("another process raised it"), "{h}");
    }

    /// A bad key gets the key rule's message as the API words it, escaped; a hostile key and
    /// parameter are text too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn bad_keys_get_the_key_rule_escaped() {
        let dir = tempfile::tempdir().unwrap();
        let seqs = open(dir.path()).await;
        let (console, _s) = console(&seqs);
        let long = "x".repeat(129);
        for (query, key) in [
            ("key=", "".to_owned()),
            ("key=%3Cb%3E%01", "<b>\u{1}".to_owned()),
            (&format!("key={long}") as &str, long.clone()),
        ] {
            let page = console.answer("/ui/seq", Some(query)).await;
            assert_eq!(page.status, 200);
            let rule = SeqKey::parse(key.as_bytes()).unwrap_err();
            let want = format!("invalid parameter key: {rule}");
            assert!(
                page.html
                    .contains(&format!("role=\"alert\">{}</p>", esc(&want))),
                "{query}: {}",
                page.html
            );
            assert!(!page.html.contains("<b>"), "{}", page.html);
            assert!(!page.html.contains("data-key=\"current\""), "{}", page.html);
        }
        // A valid key that looks like markup is text.
        let page = console.answer("/ui/seq", Some("key=%3Cscript%3E")).await;
        assert!(!page.html.contains("<script>"), "{}", page.html);
        assert_eq!(
            fact(&page.html, "key"),
            Some("&quot;&lt;script&gt;&quot; (text)")
        );
        let page = console.answer("/ui/seq", Some("kee=%3Ci%3E")).await;
        assert!(
            page.html
                .contains("unknown parameter kee: /ui/seq accepts key"),
            "{}",
            page.html
        );
        assert_eq!(seqs.status().loads, 0, "a bad lookup loaded a section");
    }
}
