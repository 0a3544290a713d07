//! Embeds an issuer with a static machine ID: issue IDs, explain one, make one from chosen
//! fields (to repair data), and release the machine ID.
//!
//! ```sh
//! cargo run -p vesta-embed --example embed_static
//! ```

use vesta_embed::{Issuer, IssuerConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let issued = run(7, 5)?;
    for id in &issued.ids {
        println!("{id}");
    }
    println!("\n{}", issued.explained);
    println!(
        "made from time {} seq 42: {}",
        issued.made_time, issued.made
    );
    Ok(())
}

/// What [`run`] issued and made.
pub struct Issued {
    /// The IDs, in issue order.
    pub ids: Vec<u64>,
    /// The first ID explained, as `vesta explain` prints it.
    pub explained: String,
    /// The time field (seconds since the epoch) of the made ID.
    pub made_time: u64,
    /// An ID made by hand: this issuer's fields at `made_time` with sequence 42.
    pub made: u64,
}

/// Starts an issuer on static machine ID `machine` (from the embed pool 0..=923; unique
/// among your running issuers), issues `n` IDs, explains and makes one, then shuts down.
pub fn run(machine: u64, n: u64) -> Result<Issued, Box<dyn std::error::Error>> {
    let config = IssuerConfig::builder().machine(machine).build()?;
    let issuer = Issuer::start(config)?;

    let ids: Vec<u64> = issuer.next_ids(n)?.iter().collect();
    let first = issuer.explain(ids[0]);

    // The issuer's own fields at the first ID's time, but sequence 42: IDs never issued can
    // be made, to repair data; every field is range-checked.
    let values = issuer
        .own_values()
        .with("time", first.time())
        .with("seq", 42);
    let made = issuer.make(&values)?;

    issuer.shutdown()?; // also done on drop; afterwards every call is refused
    Ok(Issued {
        ids,
        explained: first.to_string(),
        made_time: first.time(),
        made,
    })
}
