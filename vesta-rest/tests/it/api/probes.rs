//! `/healthz` and `/metrics`: the issuer's health (degraded near its end of life) and metrics.

use super::*;

/// Inside the end-of-life margin the server still issues and answers 200, but says it is
/// degraded and why; the metrics carry the margin for alert rules.
#[tokio::test]
async fn healthz_is_degraded_inside_the_end_of_life_margin() {
    let mut config = issuer_config();
    // With this epoch max-peak IDs end in January 2028, about four years after T0.
    config.id.epoch = Some("1994-01-01T00:00:00Z".parse().unwrap());
    let issuer = Issuer::start_with_clock(config, Arc::new(ManualClock::new(T0))).unwrap();
    let server = spawn(issuer, rest()).await;
    let c = server.client();
    let r = c.get("/healthz").await;
    assert_eq!(r.status, 200);
    let v = r.json();
    assert_eq!(v["status"], "degraded");
    assert_eq!(v["endOfLife"], "2028-01-10T13:37:03.999Z");
    let warning = v["warning"].as_str().unwrap();
    assert!(warning.contains("1517 days (4.2 years) left"), "{warning}");
    assert!(warning.contains("plan a new epoch"), "{warning}");
    c.get("/genid").await.id();
    let m = c.get("/metrics").await.body;
    assert_eq!(
        sample(&m, "vesta_end_of_life_margin_seconds"),
        1826.0 * 86400.0
    );
    assert!(sample(&m, "vesta_end_of_life_remaining_seconds") < 1826.0 * 86400.0);
    server.stop().await;
}

#[tokio::test]
async fn healthz_and_metrics_report_the_issuer() {
    let server = spawn(system_issuer(), rest()).await;
    let c = server.client();
    let r = c.get("/healthz").await;
    assert_eq!(r.status, 200);
    let mut health = r.json();
    let left = health["endOfLifeSecondsLeft"].take().as_u64().unwrap();
    assert!(left > 5 * 365 * 86400 && left < 35 * 365 * 86400, "{left}");
    // The kernel's view of the clock, where it tells (this machine's own state, either way).
    if let Some(kernel) = vesta_embed::kernel_sync() {
        let clock = health.as_object_mut().unwrap().remove("clock").unwrap();
        assert_eq!(clock["synchronised"], kernel.synchronised, "{clock}");
        assert!(clock["maxErrorMs"].is_u64(), "{clock}");
    }
    assert_eq!(
        health,
        serde_json::json!({"status": "ok", "lease": "static", "machine": 924, "genMethod": 2,
            "layout": "vesta", "type": 0, "endOfLife": "2049-01-09T05:37:03.999Z",
            "endOfLifeSecondsLeft": null})
    );
    for _ in 0..3 {
        c.get("/genid").await.id();
    }
    c.get("/genids?count=10").await.json();
    assert_eq!(c.get("/nope").await.status, 404);
    let r = c.get("/metrics").await;
    assert_eq!(r.status, 200);
    assert!(
        r.header("content-type")
            .starts_with("application/openmetrics-text")
    );
    let m = &r.body;
    assert_eq!(sample(m, "vesta_ids_issued_total"), 13.0);
    assert_eq!(
        sample(
            m,
            "vesta_http_requests_total{endpoint=\"genid\",status=\"200\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            m,
            "vesta_http_requests_total{endpoint=\"other\",status=\"404\"}"
        ),
        1.0
    );
    assert_eq!(
        sample(
            m,
            "vesta_http_request_duration_seconds_count{endpoint=\"genid\"}"
        ),
        3.0
    );
    assert_eq!(
        sample(
            m,
            "vesta_http_request_duration_seconds_bucket{le=\"+Inf\",endpoint=\"genid\"}"
        ),
        3.0
    );
    assert_eq!(sample(m, "vesta_lease_state{state=\"static\"}"), 1.0);
    assert_eq!(sample(m, "vesta_lease_state{state=\"fenced\"}"), 0.0);
    assert_eq!(sample(m, "vesta_issuing"), 1.0);
    assert_eq!(sample(m, "vesta_machine_id"), 924.0);
    // This client's one keep-alive connection, beside the limit (shared with the TCP server).
    assert_eq!(sample(m, "vesta_connections"), 1.0);
    assert_eq!(sample(m, "vesta_connections_max"), 1024.0);
    assert_eq!(sample(m, "vesta_lease_machine_changes_total"), 0.0);
    assert_eq!(sample(m, "vesta_layout_capacity_per_second"), 1_048_576.0);
    assert_eq!(sample(m, "vesta_clock_rollbacks_total"), 0.0);
    assert_eq!(sample(m, "vesta_lease_fence_events_total"), 0.0);
    // Max-peak with Vesta's epoch ends in January 2049.
    let eol = sample(m, "vesta_end_of_life_remaining_seconds");
    assert!(
        eol > 5.0 * 365.0 * 86400.0 && eol < 35.0 * 365.0 * 86400.0,
        "{eol}"
    );
    assert!(m.contains("vesta_issuer_info{gen_method=\"rest\",type=\"max-peak\""));
    for line in m.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        assert!(line.starts_with("vesta_"), "unprefixed metric: {line}");
    }
    assert!(m.ends_with("# EOF\n"));
    server.stop().await;
}
