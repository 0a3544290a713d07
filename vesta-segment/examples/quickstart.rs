//! Segment mode in a few lines, on an SQLite file: create Leaf's `leaf_alloc` table and a tag,
//! take numbers, give the unused tail back.
//!
//! ```sh
//! cargo run -p vesta-segment --example quickstart            # in a temporary directory
//! cargo run -p vesta-segment --example quickstart -- seg.db  # or in this file
//! ```

use std::path::Path;

use vesta_segment::{Database, SegmentError, SegmentSection, Store};

/// Creates the table and the tag `orders` (step 1000, from 1) in the SQLite file at `path` if
/// they are missing, then takes `n` numbers of it; returns them.
pub async fn run(path: &Path, n: u64) -> Result<Vec<u64>, SegmentError> {
    let section = SegmentSection {
        db: Some(format!("sqlite://{}", path.display())),
        ..SegmentSection::default()
    };
    // Admin: `vesta segment init` and `vesta segment create` do the same from a shell.
    let db = Database::connect_or_create(&section.db_url()?, section.fetch_timeout()).await?;
    db.init().await?;
    if !db.tags().await?.iter().any(|t| t == "orders") {
        db.create_tag("orders", 1000, 1, Some("order numbers"))
            .await?;
    }
    db.close().await;

    let store = Store::open(&section).await?;
    let mut numbers = Vec::new();
    for _ in 0..n {
        numbers.push(store.next("orders").await?);
    }
    store.shutdown().await; // the unused tail goes back to the table
    Ok(numbers)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let path = match std::env::args().nth(1) {
        Some(p) => p.into(),
        None => dir.path().join("segments.db"),
    };
    for number in run(&path, 5).await? {
        println!("{number}");
    }
    Ok(())
}
