//! The status page: what `/healthz` and the metrics say, for a person: the layout and its end
//! of life, the machine ID with its pool, its machine plan (how it is chosen, what keeps it,
//! whether it is held on this host) and lease (deadline, mark, last renewal), the issuing and
//! refusal rates over the last minutes (a chart drawn as inline SVG), refusals by reason, the
//! issuer's own events and the connections.

use std::fmt::Write;
use std::time::{Duration, Instant};

use vesta_core::{Clock, Epoch, Layout, describe_span};
use vesta_embed::Status;
use vesta_embed::config::MachinePlan;

use super::Inner;
use super::html::Html;
use super::rates::{Interval, SAMPLE_EVERY};

/// The whole page.
pub fn page<C: Clock + 'static>(console: &Inner<C>) -> String {
    let issuer = console.service.issuer();
    let s = issuer.status();
    let now_ms = issuer.clock().now_ms();
    let mut h = Html::default();
    issuer_facts(&mut h, console.server, &s, now_ms);
    machine_facts(&mut h, issuer.plan(), &s, now_ms);
    issuing(&mut h, console);
    refusals(&mut h, console, &s);
    h.into_string()
}

fn issuer_facts(h: &mut Html, server: &str, s: &Status, now_ms: u64) {
    h.heading("Issuer");
    if let Some(warning) = s.end_of_life_warning(now_ms) {
        h.para("warn", warning);
    }
    h.facts("issuer");
    if s.can_issue() {
        h.raw("<tr data-key=\"issuing\"><th>Issuing</th><td class=\"ok\">yes</td></tr>\n");
    } else {
        let why = s
            .lease
            .reason
            .clone()
            .unwrap_or_else(|| s.lease.state.to_string());
        h.raw("<tr data-key=\"issuing\"><th>Issuing</th><td class=\"bad\">")
            .text(format_args!("no: {why}"))
            .raw("</td></tr>\n");
    }
    h.fact(
        "server",
        "Server",
        format_args!("{server} (genMethod {})", s.gen_method),
    );
    h.fact("layout", "Layout", s.layout.full_name());
    h.fact("bits", "Bits", s.layout.describe_bits());
    h.fact("epoch", "Epoch", Epoch::rfc3339(s.epoch().unix_ms()));
    h.fact(
        "capacity",
        "Capacity",
        format_args!("{} IDs per second", s.layout.capacity_per_second()),
    );
    h.fact(
        "end_of_life",
        "End of life",
        format_args!(
            "{} ({} left; warned {} before)",
            Epoch::rfc3339(s.end_of_life_ms),
            describe_span(s.end_of_life_ms.saturating_sub(now_ms)),
            describe_span(s.end_of_life_margin_ms)
        ),
    );
    if let Some(sync) = s.clock_sync {
        let state = if sync.synchronised {
            "synchronised"
        } else {
            "NOT synchronised"
        };
        h.fact(
            "clock",
            "System clock",
            format_args!("{state}, max error {} ms", sync.max_error_us / 1000),
        );
    }
    h.end_facts();
}

fn machine_facts(h: &mut Html, plan: &MachinePlan, s: &Status, now_ms: u64) {
    h.heading("Machine ID and lease");
    h.facts("machine");
    h.fact(
        "machine",
        "Machine ID",
        super::explain::machine_and_pool(&s.layout, s.machine),
    );
    // Several machine IDs (`machine.ids`): each with its lease state; the rows below are the
    // whole issuer's (the lease of one that issues, the highest mark, events summed).
    if s.machines.len() > 1 {
        let each: Vec<String> = s
            .machines
            .iter()
            .map(|m| format!("{} {}", m.machine, m.lease.state))
            .collect();
        h.fact(
            "machines",
            "Machine IDs",
            format_args!("{} ({})", s.machines.len(), each.join(", ")),
        );
        if let Some(warning) = s.machines_warning() {
            h.fact("machines_warning", "Not issuing", warning);
        }
    }
    // Where the ID comes from, as the plan the issuer started on says it.
    h.fact("source", "Source", plan);
    h.fact("lease", "Lease", s.lease.state);
    let ago = |t: u64| {
        format!(
            "{} ({} ago)",
            Epoch::rfc3339(t),
            seconds(now_ms.saturating_sub(t))
        )
    };
    if let Some(t) = s.lease.held_since_ms {
        h.fact("held_since", "Held since", ago(t));
    }
    if let Some(t) = s.lease.confirmed_ms {
        h.fact("confirmed", "Last renewal confirmed", ago(t));
        if let Some(window) = s.lease.fence_window_ms {
            let deadline = t.saturating_add(window);
            h.fact(
                "deadline",
                "Deadline (fenced unless renewed by)",
                format_args!(
                    "{} (in {}; fence window {})",
                    Epoch::rfc3339(deadline),
                    seconds(deadline.saturating_sub(now_ms)),
                    seconds(window)
                ),
            );
        }
    }
    if let Some(ms) = s.lease.renew_latency_ms {
        h.fact(
            "renew_latency",
            "Last renewal took",
            format_args!("{ms} ms"),
        );
    }
    h.fact(
        "mark",
        "Mark (last time unit issued)",
        mark(&s.layout, s.last_issued_time),
    );
    h.fact(
        "lease_events",
        "Reconnects / fences / machine changes",
        format_args!(
            "{} / {} / {}",
            s.lease.reconnects, s.lease.fence_events, s.lease.machine_changes
        ),
    );
    if let Some(note) = &s.lease.note {
        h.fact("note", "Note", note);
    }
    h.end_facts();
}

