//! What a load run is asked to do, and why it could not be done. Settings are named by their
//! field ([`Field`]); the CLI maps a field to its own flag, so this library knows no flag names.

use std::fmt;
use std::time::Duration;

use crate::seq::KeyShape;

/// Most connections one run opens (each is a thread of the load tool).
pub const MAX_CONNECTIONS: usize = 1024;
/// Deepest pipeline per TCP connection.
pub const MAX_PIPELINE: usize = 65_536;
/// Shortest run.
pub const MIN_DURATION: Duration = Duration::from_millis(100);
/// Longest run.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// Highest open-loop rate, requests per second in total.
pub const MAX_RATE: u64 = 10_000_000;
/// Most keys the PostgreSQL peer pre-creates a row for.
pub const MAX_PG_KEYS: u64 = 10_000_000;

/// The settings both engines share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Load {
    /// Servers as `host:port`; connections are spread over them round-robin.
    pub targets: Vec<String>,
    /// Connections in total.
    pub connections: usize,
    /// How long requests are sent; answers still in flight then get a few more seconds.
    pub duration: Duration,
    /// IDs per request (`NEXT_IDS` count, `/genids?count=`), or numbers per call of a key in
    /// a seq run (`SEQ_NEXT` count, `/seq/{key}?count=`); `None` asks for one (`NEXT_ID`,
    /// `/genid`, a count of 1).
    pub batch: Option<u32>,
    /// Requests per second in total (open loop); `None` sends as fast as answers return.
    pub rate: Option<u64>,
}

/// A TCP run: the shared settings and the pipeline depth.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpLoad {
    /// The shared settings.
    pub load: Load,
    /// Requests in flight per connection.
    pub pipeline: usize,
    /// Ask for per-key sequence numbers (`SEQ_NEXT`) instead of IDs, each request for a key
    /// drawn uniformly from `0..N` and sent as decimal text ([`crate::seq`]).
    pub seq_keys: Option<u64>,
    /// What the seq load's keys look like (dense numbers, snowflake-sized numbers, strings).
    pub seq_shape: KeyShape,
    /// Load a peer with the same seq load instead of vesta ([`Peer`]); needs `seq_keys`.
    pub peer: Option<Peer>,
}

/// A peer that the per-key sequence load is measured against: the same keys, connections and
/// counts, in the same run ([`crate::seq`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// Redis `INCR key` (`INCRBY key B` with a batch), pipelined like vesta's TCP load; the
    /// target is `host:port`. Closed loop only.
    Redis,
    /// PostgreSQL `UPDATE seq SET cur = cur + 1 WHERE key = $1 RETURNING cur`, one query in
    /// flight per connection (the pipeline does not apply); the target is a `postgres://` URL.
    /// The table `seq` and a row per key are created before the run when missing.
    Postgres,
}

impl Peer {
    /// The peer's name in reports and messages.
    pub const fn name(self) -> &'static str {
        match self {
            Peer::Redis => "redis",
            Peer::Postgres => "postgres",
        }
    }
}

/// A REST run: the shared settings over HTTP/1.1 keep-alive connections, one request in flight
/// on each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestLoad {
    /// The shared settings.
    pub load: Load,
    /// The target is not vesta but a baseline HTTP server (the bare-hyper handler): answers are
    /// timed and counted by status, but bodies are not read as IDs and no layout is asked for.
    pub baseline: bool,
    /// Ask for segment numbers of this tag (`/segment/{tag}`, or `/segments/{tag}?count=N`
    /// with a batch) instead of IDs; the server needs segment mode on.
    pub segment: Option<String>,
    /// Ask on Leaf's path instead (`/api/segment/get/{tag}`; one number per request).
    pub leaf: bool,
    /// Ask for per-key sequence numbers instead (`GET /seq/{key}`, or
    /// `/seq/{key}?count=N&format=json` with a batch), each request for a key drawn uniformly
    /// from `0..N`; the server needs `[seq] db`.
    pub seq_keys: Option<u64>,
    /// What the seq load's keys look like (dense numbers, snowflake-sized numbers, strings).
    pub seq_shape: KeyShape,
}

/// A gRPC run: the shared settings over HTTP/2 connections (one each), one call in flight on
/// each: `NextId`, `NextIds` with a batch, or `StreamIds` with a batch and `stream`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrpcLoad {
    /// The shared settings.
    pub load: Load,
    /// Ask for each batch as a `StreamIds` call (chunks read as they come) instead of one
    /// `NextIds` answer.
    pub stream: bool,
    /// The target is not vesta but a baseline gRPC server (the bare tonic handler of
    /// `bare-tonic`): answers are timed and counted, but no layout is asked for.
    pub baseline: bool,
}

