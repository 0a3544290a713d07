//! The metrics both servers export alike (names prefixed `vesta_`): the issuer's fixed identity,
//! a collector that reads `Issuer::status()` and the waiting list's counters at each scrape, the
//! open client connections beside their limit, and with segment mode on a collector that reads
//! each tag's status (`vesta_segment_*{tag}`) — never stale, and free between scrapes. Each
//! server registers these beside its own request metrics (prometheus-client); the alert rules and
//! the dashboard in deploy/ read them by these names.
//!
//! The `tag` label stays bounded: only tags in use appear, and a tag is in use only once it
//! was found in `leaf_alloc` (an unknown tag is refused before it gets a buffer).

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use vesta_core::Clock;
use vesta_embed::{AsyncIssuer, Issuer, LeaseState};
use vesta_segment::{TagState, TagStatus};
use vesta_seq::Sequences;

use crate::segments::Segments;

/// Registers the issuer's metrics in `registry` (which should have the `vesta` prefix).
pub fn register_issuer<C: Clock + 'static>(registry: &mut Registry, ids: &AsyncIssuer<C>) {
    let issuer = Arc::clone(ids.issuer());
    let status = issuer.status();
    registry.register(
        "issuer",
        "The issuer's fixed identity",
        Info::new(vec![
            ("gen_method", status.gen_method.name().to_owned()),
            // Vesta's type; the peers' layouts have none.
            (
                "type",
                status.layout.id_type().map_or("", |t| t.name()).to_owned(),
            ),
            ("epoch_ms", status.epoch().unix_ms().to_string()),
            ("layout", status.layout.name().to_owned()),
        ]),
    );
    registry.register_collector(Box::new(IssuerCollector {
        issuer,
        ids: ids.clone(),
    }));
}

/// The open-connections gauge of a server (`vesta_connections`) beside its limit
/// (`vesta_connections_max`): each connection holds an [`OpenConnection`] while it lives, so
/// the count cannot drift whichever way the connection ends.
#[derive(Clone, Debug)]
pub struct Connections {
    open: Gauge<i64, AtomicI64>,
    max: Gauge<i64, AtomicI64>,
}

impl Connections {
    /// No connection open yet, under `server.max_connections` = `max_connections`.
    pub fn new(max_connections: u64) -> Self {
        let max = Gauge::<i64, AtomicI64>::default();
        max.set(i64::try_from(max_connections).unwrap_or(i64::MAX));
        Connections {
            open: Gauge::default(),
            max,
        }
    }

    /// Registers both gauges in `registry` (which should have the `vesta` prefix).
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "connections",
            "Client connections open now",
            self.open.clone(),
        );
        registry.register(
            "connections_max",
            "server.max_connections: the most connections served at once",
            self.max.clone(),
        );
    }

    /// Counts one more open connection until the returned guard is dropped.
    pub fn open(&self) -> OpenConnection {
        self.open.inc();
        OpenConnection(self.open.clone())
    }

    /// Connections open now.
    pub fn get(&self) -> i64 {
        self.open.get()
    }

    /// Connections open now, and `server.max_connections`.
    pub fn open_and_max(&self) -> (u64, u64) {
        let n = |g: &Gauge<i64, AtomicI64>| u64::try_from(g.get()).unwrap_or(0);
        (n(&self.open), n(&self.max))
    }
}

/// One open connection, counted in [`Connections`] until dropped.
#[derive(Debug)]
#[must_use = "the connection is counted only while this guard lives"]
pub struct OpenConnection(Gauge<i64, AtomicI64>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Reads the issuer's status at each scrape.
struct IssuerCollector<C: Clock + 'static> {
    issuer: Arc<Issuer<C>>,
    ids: AsyncIssuer<C>,
}

impl<C: Clock + 'static> fmt::Debug for IssuerCollector<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("IssuerCollector")
    }
}

const LEASE_STATES: [LeaseState; 5] = [
    LeaseState::Static,
    LeaseState::Acquiring,
    LeaseState::Held,
    LeaseState::Fenced,
    LeaseState::Released,
];

