//! What the lease znodes hold, as small JSON documents readable with `zkCli.sh get`:
//! the claim (`<root>/machines/<id>`, EPHEMERAL) says who holds the ID; the mark
//! (`<root>/last/<id>`, PERSISTENT) says how far its IDs reach in time.

use serde::{Deserialize, Serialize};

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
        };
        assert_eq!(Mark::from_bytes(&m.to_bytes()), Ok(m));
        assert!(
            Mark::from_bytes(b"{}")
                .unwrap_err()
                .contains("not a vesta mark")
        );
    }
}