/// A setting, by its field name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// [`Load::targets`].
    Targets,
    /// [`Load::connections`].
    Connections,
    /// [`TcpLoad::pipeline`].
    Pipeline,
    /// [`Load::duration`].
    Duration,
    /// [`Load::batch`].
    Batch,
    /// [`Load::rate`].
    Rate,
    /// [`RestLoad::leaf`].
    Leaf,
    /// [`GrpcLoad::stream`].
    Stream,
    /// [`TcpLoad::seq_keys`], [`RestLoad::seq_keys`].
    SeqKeys,
    /// [`TcpLoad::peer`].
    Peer,
}

impl Field {
    /// The field's name in the settings.
    pub const fn name(self) -> &'static str {
        match self {
            Field::Targets => "targets",
            Field::Connections => "connections",
            Field::Pipeline => "pipeline",
            Field::Duration => "duration",
            Field::Batch => "batch",
            Field::Rate => "rate",
            Field::Leaf => "leaf",
            Field::Stream => "stream",
            Field::SeqKeys => "seq_keys",
            Field::Peer => "peer",
        }
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A load run that could not be done.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A setting is outside its range.
    #[error("{field} {value} is out of range: allowed {allowed}")]
    OutOfRange {
        /// Which setting.
        field: Field,
        /// Its value, as written in the message.
        value: String,
        /// The allowed range, and whose limit it is when the server sets it.
        allowed: String,
    },
    /// Settings that do not go together.
    #[error("{field}: {message}")]
    Invalid {
        /// Which setting.
        field: Field,
        /// Why.
        message: String,
    },
    /// No server to load.
    #[error("{}: at least one host:port is needed", Field::Targets)]
    NoTarget,
    /// A server could not be asked what it is, or refused the request the run would send.
    #[error("{target}: {message}")]
    Target {
        /// The server.
        target: String,
        /// What happened.
        message: String,
    },
    /// A connection failed during the run: connect, handshake, a broken stream, an answer that
    /// does not parse, or answers missing after the drain.
    #[error("connection {conn} to {target}: {message}")]
    Connection {
        /// Which connection (0-based).
        conn: usize,
        /// Its server.
        target: String,
        /// What happened.
        message: String,
    },
    /// The tool itself failed (a thread could not start or panicked).
    #[error("{0}")]
    Tool(String),
}

fn out_of_range(field: Field, value: impl fmt::Display, allowed: &str) -> BenchError {
    BenchError::OutOfRange {
        field,
        value: value.to_string(),
        allowed: allowed.to_owned(),
    }
}

impl Load {
    /// Checks the shared settings; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), BenchError> {
        if self.targets.is_empty() {
            return Err(BenchError::NoTarget);
        }
        if !(1..=MAX_CONNECTIONS).contains(&self.connections) {
            return Err(out_of_range(
                Field::Connections,
                self.connections,
                &format!("1..={MAX_CONNECTIONS}"),
            ));
        }
        if !(MIN_DURATION..=MAX_DURATION).contains(&self.duration) {
            return Err(out_of_range(
                Field::Duration,
                format_args!("{:?}", self.duration),
                "100ms..=1h",
            ));
        }
        if self.batch == Some(0) {
            return Err(out_of_range(
                Field::Batch,
                0,
                "1..=the server's largest batch",
            ));
        }
        if let Some(rate) = self.rate
            && !(1..=MAX_RATE).contains(&rate)
        {
            return Err(out_of_range(
                Field::Rate,
                rate,
                &format!("1..={MAX_RATE} requests/s"),
            ));
        }
        Ok(())
    }

    /// The target of connection `conn` (round-robin).
    pub(crate) fn target_of(&self, conn: usize) -> &str {
        &self.targets[conn % self.targets.len()]
    }
}

/// Checks a number of keys: at least one.
fn check_seq_keys(seq_keys: Option<u64>) -> Result<(), BenchError> {
    if seq_keys == Some(0) {
        return Err(out_of_range(
            Field::SeqKeys,
            0,
            &format!("1..={} keys", u64::MAX),
        ));
    }
    Ok(())
}

/// A key shape other than dense belongs to a seq run.
fn check_shape(shape: KeyShape, seq_keys: Option<u64>) -> Result<(), BenchError> {
    if shape != KeyShape::Dense && seq_keys.is_none() {
        return Err(BenchError::Invalid {
            field: Field::SeqKeys,
            message: format!("{} keys shape a seq run: give seq_keys", shape.name()),
        });
    }
    Ok(())
}

