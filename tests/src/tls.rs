//! A throwaway certificate authority for the TLS tests (rcgen): a CA and server certificates
//! for `127.0.0.1` and `localhost` as PEM files in a temporary directory, and HTTPS clients
//! that trust it (HTTP/1.1 on blocking rustls; HTTP/2 by ALPN on hyper).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};

/// A CA whose files live as long as it does.
pub struct TestCa {
    dir: tempfile::TempDir,
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
}

/// A server certificate and key issued by a [`TestCa`].
#[derive(Clone, Debug)]
pub struct Issued {
    /// The PEM certificate file.
    pub cert: PathBuf,
    /// The PEM key file.
    pub key: PathBuf,
    /// The certificate, DER (what a client sees).
    pub der: Vec<u8>,
}

impl TestCa {
    /// A new CA named `name`; its certificate is at [`ca_pem`](Self::ca_pem).
    pub fn new(name: &str) -> TestCa {
        let dir = tempfile::Builder::new()
            .prefix("vesta-tls-")
            .tempdir()
            .unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.path().join("ca.pem"), cert.pem()).unwrap();
        let der = cert.der().clone();
        TestCa {
            dir,
            issuer: Issuer::new(params, key),
            der,
        }
    }

    /// The CA certificate's PEM file.
    pub fn ca_pem(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Issues a server certificate for 127.0.0.1 and localhost into `NAME.pem`, `NAME.key`.
    pub fn issue(&self, name: &str) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let issued = Issued {
            cert: self.dir.path().join(format!("{name}.pem")),
            key: self.dir.path().join(format!("{name}.key")),
            der: cert.der().to_vec(),
        };
        std::fs::write(&issued.cert, cert.pem()).unwrap();
        std::fs::write(&issued.key, key.serialize_pem()).unwrap();
        issued
    }

    /// A client config trusting this CA only, offering `alpn`.
    pub fn client_config(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Arc::new(config)
    }
}

/// What an HTTPS request got.
#[derive(Debug)]
pub struct HttpsAnswer {
    /// The status code.
    pub status: u16,
    /// The body.
    pub body: String,
    /// The server's certificate, DER.
    pub cert: Vec<u8>,
}

/// `GET path` over HTTPS (HTTP/1.1, `Connection: close`) to `addr` with extra `headers`;
/// `Err` when the handshake or the request fails.
pub fn https_get(
    addr: &str,
    config: Arc<rustls::ClientConfig>,
    path: &str,
    headers: &str,
) -> Result<HttpsAnswer, String> {
    let tcp = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let conn = rustls::ClientConnection::new(config, ServerName::try_from("127.0.0.1").unwrap())
        .map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // A server that closes without close_notify: what arrived is the answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let cert = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap_or_default();
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("not HTTP: {out:?}"))?;
    let body = out.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Ok(HttpsAnswer { status, body, cert })
}

/// `GET path` over HTTPS with HTTP/2 chosen by ALPN; returns the ALPN protocol, the status and
/// the body.
pub fn https_get_h2(
    addr: &str,
    config: Arc<rustls::ClientConfig>,
    path: &str,
) -> (Option<Vec<u8>>, u16, String) {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::rt::{TokioExecutor, TokioIo};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap();
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        let request = hyper::Request::get(format!("https://{addr}{path}"))
            .body(Empty::<bytes::Bytes>::new())
            .unwrap();
        let response = sender.send_request(request).await.unwrap();
        let status = response.status().as_u16();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (alpn, status, String::from_utf8_lossy(&body).into_owned())
    })
}
