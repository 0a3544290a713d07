//! TLS for both servers and the TCP client (rustls, ring): the server's certificate chain and
//! key come from PEM files (`[server] tls_cert`, `tls_key`) and are read again on SIGHUP
//! without dropping a connection — a file that does not load keeps the pair in use and says
//! why in the log. The REST server offers HTTP/2 and HTTP/1.1 by ALPN. [`Stream`] is a plain
//! or TLS connection, so the servers and the client have one code path for both.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, RwLock};
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// A TLS setup that could not be loaded: which file and why.
#[derive(Debug, thiserror::Error)]
#[error("{key} {}: {why}", path.display())]
pub struct TlsError {
    /// The config key (or flag) naming the file.
    pub key: &'static str,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub why: String,
}

impl TlsError {
    fn new(key: &'static str, path: &Path, why: impl fmt::Display) -> Self {
        TlsError {
            key,
            path: path.to_owned(),
            why: why.to_string(),
        }
    }
}

/// The certificate and key files of a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, leaf first (`server.tls_cert`).
    pub cert: PathBuf,
    /// PEM private key (`server.tls_key`): PKCS#8, PKCS#1 or SEC1.
    pub key: PathBuf,
}

impl TlsFiles {
    /// Reads both files into a key pair rustls can serve.
    fn load(&self) -> Result<Arc<CertifiedKey>, TlsError> {
        let chain = CertificateDer::pem_file_iter(&self.cert)
            .map_err(|e| TlsError::new("server.tls_cert", &self.cert, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::new("server.tls_cert", &self.cert, e))?;
        if chain.is_empty() {
            return Err(TlsError::new(
                "server.tls_cert",
                &self.cert,
                "no CERTIFICATE in the file",
            ));
        }
        let key = PrivateKeyDer::from_pem_file(&self.key)
            .map_err(|e| TlsError::new("server.tls_key", &self.key, e))?;
        let signing = provider::sign::any_supported_type(&key)
            .map_err(|e| TlsError::new("server.tls_key", &self.key, e))?;
        let pair = CertifiedKey::new(chain, signing);
        pair.keys_match().map_err(|e| {
            TlsError::new(
                "server.tls_key",
                &self.key,
                format!("does not match the certificate in server.tls_cert: {e}"),
            )
        })?;
        Ok(Arc::new(pair))
    }
}

/// The key pair in use, replaced by [`ServerTls::reload`].
#[derive(Debug)]
struct Reloadable {
    files: TlsFiles,
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for Reloadable {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(Arc::clone(
            &self.current.read().unwrap_or_else(|e| e.into_inner()),
        ))
    }
}

/// A server's TLS: the acceptor and the files it reloads.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: TlsAcceptor,
    pair: Arc<Reloadable>,
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("files", &self.pair.files)
            .finish()
    }
}

impl ServerTls {
    /// Loads `files` (an error names the key and the file) and offers `alpn` protocols, in
    /// order of preference (REST: `h2`, `http/1.1`; TCP: none).
    pub fn load(files: TlsFiles, alpn: &[&[u8]]) -> Result<ServerTls, TlsError> {
        let pair = Arc::new(Reloadable {
            current: RwLock::new(files.load()?),
            files,
        });
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::new("server.tls_cert", &pair.files.cert, e))?
                .with_no_client_auth()
                .with_cert_resolver(pair.clone());
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(ServerTls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            pair,
        })
    }

    /// Reads the files again; new handshakes use the new pair, open connections keep theirs.
    /// On error the pair in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let pair = self.pair.files.load()?;
        *self.pair.current.write().unwrap_or_else(|e| e.into_inner()) = pair;
        Ok(())
    }

    /// The server side of a handshake on `stream`, bounded by `timeout` (a client that
    /// connects and says nothing gives its slot back).
    pub async fn accept(&self, stream: TcpStream, timeout: Duration) -> io::Result<Stream> {
        match tokio::time::timeout(timeout, self.acceptor.accept(stream)).await {
            Ok(Ok(tls)) => Ok(Stream::ServerTls(Box::new(tls))),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "no TLS handshake within the timeout",
            )),
        }
    }
}

/// Watches SIGHUP until the task is aborted: with `tls`, each one reloads the certificate and
/// key (the outcome logged); without, it is logged and ignored. Either way a SIGHUP (`systemctl
/// reload`, a closed terminal) never stops the server. The handler is installed before this
/// returns.
#[cfg(feature = "server")]
pub fn watch_sighup(tls: Option<ServerTls>) -> tokio::task::JoinHandle<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let hup = signal(SignalKind::hangup());
    tokio::spawn(async move {
        let mut hup = match hup {
            Ok(hup) => hup,
            Err(e) => {
                tracing::warn!("cannot watch SIGHUP ({e}): the TLS certificate is not reloaded");
                return;
            }
        };
        while hup.recv().await.is_some() {
            let Some(tls) = &tls else {
                tracing::info!("SIGHUP: nothing to reload (no TLS)");
                continue;
            };
            match tls.reload() {
                Ok(()) => tracing::info!(
                    cert = %tls.pair.files.cert.display(),
                    "SIGHUP: TLS certificate and key reloaded"
                ),
                Err(e) => tracing::error!("SIGHUP: TLS reload failed, keeping the old pair: {e}"),
            }
        }
    })
}

/// A client's TLS: the CA that signs the servers' certificates.
#[derive(Clone)]
pub struct ClientTls {
    connector: TlsConnector,
}

impl fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClientTls")
    }
}

impl ClientTls {
    /// Trusts the certificates in the PEM file `ca` (and no others); `key` names the option in
    /// errors.
    pub fn with_ca(key: &'static str, ca: &Path) -> Result<ClientTls, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(ca)
            .map_err(|e| TlsError::new(key, ca, e))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| TlsError::new(key, ca, e))?;
        let (added, _) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(TlsError::new(key, ca, "no usable CERTIFICATE in the file"));
        }
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(provider::default_provider()))
                .with_safe_default_protocol_versions()
                .map_err(|e| TlsError::new(key, ca, e))?
                .with_root_certificates(roots)
                .with_no_client_auth();
        Ok(ClientTls {
            connector: TlsConnector::from(Arc::new(config)),
        })
    }

    /// The client side of a handshake with the server at `host` (a DNS name or an IP address,
    /// which its certificate must name).
    pub async fn connect(&self, host: &str, stream: TcpStream) -> io::Result<Stream> {
        let name = ServerName::try_from(host.to_owned())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{host}: {e}")))?;
        let tls = self.connector.connect(name, stream).await?;
        Ok(Stream::ClientTls(Box::new(tls)))
    }
}

/// A connection, plain or TLS.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS accepted by a server.
    ServerTls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// TLS connected by a client.
    ClientTls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// The protocol agreed by ALPN, if any.
    pub fn alpn(&self) -> Option<&[u8]> {
        match self {
            Stream::Plain(_) => None,
            Stream::ServerTls(s) => s.get_ref().1.alpn_protocol(),
            Stream::ClientTls(s) => s.get_ref().1.alpn_protocol(),
        }
    }
}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => $e,
            Stream::ServerTls($s) => $e,
            Stream::ClientTls($s) => $e,
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::ServerTls(s) => s.is_write_vectored(),
            Stream::ClientTls(s) => s.is_write_vectored(),
        }
    }
}
