//! `INFO` of a server of k machine IDs (`machine.ids = 3`), one of them fenced: a version-3
//! client reads all k with each one's state, in raw bytes and through the client; a client of
//! version 2 gets byte for byte the answer it always got; and the client reads an older
//! server's version-2 answer as before (no list).

use crate::common;

use bytes::{BufMut, BytesMut};
use common::{Raw, config, start_with_issuer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use vesta_core::Preset;
use vesta_embed::LeaseState;
use vesta_server::proto::{Dialect, Request, Response, VERSION, op};
use vesta_server::{Client, ClientConfig, ServerInfo, ServerMachine, frame};

/// Version 2's `INFO_OK` before the reason (docs/protocol.md): machine u32, genMethod u8,
/// lease_state u8, server_pool_start u32, then u64, u64, u32, u32, u32.
const V2_FIXED: usize = 4 + 1 + 1 + 4 + 8 + 8 + 4 + 4 + 4;

/// A server of machine IDs 930..=932 with 931 fenced.
async fn three_with_one_fenced() -> vesta_server::ServerHandle {
    let mut cfg = config(930);
    cfg.machine.ids = 3;
    let (server, issuer) = start_with_issuer(cfg).await;
    issuer.fence_machine_for_test(1, LeaseState::Fenced, "test: 931's lease lost");
    server
}

/// 930..=932, 931 fenced (3), the others static (0).
fn expected() -> Vec<ServerMachine> {
    (930..=932)
        .map(|machine| ServerMachine {
            machine,
            lease_state: if machine == 931 { 3 } else { 0 },
        })
        .collect()
}

#[tokio::test]
async fn version_3_lists_all_k_in_raw_bytes_and_through_the_client() {
    let server = three_with_one_fenced().await;
    // HELLO offering 1..=3, then INFO, written byte by byte as docs/protocol.md spells them.
    let mut c = Raw::connect(server.addr()).await;
    c.write(b"\x00\x00\x00\x0b\x01\x00\x00\x00\x01VSTA\x01\x03")
        .await;
    let hello = c.recv_frame().await.unwrap();
    assert_eq!((hello.op, hello.payload[0]), (op::HELLO | op::ANSWER, 3));
    c.write(b"\x00\x00\x00\x05\x03\x00\x00\x00\x02").await;
    let f = c.recv_frame().await.unwrap();
    assert_eq!((f.op, f.request_id), (op::INFO | op::ANSWER, 2));
    let p = &f.payload;
    assert_eq!(&p[..4], &930u32.to_be_bytes(), "machine: the first one");
    assert_eq!(p[5], 0, "lease_state: of the first that may issue");
    let reason_len = u16::from_be_bytes([p[V2_FIXED], p[V2_FIXED + 1]]) as usize;
    let list = &p[V2_FIXED + 2 + reason_len..];
    #[rustfmt::skip]
    let want: &[u8] = &[
        0, 3,
        0, 0, 0x03, 0xa2, 0, // 930 static
        0, 0, 0x03, 0xa3, 3, // 931 fenced
        0, 0, 0x03, 0xa4, 0, // 932 static
    ];
    assert_eq!(list, want);

    let client = Client::connect(ClientConfig::new([server.addr().to_string()]))
        .await
        .unwrap();
    let info = client.info().await.unwrap();
    assert_eq!(info.machines, expected());
    assert_eq!(info.issuing_machines().collect::<Vec<_>>(), [930, 932]);
    assert_eq!(info.lease_state_name(), "static");
    server.shutdown().await.unwrap();
}

/// A client of before version 3 offers 1..=2: its `INFO_OK` ends at the reason, exactly as a
/// server of one machine ID answers, and reads as it always did.
#[tokio::test]
async fn a_version_2_client_gets_the_answer_it_always_got() {
    let server = three_with_one_fenced().await;
    let mut c = Raw::hello_v2(server.addr()).await;
    assert_eq!(c.dialect.version, 2);
    c.send(2, &Request::Info).await;
    let f = c.recv_frame().await.unwrap();
    let p = &f.payload;
    let reason_len = u16::from_be_bytes([p[V2_FIXED], p[V2_FIXED + 1]]) as usize;
    assert_eq!(
        p.len(),
        V2_FIXED + 2 + reason_len,
        "nothing after the reason"
    );
    let Response::Info(info) = Response::parse(&f, &c.dialect).unwrap() else {
        panic!("not INFO_OK")
    };
    assert_eq!((info.machine, info.machines.len()), (930, 0));
    server.shutdown().await.unwrap();
}

/// An older server (versions 1..=2), played here by the codec in version 2 answering what a
/// real server of one machine ID describes: the client agrees on version 2 and reads its
/// `INFO_OK` without a list.
#[tokio::test]
async fn the_client_reads_an_older_servers_answer() {
    let real = common::start(config(940)).await;
    let described = ServerInfo {
        machines: Vec::new(),
        ..real.info().clone()
    };
    real.shutdown().await.unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let layout = Preset::Vesta.layout();
    let answered = described.clone();
    let old = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.unwrap();
        let mut buf = BytesMut::new();
        let mut dialect = Dialect::v1();
        loop {
            while let Some(f) = frame::decode(&mut buf, frame::DEFAULT_MAX_FRAME_BYTES).unwrap() {
                let answer = match Request::parse(&f, &dialect).unwrap() {
                    Request::Hello { max_version, .. } => {
                        assert_eq!(max_version, VERSION, "the client offers version 3");
                        dialect = Dialect::new(2, layout.clone());
                        Response::HelloOk {
                            version: 2,
                            max_frame_bytes: 65_536,
                            max_batch: 7,
                            layout: Some(layout.clone()),
                        }
                    }
                    Request::Info => Response::Info(answered.clone()),
                    _ => Response::Pong,
                };
                let mut out = BytesMut::new();
                answer.encode(f.request_id, &dialect, &mut out);
                s.write_all(&out).await.unwrap();
            }
            let mut chunk = [0u8; 4096];
            match s.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.put_slice(&chunk[..n]),
            }
        }
    });
    let client = Client::connect(ClientConfig::new([addr.to_string()]))
        .await
        .unwrap();
    let info = client.info().await.unwrap();
    assert_eq!(info, described);
    assert_eq!((info.machine, info.machines.len()), (940, 0));
    drop(client);
    old.abort();
}
