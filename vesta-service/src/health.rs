//! What a server says about its health, the same on both: issuing or not (and why), the lease
//! (with several machine IDs each one's, degraded while some may not issue), how long the
//! layout has left, and with segment mode on each tag's state. The REST server
//! answers it at `/healthz`, the TCP server at `/healthz` of its metrics listener.
//!
//! Segments never make a server unhealthy (503): its IDs still work, and a load balancer must
//! not take it out of rotation for them. A segment store not yet connected, or a tag whose last
//! fetch failed, makes `status` `degraded`, with the details under `segments`.

use vesta_embed::Status;

use crate::segments::{Segments, SegmentsState};

/// The health of an issuer at one instant.
#[derive(Clone, Debug, PartialEq)]
pub enum Health {
    /// Issuing: `status` is `ok`, or `degraded` inside the end-of-life margin (with a warning).
    Issuing(serde_json::Value),
    /// Not issuing (fenced, acquiring, released): the sentence saying why.
    NotIssuing(String),
}

impl Health {
    /// The health of an issuer whose status is `s`, at `now_ms`.
    pub fn of(s: &Status, now_ms: u64) -> Health {
        if !s.can_issue() {
            let reason = s
                .lease
                .reason
                .clone()
                .unwrap_or_else(|| format!("the machine-ID lease is {}", s.lease.state));
            return Health::NotIssuing(format!("not issuing: {reason}"));
        }
        let mut body = serde_json::json!({
            "status": "ok",
            "lease": s.lease.state.name(),
            "machine": s.machine,
            "genMethod": s.gen_method.code(),
            "layout": s.layout.name(),
            "endOfLife": vesta_core::Epoch::rfc3339(s.end_of_life_ms),
            "endOfLifeSecondsLeft": vesta_core::time_left_ms(s.end_of_life_ms, now_ms) / 1000,
        });
        if let Some(ms) = s.lease.renew_latency_ms {
            body["leaseRenewLatencyMs"] = ms.into();
        }
        if let Some(t) = s.layout.id_type() {
            body["type"] = t.code().into();
        }
        // What the kernel says of the clock (when it can tell): an unsynchronised clock does
        // not take the server out of rotation, but the operator sees it (and an alert fires).
        if let Some(sync) = s.clock_sync {
            body["clock"] = serde_json::json!({
                "synchronised": sync.synchronised,
                "maxErrorMs": sync.max_error_us / 1000,
            });
        }
        // An issuer of several machine IDs (`machine.ids`): each with its lease; one that
        // may not issue leaves the others issuing, so the server stays in rotation, degraded.
        if s.machines.len() > 1 {
            body["machines"] = s
                .machines
                .iter()
                .map(|m| serde_json::json!({ "machine": m.machine, "lease": m.lease.state.name() }))
                .collect();
            if let Some(warning) = s.machines_warning() {
                body["status"] = "degraded".into();
                body["warning"] = warning.into();
            }
        }
        if let Some(warning) = s.end_of_life_warning(now_ms) {
            body["status"] = "degraded".into();
            body["warning"] = warning.into();
        }
        Health::Issuing(body)
    }

    /// Adds the segments' state (`segments` key) to a healthy answer; `status` becomes
    /// `degraded` unless the store is open and every tag in use fetched fine last time.
    pub fn with_segments(self, segments: Option<&Segments>) -> Health {
        match (self, segments) {
            (Health::Issuing(mut body), Some(segments)) => {
                let status = segments.status();
                if status.state != SegmentsState::Ok {
                    body["status"] = "degraded".into();
                }
                body["segments"] = serde_json::to_value(&status).unwrap_or_default();
                Health::Issuing(body)
            }
            (health, _) => health,
        }
    }

    /// Adds the per-key sequences' state (`seq` key) to a healthy answer; `status` becomes
    /// `degraded` while a section is fenced (another process on the table) or went back (the
    /// restore guard, `seq.guard`), while a standalone server's lease on the table is not
    /// confirmed within its term (`seq.owner`), or while a member of a cluster serves no set
    /// within its term (`seq.cluster`).
    pub fn with_seq(self, seq: Option<&vesta_seq::Sequences>) -> Health {
        match (self, seq) {
            (Health::Issuing(mut body), Some(seq)) => {
                let status = seq.status();
                if status.fenced > 0 {
                    body["status"] = "degraded".into();
                }
                let mut value = serde_json::to_value(&status).unwrap_or_default();
                value["db"] = seq.url().to_string().into();
                let guard = seq.guard_status();
                if guard.went_back > 0 || guard.error.is_some() {
                    body["status"] = "degraded".into();
                }
                value["guard"] = serde_json::to_value(&guard).unwrap_or_default();
                if let Some(owner) = seq.owner_status() {
                    if owner.term_left_ms == 0 {
                        body["status"] = "degraded".into();
                    }
                    value["owner"] = serde_json::to_value(&owner).unwrap_or_default();
                }
                if let Some(cluster) = seq.cluster_status() {
                    if cluster.term_left_ms == 0 || cluster.sets_owned == 0 {
                        body["status"] = "degraded".into();
                    }
                    value["cluster"] = serde_json::to_value(&cluster).unwrap_or_default();
                }
                body["seq"] = value;
                Health::Issuing(body)
            }
            (health, _) => health,
        }
    }

    /// `(healthy, JSON body)`: the body is the status object, or `{"error": why}`.
    pub fn to_http(&self) -> (bool, String) {
        match self {
            Health::Issuing(body) => (true, body.to_string()),
            Health::NotIssuing(why) => (false, serde_json::json!({ "error": why }).to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use vesta_core::{Clock, ManualClock};
    use vesta_embed::{Issuer, IssuerConfig, LeaseState};

    use super::Health;

    /// A server of three machine IDs lists each; one fenced leaves it issuing, degraded, with
    /// the warning naming it; all fenced takes it out of rotation.
    #[test]
    fn each_machine_id_is_listed_and_one_not_issuing_degrades() {
        let clock = Arc::new(ManualClock::new(1_700_000_000_000));
        let config = IssuerConfig::builder()
            .machine(7)
            .machine_ids(3)
            .build()
            .unwrap();
        let issuer = Issuer::start_with_clock(config, clock.clone()).unwrap();
        let now = clock.now_ms();
        let Health::Issuing(body) = Health::of(&issuer.status(), now) else {
            panic!("not issuing");
        };
        assert_eq!(body["status"], "ok");
        assert_eq!(body["machines"][2]["machine"], 9, "{body}");
        issuer.fence_machine_for_test(1, LeaseState::Fenced, "lease of 8 lost");
        let Health::Issuing(body) = Health::of(&issuer.status(), now) else {
            panic!("not issuing");
        };
        assert_eq!(body["status"], "degraded");
        assert_eq!(body["machines"][1]["lease"], "fenced", "{body}");
        assert_eq!(
            body["warning"],
            "1 of 3 machine IDs not issuing (8): lease of 8 lost; the others issue"
        );
        issuer.fence_for_test(LeaseState::Fenced, "all lost");
        assert!(matches!(
            Health::of(&issuer.status(), now),
            Health::NotIssuing(_)
        ));
    }
}
