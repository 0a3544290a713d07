//! `/seq/{key}` keys as sent in the path: percent-decoded, and an escape that is not one (a `%`
//! without two hex digits) refused naming it, never served as a key of its own.

use crate::common::{rest, seq_db, spawn_with_stores, system_issuer};

#[tokio::test]
async fn a_broken_percent_escape_is_a_400_naming_it_and_takes_no_number() {
    let dir = tempfile::tempdir().unwrap();
    let seq = seq_db(dir.path()).await;
    let server = spawn_with_stores(system_issuer(), rest(), None, Some(seq)).await;
    let c = server.client();
    // The key `%zz`, sent as it must be.
    assert_eq!(c.get("/seq/%25zz").await.body, "1");
    for (path, escape) in [
        ("/seq/%zz", "`%zz`"),
        ("/seq/%4", "`%4`"),
        ("/seq/ab%4/current", "`%4`"),
        ("/seq/%zz?count=2&format=json", "`%zz`"),
    ] {
        let r = c.get(path).await;
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(
            r.body.contains("invalid parameter key")
                && r.body.contains(escape)
                && r.body.contains("%25"),
            "{path}: {}",
            r.body
        );
    }
    // Nothing was handed out to the key a broken escape might have meant.
    assert_eq!(c.get("/seq/%25zz/current").await.body, "1");
    assert_eq!(c.get("/seq/%25zz").await.body, "2");
    server.stop().await;
}