fn mark(layout: &Layout, time: u64) -> String {
    if time == 0 {
        return "nothing issued yet".into();
    }
    format!("{time} ({})", Epoch::rfc3339(layout.unix_ms_of(time)))
}

fn seconds(ms: u64) -> String {
    if ms < 10_000 {
        format!("{:.1} s", ms as f64 / 1000.0)
    } else {
        format!("{} s", ms / 1000)
    }
}

fn issuing<C: Clock + 'static>(h: &mut Html, console: &Inner<C>) {
    let now = Instant::now();
    let (issued, refused) = (console.service.ids_issued(), console.refused_total());
    h.heading("Issuing");
    h.facts("rates");
    h.fact("issued", "IDs issued since start", issued);
    if let Some(segments) = console.service.segments() {
        h.fact(
            "numbers",
            "Segment numbers issued since start",
            segments.numbers_issued(),
        );
    }
    for (key, label, window) in [
        ("rate_1m", "Last minute", Duration::from_secs(60)),
        ("rate_5m", "Last 5 minutes", Duration::from_secs(300)),
    ] {
        if let Some((i, r)) = console.rates.over(window, now, issued, refused) {
            h.fact(
                key,
                label,
                format_args!("{i:.1} IDs/s issued, {r:.2} requests/s refused"),
            );
        }
    }
    let waits = console.service.async_issuer().stats();
    h.fact(
        "waiting",
        "Waiting for sequence space",
        format_args!(
            "{} now; {} waits since start",
            waits.parked, waits.unit_waits_total
        ),
    );
    let (open, max) = console.service.connections().open_and_max();
    h.fact(
        "connections",
        "Connections",
        format_args!("{open} open of {max}"),
    );
    h.fact(
        "uptime",
        "Console up",
        seconds(console.started.elapsed().as_millis() as u64),
    );
    h.end_facts();
    chart(h, &console.rates.intervals(now));
}

/// IDs per second over the last minutes, one bar per sample interval, newest on the right.
fn chart(h: &mut Html, intervals: &[Interval]) {
    const W: f64 = 600.0;
    const H: f64 = 80.0;
    if intervals.is_empty() {
        h.para(
            "muted",
            format_args!("The rate chart starts after {} s.", SAMPLE_EVERY.as_secs()),
        );
        return;
    }
    let max = intervals
        .iter()
        .map(|i| i.issued_per_s)
        .fold(0.0f64, f64::max);
    let slot = W / super::rates::SAMPLES as f64;
    let mut svg = String::new();
    let _ = write!(
        svg,
        "<svg id=\"rate-chart\" viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\" role=\"img\" \
         aria-label=\"IDs issued per second, last {} s, peak {max:.1}\">",
        intervals.len() as u64 * SAMPLE_EVERY.as_secs()
    );
    let first = super::rates::SAMPLES - 1 - intervals.len();
    for (k, i) in intervals.iter().enumerate() {
        let bar = if max > 0.0 {
            i.issued_per_s / max * (H - 2.0)
        } else {
            0.0
        };
        let _ = write!(
            svg,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\"><title>{:.1} IDs/s, \
             {} s ago</title></rect>",
            (first + k) as f64 * slot,
            H - bar.max(1.0),
            slot - 2.0,
            bar.max(1.0),
            i.issued_per_s,
            i.ago_s
        );
    }
    svg.push_str("</svg>\n");
    h.raw(&svg);
    h.para(
        "muted",
        format_args!(
            "IDs issued per second, one bar per {} s, newest on the right; peak {max:.1}.",
            SAMPLE_EVERY.as_secs()
        ),
    );
}

fn refusals<C: Clock + 'static>(h: &mut Html, console: &Inner<C>, s: &Status) {
    h.heading("Refusals and errors since start");
    h.table("refusals", &["Reason", "Requests"]);
    for (reason, n) in console.refusals.refusals() {
        h.row(&reason, &[&reason, &n]);
    }
    h.end_table();
    let waits = console.service.async_issuer().stats();
    h.heading("Issuer events since start");
    h.table("events", &["Event", "Count"]);
    let events: [(&str, &str, u64); 4] = [
        (
            "clock_rollback_refusals",
            "refused: clock behind by more than the tolerance",
            s.generator.clock_rollback_refusals,
        ),
        (
            "clock_rollbacks",
            "clock steps back ridden out",
            s.generator.clock_rollbacks,
        ),
        (
            "saturated",
            "refused: saturated after max_wait_ms",
            waits.expired_total,
        ),
        (
            "fences",
            "issuing fenced (lease not confirmed)",
            s.lease.fence_events,
        ),
    ];
    for (key, label, n) in events {
        h.row(key, &[&label, &n]);
    }
    h.end_table();
}