impl TcpLoad {
    /// Checks every setting; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), BenchError> {
        self.load.validate()?;
        if !(1..=MAX_PIPELINE).contains(&self.pipeline) {
            return Err(out_of_range(
                Field::Pipeline,
                self.pipeline,
                &format!("1..={MAX_PIPELINE}"),
            ));
        }
        check_seq_keys(self.seq_keys)?;
        check_shape(self.seq_shape, self.seq_keys)?;
        let invalid = |message: &str| {
            Err(BenchError::Invalid {
                field: Field::Peer,
                message: message.to_owned(),
            })
        };
        if self.seq_shape != KeyShape::Dense && self.peer.is_none() && self.load.targets.len() > 1 {
            return Err(BenchError::Invalid {
                field: Field::SeqKeys,
                message: "a cluster run (more than one server) routes dense keys only".into(),
            });
        }
        match (self.peer, self.seq_keys) {
            (Some(Peer::Postgres), _) if self.seq_shape != KeyShape::Dense => {
                invalid("the PostgreSQL peer makes rows for keys 0..N: dense keys only")
            }
            (Some(_), None) => invalid("a peer is loaded with the seq load only: give seq_keys"),
            (Some(Peer::Redis), _) if self.load.rate.is_some() => {
                invalid("the Redis peer runs closed loop only: give no rate")
            }
            (Some(Peer::Postgres), Some(n)) if n > MAX_PG_KEYS => Err(out_of_range(
                Field::SeqKeys,
                n,
                &format!("1..={MAX_PG_KEYS} keys (the PostgreSQL peer makes a row per key)"),
            )),
            _ => Ok(()),
        }
    }
}

impl RestLoad {
    /// Checks every setting; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), BenchError> {
        self.load.validate()?;
        check_seq_keys(self.seq_keys)?;
        check_shape(self.seq_shape, self.seq_keys)?;
        if self.seq_keys.is_some() && (self.segment.is_some() || self.baseline) {
            return Err(BenchError::Invalid {
                field: Field::SeqKeys,
                message: "per-key sequences are vesta's own path: no segment tag, no baseline"
                    .into(),
            });
        }
        if self.leaf && (self.segment.is_none() || self.load.batch.is_some()) {
            return Err(BenchError::Invalid {
                field: Field::Leaf,
                message: "Leaf's path serves one segment number of a tag: needs a segment tag \
                          and no batch"
                    .into(),
            });
        }
        Ok(())
    }

    /// The request path: `/genid`, or `/genids?count=N` with a batch; with a segment tag
    /// `/segment/{tag}` or `/segments/{tag}?count=N`, or Leaf's `/api/segment/get/{tag}`; with
    /// seq keys `/seq/{key}` or `/seq/{key}?count=N&format=json`, `{key}` standing for each
    /// request's key.
    pub fn path(&self) -> String {
        if self.seq_keys.is_some() {
            return format!("/seq/{{key}}{}", seq_query(self.load.batch));
        }
        match (&self.segment, self.load.batch) {
            (None, Some(n)) => format!("/genids?count={n}"),
            (None, None) => "/genid".to_owned(),
            (Some(tag), Some(n)) => format!("/segments/{tag}?count={n}"),
            (Some(tag), None) if self.leaf => format!("/api/segment/get/{tag}"),
            (Some(tag), None) => format!("/segment/{tag}"),
        }
    }
}

/// What follows a seq request's key: nothing for one number (the answer is the number as
/// text), `?count=N&format=json` for N (the answer says the first and the last).
pub(crate) fn seq_query(batch: Option<u32>) -> String {
    batch.map_or_else(String::new, |n| format!("?count={n}&format=json"))
}