impl<C: Clock + 'static> Collector for IssuerCollector<C> {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = self.issuer.status();
        let now_ms = self.issuer.clock().now_ms();
        let counter = |e: &mut DescriptorEncoder, name: &str, help: &str, v: u64| {
            let m = ConstCounter::new(v);
            m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
        };
        let gauge = |e: &mut DescriptorEncoder, name: &str, help: &str, v: i64| {
            let m = ConstGauge::new(v);
            m.encode(e.encode_descriptor(name, help, None, m.metric_type())?)
        };
        counter(
            &mut encoder,
            "clock_rollbacks",
            "Clock steps backwards ridden out within the tolerance",
            s.generator.clock_rollbacks,
        )?;
        counter(
            &mut encoder,
            "clock_rollback_refusals",
            "Requests refused because the clock was behind by more than the tolerance",
            s.generator.clock_rollback_refusals,
        )?;
        counter(
            &mut encoder,
            "lease_fence_events",
            "Times issuing was fenced because the machine-ID lease could not be confirmed",
            s.lease.fence_events,
        )?;
        counter(
            &mut encoder,
            "lease_reconnects",
            "ZooKeeper sessions re-established after a loss",
            s.lease.reconnects,
        )?;
        counter(
            &mut encoder,
            "lease_machine_changes",
            "Times the lease was re-acquired under a different machine ID than the one held before",
            s.lease.machine_changes,
        )?;
        // The lease's pace (leasing sources only): the last renewal's round trip, the fence
        // window it must stay well inside, and how long ago the lease was last confirmed.
        let ms = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        if let Some(v) = s.lease.renew_latency_ms {
            gauge(
                &mut encoder,
                "lease_renew_latency_milliseconds",
                "How long the last confirmed renewal of the machine-ID lease took (mark sent to \
                 confirmed): the lease store's latency as the lease sees it",
                ms(v),
            )?;
        }
        if let Some(v) = s.lease.fence_window_ms {
            gauge(
                &mut encoder,
                "lease_fence_window_milliseconds",
                "Issuing stops this long after the last confirmed renewal was sent",
                ms(v),
            )?;
        }
        if let Some(t) = s.lease.confirmed_ms {
            gauge(
                &mut encoder,
                "lease_confirmed_age_milliseconds",
                "Time since the machine-ID lease was last confirmed by its store",
                ms(now_ms.saturating_sub(t)),
            )?;
        }
        gauge(
            &mut encoder,
            "machine_id",
            "The machine ID in use (the first, with several: see machine_issuing)",
            i64::try_from(s.machine).unwrap_or(i64::MAX),
        )?;
        if let Some(sync) = s.clock_sync {
            gauge(
                &mut encoder,
                "clock_synchronised",
                "1 while the kernel considers the system clock synchronised, 0 while it marks \
                 it unsynchronised (STA_UNSYNC); absent where it cannot tell",
                i64::from(sync.synchronised),
            )?;
            gauge(
                &mut encoder,
                "clock_max_error_milliseconds",
                "The kernel's bound on the system clock's error (adjtimex maxerror)",
                i64::try_from(sync.max_error_us / 1000).unwrap_or(i64::MAX),
            )?;
        }
        gauge(
            &mut encoder,
            "issuing",
            "1 while the issuer may issue IDs, 0 while fenced or waiting on its start guard",
            i64::from(s.can_issue()),
        )?;
        gauge(
            &mut encoder,
            "layout_capacity_per_second",
            "The layout's cap: IDs one machine ID can issue per second (divide the issue rate \
             by it for the fill)",
            i64::try_from(s.layout.capacity_per_second()).unwrap_or(i64::MAX),
        )?;
        let remaining_s = s.end_of_life_ms.saturating_sub(now_ms) / 1000;
        gauge(
            &mut encoder,
            "end_of_life_remaining_seconds",
            "Seconds until the layout's time field is full (no IDs after that)",
            i64::try_from(remaining_s).unwrap_or(i64::MAX),
        )?;
        gauge(
            &mut encoder,
            "end_of_life_margin_seconds",
            "id.end_of_life_margin_days in seconds: below it the issuer warns of its end of life",
            i64::try_from(s.end_of_life_margin_ms / 1000).unwrap_or(i64::MAX),
        )?;
        let waits = self.ids.stats();
        counter(
            &mut encoder,
            "sequence_waits",
            "Times a request waited for the next time unit because the sequence was used up \
             (a request waiting through three unit boundaries counts three)",
            waits.unit_waits_total,
        )?;
        counter(
            &mut encoder,
            "sequence_wait_expired",
            "Requests answered 'saturated' after waiting max_wait_ms for sequence space",
            waits.expired_total,
        )?;
        gauge(
            &mut encoder,
            "requests_waiting",
            "Requests waiting for the next time unit now",
            i64::try_from(waits.parked).unwrap_or(i64::MAX),
        )?;
        gauge(
            &mut encoder,
            "machine_ids",
            "How many machine IDs the issuer holds (machine.ids): its cap is this many times \
             layout_capacity_per_second",
            i64::try_from(s.machines.len()).unwrap_or(i64::MAX),
        )?;
        let mut family = encoder.encode_descriptor(
            "machine_issuing",
            "1 for each machine ID of the issuer that may issue now, 0 for one fenced or \
             acquiring",
            None,
            MetricType::Gauge,
        )?;
        for m in &s.machines {
            let labels = [("machine", m.machine.to_string())];
            ConstGauge::new(i64::from(m.lease.state.can_issue()))
                .encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "lease_state",
            "1 for the current state of the machine-ID lease, 0 for the others",
            None,
            MetricType::Gauge,
        )?;
        for state in LEASE_STATES {
            let labels = [("state", state.name())];
            ConstGauge::new(i64::from(s.lease.state == state))
                .encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// Registers the segments' metrics in `registry` (which should have the `vesta` prefix).
pub fn register_segments(registry: &mut Registry, segments: Arc<Segments>) {
    registry.register_collector(Box::new(SegmentCollector(segments)));
}

/// Registers the per-key sequences' metrics: numbers handed out (`issued`, counted by the ops),
/// raises (the table's writes), their failures and time, sections in memory, loads,
/// evictions and fenced sections, read from [`Sequences::status`] at each scrape.
pub fn register_seq(registry: &mut Registry, seq: Sequences, issued: Counter) {
    registry.register(
        "seq_numbers_issued",
        "Per-key sequence numbers handed to clients (a batch counts each of its numbers)",
        issued,
    );
    registry.register_collector(Box::new(SeqCollector(seq)));
}

/// Reads the sequences' status at each scrape.
#[derive(Debug)]
struct SeqCollector(Sequences);

impl Collector for SeqCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let s = self.0.status();
        let counters = [
            (
                "seq_raises",
                "Raises of a section's stored maximum the table confirmed (its writes, besides \
                 first loads)",
                s.raises,
            ),
            (
                "seq_raise_failures",
                "Raises that failed or ran out of seq.store_timeout_ms: calls on keys of full \
                 sections failed meanwhile",
                s.raise_failures,
            ),
            (
                "seq_section_loads",
                "Sections loaded from the table (first use, or after an eviction)",
                s.loads,
            ),
            (
                "seq_section_evictions",
                "Sections evicted: idle, or the least recently used at seq.max_memory_mb",
                s.evictions,
            ),
        ];
        for (name, help, value) in counters {
            let c = ConstCounter::new(value);
            c.encode(encoder.encode_descriptor(name, help, None, c.metric_type())?)?;
        }
        let seconds = ConstCounter::new(s.raise_micros as f64 / 1e6);
        seconds.encode(encoder.encode_descriptor(
            "seq_raise_seconds",
            "Time spent in confirmed raises (÷ vesta_seq_raises_total: the mean raise latency)",
            None,
            seconds.metric_type(),
        )?)?;
        let gauges = [
            (
                "seq_sections",
                "Sections in memory (numeric sections, spread and string buckets)",
                s.sections,
            ),
            (
                "seq_dense_sections",
                "Numeric sections in memory as flat arrays (800 KB each)",
                s.dense_sections,
            ),
            (
                "seq_numeric_keys",
                "Numeric keys in memory in tables (a dense section's not counted)",
                s.numeric_keys,
            ),
            ("seq_string_keys", "String keys in memory", s.string_keys),
            (
                "seq_memory_bytes",
                "Bytes the sections hold, under seq.max_memory_mb",
                s.memory_bytes,
            ),
            (
                "seq_raising_ahead",
                "Raises ahead of need under way",
                s.raising_ahead,
            ),
            (
                "seq_fenced_sections",
                "Sections this server serves no more: another process raised them in the same \
                 table, or the table went back under it",
                usize::try_from(s.fenced).unwrap_or(usize::MAX),
            ),
            (
                "seq_went_back_sections",
                "Sections found below what they were raised to (the table restored from a \
                 backup?): their keys are refused until the table is raised back",
                self.0.guard_status().went_back,
            ),
        ];
        for (name, help, value) in gauges {
            let g = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
            g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        if let Some(c) = self.0.cluster_status() {
            encode_cluster(&mut encoder, &c)?;
        }
        if let Some(o) = self.0.owner_status() {
            let g = ConstGauge::new(i64::try_from(o.term_left_ms / 1000).unwrap_or(i64::MAX));
            g.encode(encoder.encode_descriptor(
                "seq_owner_term_left_seconds",
                "How long this standalone server may serve without another confirmed renewal of \
                 the table's lease (0: it serves nothing)",
                None,
                g.metric_type(),
            )?)?;
            let k = ConstCounter::new(o.leases_lost);
            k.encode(encoder.encode_descriptor(
                "seq_owner_leases_lost",
                "Times the table's lease expired before a renewal was confirmed: every section \
                 was dropped, and the lease taken again once the table was free",
                None,
                k.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

/// A member's `vesta_seq_cluster_*` metrics (`[seq] cluster`).
fn encode_cluster(
    encoder: &mut DescriptorEncoder,
    c: &vesta_seq::cluster::ClusterStatus,
) -> Result<(), fmt::Error> {
    let gauges = [
        (
            "seq_cluster_sets_owned",
            "Sets of per-key sequences this member serves (of 256)",
            c.sets_owned as u64,
        ),
        (
            "seq_cluster_members",
            "Live members of the sequences cluster as this member last read them",
            c.members as u64,
        ),
        (
            "seq_cluster_term_left_seconds",
            "How long this member may serve without another confirmed renewal of its lease (0: \
             it serves nothing)",
            c.term_left_ms / 1000,
        ),
    ];
    for (name, help, value) in gauges {
        let g = ConstGauge::new(i64::try_from(value).unwrap_or(i64::MAX));
        g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)?;
    }
    let counters = [
        (
            "seq_cluster_sets_taken",
            "Sets this member took (a move in)",
            c.sets_taken,
        ),
        (
            "seq_cluster_sets_released",
            "Sets this member handed off (a move out)",
            c.sets_released,
        ),
        (
            "seq_cluster_leases_lost",
            "Times this member's lease expired before a renewal was confirmed: it dropped every \
             set and joined again (a fenced owner)",
            c.leases_lost,
        ),
        (
            "seq_cluster_beat_failures",
            "Renewals or reads of the cluster's rows that failed",
            c.beat_failures,
        ),
    ];
    for (name, help, value) in counters {
        let k = ConstCounter::new(value);
        k.encode(encoder.encode_descriptor(name, help, None, k.metric_type())?)?;
    }
    let mut family = encoder.encode_descriptor(
        "seq_cluster_refused",
        "Calls refused by the cluster: moved (answered with the owner), moving (between owners) \
         or lapsed (this member's term ran out)",
        None,
        MetricType::Counter,
    )?;
    for (why, n) in [
        ("moved", c.refused_moved),
        ("moving", c.refused_moving),
        ("lapsed", c.refused_lapsed),
    ] {
        ConstCounter::new(n).encode(family.encode_family(&[("why", why)])?)?;
    }
    Ok(())
}

/// Reads the segments' status at each scrape.
#[derive(Debug)]
struct SegmentCollector(Arc<Segments>);

impl Collector for SegmentCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let status = self.0.status();
        let up = ConstGauge::new(i64::from(self.0.is_up()));
        up.encode(encoder.encode_descriptor(
            "segment_up",
            "1 while the segment store is open; 0 while its database was not reached yet \
             (segment requests refused) or after shutdown",
            None,
            up.metric_type(),
        )?)?;
        let issued = ConstCounter::new(self.0.numbers_issued());
        issued.encode(encoder.encode_descriptor(
            "segment_numbers_issued",
            "Segment numbers handed to clients, all tags",
            None,
            issued.metric_type(),
        )?)?;
        let tags = &status.tags;
        let e = &mut encoder;
        per_tag(
            e,
            MetricType::Gauge,
            "segment_buffered",
            "Numbers of the tag buffered in memory (current and next segment)",
            tags,
            |t| Some(Sample::Gauge(i64::try_from(t.buffered).unwrap_or(i64::MAX))),
        )?;
        per_tag(
            e,
            MetricType::Gauge,
            "segment_step",
            "Step of the tag's newest segment (Leaf's adaptive step)",
            tags,
            |t| Some(Sample::Gauge(i64::from(t.step))),
        )?;
        per_tag(
            e,
            MetricType::Gauge,
            "segment_prefetch_at",
            "Numbers of the tag left when its next segment is fetched: step × (100 − \
             prefetch_percent) / 100; buffered stays at or above it while prefetches arrive",
            tags,
            |t| {
                Some(Sample::Gauge(
                    i64::try_from(t.prefetch_at).unwrap_or(i64::MAX),
                ))
            },
        )?;
        per_tag(
            e,
            MetricType::Counter,
            "segment_fetches",
            "Segments taken from the database for the tag",
            tags,
            |t| Some(Sample::Counter(t.fetches)),
        )?;
        per_tag(
            e,
            MetricType::Counter,
            "segment_fetch_errors",
            "Failed segment fetches of the tag (each retried with backoff)",
            tags,
            |t| Some(Sample::Counter(t.fetch_errors)),
        )?;
        per_tag(
            e,
            MetricType::Counter,
            "segment_moved_back",
            "Fetches of the tag refused because leaf_alloc went back below where this server's \
             numbers end (a restored backup, a lagging replica): VestaSegmentMovedBack",
            tags,
            |t| Some(Sample::Counter(t.moved_back)),
        )?;
        per_tag(
            e,
            MetricType::Gauge,
            "segment_floor",
            "The lowest number the tag's next segment may start at (restore guard)",
            tags,
            |t| Some(Sample::Gauge(i64::try_from(t.floor).unwrap_or(i64::MAX))),
        )?;
        per_tag(
            e,
            MetricType::Gauge,
            "segment_last_fetch_latency_seconds",
            "Duration of the tag's last fetch attempt",
            tags,
            |t| {
                t.last_fetch_latency_us
                    .map(|us| Sample::Seconds(us as f64 / 1e6))
            },
        )?;
        per_tag(
            e,
            MetricType::Gauge,
            "segment_degraded",
            "1 while the tag's last fetch failed (numbers still come from its buffers until \
             they run out), else 0",
            tags,
            |t| {
                let degraded = matches!(t.state, TagState::Degraded | TagState::Down);
                Some(Sample::Gauge(i64::from(degraded)))
            },
        )?;
        Ok(())
    }
}

/// One tag's value of a family.
enum Sample {
    Gauge(i64),
    Seconds(f64),
    Counter(u64),
}

/// Writes the family `name` of type `kind` with one sample per tag (tags whose `value` is `None` are left out).
fn per_tag(
    encoder: &mut DescriptorEncoder,
    kind: MetricType,
    name: &str,
    help: &str,
    tags: &[TagStatus],
    value: impl Fn(&TagStatus) -> Option<Sample>,
) -> fmt::Result {
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for t in tags {
        let labels = [("tag", t.tag.as_str())];
        match value(t) {
            Some(Sample::Gauge(v)) => ConstGauge::new(v).encode(family.encode_family(&labels)?)?,
            Some(Sample::Seconds(v)) => {
                ConstGauge::new(v).encode(family.encode_family(&labels)?)?
            }
            Some(Sample::Counter(v)) => {
                ConstCounter::new(v).encode(family.encode_family(&labels)?)?
            }
            None => {}
        }
    }
    Ok(())
}
