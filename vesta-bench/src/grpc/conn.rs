//! One gRPC connection: tonic's client over one HTTP/2 connection of its own, driven by a
//! current-thread tokio runtime that only this connection's thread blocks on, one call at a
//! time (as the REST engine's connection does).

use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::time::timeout;
use tonic::transport::{Channel, Endpoint};
use vesta_grpc::{VestaClient, pb};

/// Longest wait for a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest wait for an answer, or for the next chunk of a stream (the server itself waits at
/// most 3 s for IDs).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// What one call asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// `NextId`.
    One,
    /// `NextIds` of this count.
    Batch(u64),
    /// `StreamIds` of this count.
    Stream(u64),
}

impl Call {
    /// The method's full name, as the report shows it.
    pub(crate) fn name(self) -> String {
        match self {
            Call::One => "vesta.v1.Vesta/NextId".to_owned(),
            Call::Batch(n) => format!("vesta.v1.Vesta/NextIds count={n}"),
            Call::Stream(n) => format!("vesta.v1.Vesta/StreamIds count={n}"),
        }
    }
}

/// How a call ended: the IDs it brought, or the server's status.
pub(crate) type Outcome = Result<u64, tonic::Status>;

/// A connected gRPC connection.
pub(crate) struct GrpcConn {
    runtime: Runtime,
    client: VestaClient<Channel>,
}

impl GrpcConn {
    /// Connects to `target` (`host:port`, plaintext HTTP/2).
    pub(crate) fn connect(target: &str) -> Result<GrpcConn, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let endpoint = Endpoint::from_shared(format!("http://{target}"))
            .map_err(|e| format!("bad address: {e}"))?
            .connect_timeout(CONNECT_TIMEOUT)
            .tcp_nodelay(true);
        let channel = runtime
            .block_on(endpoint.connect())
            .map_err(|e| format!("connect: {e}"))?;
        Ok(GrpcConn {
            runtime,
            client: VestaClient::new(channel),
        })
    }

    /// Makes one call and hands every ID it brings to `each`, in order; an `Err` is a failure
    /// of the connection or an answer that is not what was asked for, not a status.
    pub(crate) fn call(
        &mut self,
        call: Call,
        mut each: impl FnMut(u64),
    ) -> Result<Outcome, String> {
        let client = &mut self.client;
        let late = || format!("{}: no answer within {ANSWER_TIMEOUT:?}", call.name());
        let short =
            |count: u64, got: u64| format!("{}: asked for {count} IDs, got {got}", call.name());
        self.runtime.block_on(async {
            match call {
                Call::One => {
                    let answer = timeout(ANSWER_TIMEOUT, client.next_id(pb::NextIdRequest {}))
                        .await
                        .map_err(|_| late())?;
                    Ok(answer.map(|r| {
                        each(r.into_inner().id);
                        1
                    }))
                }
                Call::Batch(count) => {
                    let answer = timeout(
                        ANSWER_TIMEOUT,
                        client.next_ids(pb::NextIdsRequest { count }),
                    )
                    .await
                    .map_err(|_| late())?;
                    let ids = match answer {
                        Ok(r) => r.into_inner().ids,
                        Err(status) => return Ok(Err(status)),
                    };
                    if ids.len() as u64 != count {
                        return Err(short(count, ids.len() as u64));
                    }
                    ids.into_iter().for_each(each);
                    Ok(Ok(count))
                }
                Call::Stream(count) => {
                    let started = timeout(
                        ANSWER_TIMEOUT,
                        client.stream_ids(pb::StreamIdsRequest { count }),
                    )
                    .await
                    .map_err(|_| late())?;
                    let mut stream = match started {
                        Ok(r) => r.into_inner(),
                        Err(status) => return Ok(Err(status)),
                    };
                    let mut got = 0u64;
                    loop {
                        let next = timeout(ANSWER_TIMEOUT, stream.message())
                            .await
                            .map_err(|_| late())?;
                        match next {
                            Ok(Some(chunk)) => {
                                got += chunk.ids.len() as u64;
                                chunk.ids.into_iter().for_each(&mut each);
                            }
                            Ok(None) if got == count => return Ok(Ok(got)),
                            Ok(None) => return Err(short(count, got)),
                            Err(status) => return Ok(Err(status)),
                        }
                    }
                }
            }
        })
    }
}
