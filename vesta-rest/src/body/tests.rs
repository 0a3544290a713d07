//! The body's accounting and its JSON, byte for byte.

use std::future::poll_fn;

use http_body::Body as _;

use bytes::Buf;
use vesta_core::IdRun;

use super::*;
use crate::budget::UnsentBudget;

/// The JSON the simple way, to compare against.
fn expected(runs: &[IdRun]) -> String {
    let ids: Vec<String> = runs
        .iter()
        .flat_map(IdRun::iter)
        .map(|id| format!("\"{id}\""))
        .collect();
    format!("{{\"ids\":[{}]}}", ids.join(","))
}

fn write_all(runs: Vec<IdRun>, max: usize) -> (Vec<u8>, usize) {
    write_runs(runs.iter().map(Run::of_ids).collect(), max)
}

fn write_runs(runs: Vec<Run>, max: usize) -> (Vec<u8>, usize) {
    let mut json = IdsJson::new(runs, Form::Decimal);
    let announced = json.remaining();
    let mut out = Vec::new();
    while !json.is_done() {
        let c = json.write_chunk(max);
        assert!(c.len() <= max.max(IdsJson::OPEN.len() + 23), "{}", c.len());
        out.extend_from_slice(&c);
    }
    (out, announced)
}

#[test]
fn streamed_json_is_exact_and_its_length_known_up_front() {
    let cases = vec![
        vec![],
        vec![IdRun {
            first: 5,
            count: 1,
            step: 1,
        }],
        // Crosses from 4 to 5 and 6 digits inside one run.
        vec![IdRun {
            first: 9_000,
            count: 1_000,
            step: 1024,
        }],
        vec![
            IdRun {
                first: 1 << 40,
                count: 3_000,
                step: 1024,
            },
            IdRun {
                first: u64::MAX - 4 * 1024,
                count: 5,
                step: 1024,
            },
        ],
        vec![IdRun {
            first: 999_999_999_999_999_000,
            count: 10_000,
            step: 1024,
        }],
    ];
    for runs in cases {
        let want = expected(&runs);
        for max in [1, 40, 1000, CHUNK_BYTES] {
            let (got, announced) = write_all(runs.clone(), max);
            assert_eq!(String::from_utf8(got).unwrap(), want);
            assert_eq!(announced, want.len());
        }
        let n = runs.iter().map(|r| r.count).sum();
        assert!(Body::ids_upper_bound(n) >= want.len());
    }
}

#[test]
fn segment_numbers_are_written_as_consecutive_strings() {
    let ranges = [0..3, 98..102, u64::MAX - 2..u64::MAX];
    let want: Vec<String> = ranges
        .iter()
        .flat_map(|r| r.clone())
        .map(|n| format!("\"{n}\""))
        .collect();
    let want = format!("{{\"ids\":[{}]}}", want.join(","));
    for max in [1, 7, CHUNK_BYTES] {
        let (got, announced) = write_runs(ranges.iter().map(Run::of_numbers).collect(), max);
        assert_eq!(String::from_utf8(got).unwrap(), want);
        assert_eq!(announced, want.len());
    }
}

#[tokio::test]
async fn a_streamed_body_keeps_no_more_than_its_window_alive() {
    let budget = UnsentBudget::new(1 << 20);
    let runs = vec![IdRun {
        first: 1 << 50,
        count: 10_000,
        step: 1024,
    }];
    let batch = IdBatch::from_runs(runs.clone());
    let r = budget.reserve(Body::ids_reservation(10_000)).unwrap();
    let mut body = Box::pin(Body::ids_in(&batch, r, Form::Decimal));
    assert_eq!(body.size_hint().exact(), Some(expected(&runs).len() as u64));
    let mut held = Vec::new();
    let mut alive = 0;
    // Take chunks without dropping them, as a client that grants no window makes hyper do.
    loop {
        let polled = poll_fn(|cx| Poll::Ready(body.as_mut().poll_frame(cx))).await;
        match polled {
            Poll::Ready(Some(Ok(f))) => {
                let c = f.into_data().unwrap();
                alive += c.remaining();
                held.push(c);
            }
            Poll::Pending => break,
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => panic!("ended early"),
        }
    }
    assert!(
        alive <= STREAM_WINDOW_BYTES && alive > CHUNK_BYTES,
        "{alive}"
    );
    assert_eq!(budget.in_use(), STREAM_WINDOW_BYTES);
    // Sending (dropping) the chunks lets the rest through; all of it is the exact JSON.
    let mut out: Vec<u8> = Vec::new();
    for c in held.drain(..) {
        out.extend_from_slice(c.chunk());
    }
    while let Some(f) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        out.extend_from_slice(f.unwrap().into_data().unwrap().chunk());
    }
    assert!(body.is_end_stream());
    assert_eq!(String::from_utf8(out).unwrap(), expected(&runs));
    drop(body);
    assert_eq!(budget.in_use(), 0);
}
