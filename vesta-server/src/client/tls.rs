//! The client's TLS. With the `tls` feature: vesta-service's [`ClientTls`] (rustls, trusting one
//! CA) and its [`Stream`]. Without: a `ClientTls` with no values (so `ClientConfig::tls` can only
//! be `None`) and plain TCP, under the same names, so the connection code has one shape.

#[cfg(feature = "tls")]
pub use vesta_service::tls::{ClientTls, Stream};

/// A connection before any handshake, as a [`Stream`].
#[cfg(feature = "tls")]
pub(crate) fn plain(tcp: tokio::net::TcpStream) -> Stream {
    Stream::Plain(tcp)
}

#[cfg(not(feature = "tls"))]
pub(crate) use plain::plain;
#[cfg(not(feature = "tls"))]
pub use plain::{ClientTls, Stream};

#[cfg(not(feature = "tls"))]
mod plain {
    use tokio::net::TcpStream;

    /// TLS is not built in: enable vesta-server's `tls` feature. No value of this type exists,
    /// so `ClientConfig::tls` is always `None`.
    #[derive(Clone, Debug)]
    pub enum ClientTls {}

    impl ClientTls {
        /// Never called: there is no `ClientTls` to call it on.
        pub(crate) async fn connect(
            &self,
            _host: &str,
            _tcp: TcpStream,
        ) -> std::io::Result<Stream> {
            match *self {}
        }
    }

    /// A connection: plain TCP only.
    pub type Stream = TcpStream;

    /// A connection before any handshake, as a [`Stream`].
    pub(crate) fn plain(tcp: TcpStream) -> Stream {
        tcp
    }
}
