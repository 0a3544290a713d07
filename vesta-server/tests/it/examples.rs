//! The failover example (`examples/failover_client.rs`, compiled in) runs as a user would run
//! it: IDs keep coming from the second server when the first is killed, and from the embedded
//! fallback when both are.

#[path = "../../examples/failover_client.rs"]
#[allow(dead_code)]
mod failover_client;

use vesta_core::{GenMethod, IdFields};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_client_keeps_issuing_through_two_crashes() {
    let phases = failover_client::run(20).await.unwrap();
    let sources: Vec<Vec<(u64, GenMethod)>> = phases
        .iter()
        .map(|p| {
            p.ids
                .iter()
                .map(|&id| {
                    let f = IdFields::decode(id);
                    (f.machine, f.gen_method)
                })
                .collect()
        })
        .collect();
    assert!(sources.iter().all(|ids| ids.len() == 20));
    assert!(
        sources[0].iter().all(|&s| s == (924, GenMethod::Server)),
        "{sources:?}"
    );
    assert!(
        sources[1].iter().all(|&s| s == (925, GenMethod::Server)),
        "{sources:?}"
    );
    assert!(
        sources[2].iter().all(|&s| s == (17, GenMethod::Embed)),
        "{sources:?}"
    );
    let mut all: Vec<u64> = phases.iter().flat_map(|p| p.ids.iter().copied()).collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 60, "no ID twice");
}
