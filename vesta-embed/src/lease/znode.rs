//! What the lease znodes hold, as small JSON documents readable with `zkCli.sh get`:
//! the claim (`<root>/machines/<id>`, EPHEMERAL) says who holds the ID; the mark
//! (`<root>/last/<id>`, PERSISTENT) says how far its IDs reach in time.

use serde::{Deserialize, Serialize};

use super::counted_in::CountedIn;
use super::rules::Promise;

/// The data of a claim node: who holds the machine ID and since when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// Host name of the holder.
    pub host: String,
    /// Process ID of the holder.
    pub pid: u32,
    /// The configured instance name, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// When the holding process started its issuer (ms since the Unix epoch).
    pub started_ms: u64,
    /// When this claim was made (ms since the Unix epoch).
    pub claimed_ms: u64,
}

/// The data of a mark node: the holder's high-water mark.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The end (ms since the Unix epoch) of the last time unit the holder issued in or may still
    /// issue in before its lease deadline; successors issue only in units starting at or after
    /// it.
    pub mark_ms: u64,
    /// The time field of the last issued ID, in the holder's layout (for people).
    pub last_time: u64,
    /// True once the holder shut down cleanly: it had stopped issuing when it wrote this.
    pub clean: bool,
    /// When the mark was written, by the holder's clock (ms since the Unix epoch).
    pub written_ms: u64,
    /// `host:pid` of the writer.
    pub holder: String,
    /// The time, seq and node fields and the unit the mark was counted in (absent in marks
    /// written before marks carried it; rewritten with it at the next beat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<String>,
    /// The epoch the mark was counted from (ms since the Unix epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch_ms: Option<u64>,
    /// The bits every ID of the writer carries, `0xMASK/0xVALUE` (fixed fields, genMethod).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed: Option<String>,
}

impl Claim {
    /// Encodes as JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes JSON, naming what is wrong.
    pub fn from_bytes(data: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(data).map_err(|e| format!("not a vesta claim: {e}"))
    }
}

impl Mark {
    /// The mark of `promise`, written by `holder`, counted in `counted_in`.
    pub(crate) fn of(promise: &Promise, holder: String, counted_in: &CountedIn) -> Mark {
        Mark {
            mark_ms: promise.mark_ms,
            last_time: promise.last_time,
            clean: promise.clean,
            written_ms: promise.sent_ms,
            holder,
            layout: Some(counted_in.layout.clone()),
            epoch_ms: Some(counted_in.epoch_ms),
            fixed: counted_in.fixed_text(),
        }
    }

    /// What the mark was counted in, if it says.
    pub(crate) fn counted_in(&self) -> Option<CountedIn> {
        CountedIn::from_record(self.layout.as_deref(), self.epoch_ms, self.fixed.as_deref())
    }

    /// Encodes as JSON.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Decodes JSON, naming what is wrong.
    pub fn from_bytes(data: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(data).map_err(|e| format!("not a vesta mark: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_round_trip_and_garbage_is_named() {
        let c = Claim {
            host: "h".into(),
            pid: 42,
            instance: None,
            started_ms: 1,
            claimed_ms: 2,
        };
        assert_eq!(Claim::from_bytes(&c.to_bytes()), Ok(c));
        let m = Mark {
            mark_ms: 3,
            last_time: 4,
            clean: false,
            written_ms: 5,
            holder: "h:42".into(),
            layout: Some("time 30-59, seq 10-29, node 0-9, 1000 ms units".into()),
            epoch_ms: Some(1_420_041_600_000),
            fixed: Some("0xf000000000000000/0x0000000000000000".into()),
        };
        assert_eq!(Mark::from_bytes(&m.to_bytes()), Ok(m));
        // A mark written before marks carried their layout still reads.
        let old = br#"{"mark_ms":3,"last_time":4,"clean":true,"written_ms":5,"holder":"h:1"}"#;
        assert_eq!(Mark::from_bytes(old).unwrap().layout, None);
        assert!(
            Mark::from_bytes(b"{}")
                .unwrap_err()
                .contains("not a vesta mark")
        );
    }
}