impl GrpcLoad {
    /// Checks every setting; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), BenchError> {
        self.load.validate()?;
        if self.stream && self.load.batch.is_none() {
            return Err(BenchError::Invalid {
                field: Field::Stream,
                message: "a stream of IDs needs a count: give a batch".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load() -> Load {
        Load {
            targets: vec!["127.0.0.1:1".into()],
            connections: 1,
            duration: Duration::from_secs(1),
            batch: None,
            rate: None,
        }
    }

    #[test]
    fn settings_are_checked_with_the_field_named() {
        let mut tcp = TcpLoad {
            load: load(),
            pipeline: 1,
            seq_keys: None,
            seq_shape: KeyShape::Dense,
            peer: None,
        };
        tcp.validate().unwrap();
        let msg = |t: &TcpLoad| t.validate().unwrap_err().to_string();
        tcp.pipeline = 0;
        assert_eq!(msg(&tcp), "pipeline 0 is out of range: allowed 1..=65536");
        tcp.pipeline = 1;
        tcp.load.duration = Duration::from_millis(10);
        assert_eq!(
            msg(&tcp),
            "duration 10ms is out of range: allowed 100ms..=1h"
        );
        tcp.load.duration = Duration::from_secs(1);
        tcp.load.connections = 1025;
        assert_eq!(
            msg(&tcp),
            "connections 1025 is out of range: allowed 1..=1024"
        );
        tcp.load.connections = 1;
        tcp.load.rate = Some(0);
        assert_eq!(
            msg(&tcp),
            "rate 0 is out of range: allowed 1..=10000000 requests/s"
        );
        tcp.load.rate = None;
        tcp.load.batch = Some(0);
        assert_eq!(
            msg(&tcp),
            "batch 0 is out of range: allowed 1..=the server's largest batch"
        );
        tcp.load.batch = None;
        tcp.load.targets.clear();
        assert_eq!(msg(&tcp), "targets: at least one host:port is needed");
        let err = tcp.validate().unwrap_err();
        assert!(matches!(err, BenchError::NoTarget));
    }

    #[test]
    fn rest_paths_name_the_endpoint() {
        let mut rest = RestLoad {
            load: load(),
            baseline: false,
            segment: None,
            leaf: false,
            seq_keys: None,
            seq_shape: KeyShape::Dense,
        };
        assert_eq!(rest.path(), "/genid");
        rest.load.batch = Some(1000);
        assert_eq!(rest.path(), "/genids?count=1000");
        rest.segment = Some("orders".into());
        assert_eq!(rest.path(), "/segments/orders?count=1000");
        assert!(rest.validate().is_ok());
        rest.leaf = true;
        assert_eq!(
            rest.validate().unwrap_err().to_string(),
            "leaf: Leaf's path serves one segment number of a tag: needs a segment tag and no \
             batch"
        );
        rest.load.batch = None;
        assert!(rest.validate().is_ok());
        assert_eq!(rest.path(), "/api/segment/get/orders");
        rest.leaf = false;
        assert_eq!(rest.path(), "/segment/orders");
    }

    #[test]
    fn seq_keys_and_peers_are_checked() {
        let mut tcp = TcpLoad {
            load: load(),
            pipeline: 64,
            seq_keys: Some(0),
            seq_shape: KeyShape::Dense,
            peer: None,
        };
        let msg = |t: &TcpLoad| t.validate().unwrap_err().to_string();
        assert_eq!(
            msg(&tcp),
            "seq_keys 0 is out of range: allowed 1..=18446744073709551615 keys"
        );
        tcp.seq_keys = None;
        tcp.peer = Some(Peer::Redis);
        assert_eq!(
            msg(&tcp),
            "peer: a peer is loaded with the seq load only: give seq_keys"
        );
        tcp.seq_keys = Some(1000);
        tcp.validate().unwrap();
        tcp.load.rate = Some(20_000);
        assert_eq!(
            msg(&tcp),
            "peer: the Redis peer runs closed loop only: give no rate"
        );
        tcp.peer = Some(Peer::Postgres);
        tcp.validate().unwrap();
        tcp.seq_keys = Some(MAX_PG_KEYS + 1);
        assert_eq!(
            msg(&tcp),
            "seq_keys 10000001 is out of range: allowed 1..=10000000 keys (the PostgreSQL peer \
             makes a row per key)"
        );
        let mut rest = RestLoad {
            load: load(),
            baseline: false,
            segment: None,
            leaf: false,
            seq_keys: Some(0),
            seq_shape: KeyShape::Dense,
        };
        assert_eq!(
            rest.validate().unwrap_err().to_string(),
            "seq_keys 0 is out of range: allowed 1..=18446744073709551615 keys"
        );
        rest.seq_keys = Some(10);
        assert_eq!(rest.path(), "/seq/{key}");
        rest.load.batch = Some(5);
        assert_eq!(rest.path(), "/seq/{key}?count=5&format=json");
        rest.validate().unwrap();
        rest.baseline = true;
        assert!(
            rest.validate()
                .unwrap_err()
                .to_string()
                .starts_with("seq_keys: per-key sequences are vesta's own path")
        );
    }

    #[test]
    fn a_grpc_stream_needs_a_count() {
        let mut grpc = GrpcLoad {
            load: load(),
            stream: true,
            baseline: false,
        };
        assert_eq!(
            grpc.validate().unwrap_err().to_string(),
            "stream: a stream of IDs needs a count: give a batch"
        );
        grpc.load.batch = Some(100_000);
        assert!(grpc.validate().is_ok());
    }

    #[test]
    fn connections_go_round_robin_over_the_targets() {
        let mut l = load();
        l.targets = vec!["a:1".into(), "b:2".into()];
        assert_eq!(
            (0..4).map(|c| l.target_of(c)).collect::<Vec<_>>(),
            ["a:1", "b:2", "a:1", "b:2"]
        );
    }
}
