//! Every documented framing error (`x-framing-errors`) gets its bare status and a close.

use super::*;

#[tokio::test]
async fn framing_errors_get_the_documented_bare_status_and_a_close() {
    let spec = spec();
    let server = spawn(system_issuer(), rest()).await;
    let cases = spec["x-framing-errors"]["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    for case in cases {
        let mut request = case["request"].as_str().unwrap().to_owned();
        if let Some(at) = request.find("PAD") {
            let digits: String = request[at + 3..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            let pad = "a".repeat(digits.parse().unwrap());
            request.replace_range(at..at + 3 + digits.len(), &pad);
        }
        let status = case["status"].as_u64().unwrap();
        let mut s = tokio::net::TcpStream::connect(server.addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut got = Vec::new();
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(3), s.read_to_end(&mut got)).await;
        let why = case["why"].as_str().unwrap();
        assert!(read.is_ok(), "{why}: the connection was not closed");
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        let (head, body) = text
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("{why}: {text:?}"));
        assert!(
            head.starts_with(&format!("http/1.1 {status} ")),
            "{why}: {head}"
        );
        assert!(head.contains("\r\ncontent-length: 0"), "{why}: {head}");
        assert!(head.contains("\r\nconnection: close"), "{why}: {head}");
        assert!(body.is_empty(), "{why}: body {body:?}");
    }
    // The server still serves.
    server.client().get("/genid").await.id();
    server.stop().await;
}
