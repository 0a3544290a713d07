//! Database URLs: `sqlite://PATH` (relative or absolute), `postgres://USER[:PASS]@HOST:PORT/DB`
//! and `mysql://USER[:PASS]@HOST:PORT/DB` (MariaDB too), servers with optional TLS parameters
//! (`?sslmode=verify-full&sslrootcert=CA.pem`, `?ssl-mode=VERIFY_IDENTITY&ssl-ca=CA.pem`).
//! Parsed strictly — every part the format names must be there, nothing else may be — and
//! shown without the password.

use std::fmt;
use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;

use crate::error::UrlError;

/// Which database a URL points at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DbKind {
    /// An SQLite file (the embedded default).
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
    /// A MySQL or MariaDB server.
    #[serde(rename = "mysql")]
    MySql,
}

impl DbKind {
    /// `sql` with its `?` placeholders in this database's style: PostgreSQL numbers them (`$1`,
    /// `$2`...); the others keep `?`. For statements built from constants, never from input.
    pub fn placeholders(self, sql: &str) -> String {
        if self != DbKind::Postgres {
            return sql.to_owned();
        }
        let mut out = String::with_capacity(sql.len() + 8);
        let mut n = 0;
        for c in sql.chars() {
            if c == '?' {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            } else {
                out.push(c);
            }
        }
        out
    }

    /// An SQL expression of the database's own clock, in ms since the Unix epoch (`BIGINT`):
    /// leases are judged on it, never on a server's clock.
    pub fn now_ms_sql(self) -> &'static str {
        match self {
            DbKind::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            DbKind::MySql => "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)",
            DbKind::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        }
    }

    /// Whether this build of vesta-segment can connect to it (features `sqlite`, `postgres`,
    /// `mysql`).
    pub fn built_in(self) -> bool {
        match self {
            DbKind::Sqlite => cfg!(feature = "sqlite"),
            DbKind::Postgres => cfg!(feature = "postgres"),
            DbKind::MySql => cfg!(feature = "mysql"),
        }
    }

    /// The one line that says a database is left out of this build.
    pub fn missing_feature(self) -> String {
        let scheme = self.scheme();
        format!("{scheme}:// needs vesta-segment built with its feature `{scheme}`")
    }

    /// The URL scheme: `sqlite`, `postgres` or `mysql`.
    pub fn scheme(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Postgres => "postgres",
            DbKind::MySql => "mysql",
        }
    }
}

/// How a connection to a database server is protected: the URL's `sslmode` (PostgreSQL) or
/// `ssl-mode` (MySQL/MariaDB). The modes that fall back to plain TCP by themselves (`prefer`,
/// `allow`, `PREFERRED`) are refused: a connection is encrypted or it is not, as configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsMode {
    /// Plain TCP (the default; `disable`, `DISABLED`).
    #[default]
    Disabled,
    /// Encrypted, the server's certificate not checked (`require`, `REQUIRED`): protects
    /// against eavesdroppers, not against an impostor.
    Required,
    /// Encrypted, the certificate signed by a trusted CA (`verify-ca`, `VERIFY_CA`).
    VerifyCa,
    /// Encrypted, the certificate signed by a trusted CA and naming the host (`verify-full`,
    /// `VERIFY_IDENTITY`).
    VerifyFull,
}

impl TlsMode {
    /// The URL parameter and value for `kind` (`sslmode=verify-full`, `ssl-mode=REQUIRED`).
    pub fn param(self, kind: DbKind) -> String {
        let [name, _] = tls_param_names(kind);
        let value = TLS_MODES
            .iter()
            .find(|(_, _, m)| *m == self)
            .map(|(pg, my, _)| if kind == DbKind::MySql { my } else { pg })
            .unwrap_or(&"disable");
        format!("{name}={value}")
    }
}

/// Each mode's PostgreSQL and MySQL spelling.
const TLS_MODES: [(&str, &str, TlsMode); 4] = [
    ("disable", "DISABLED", TlsMode::Disabled),
    ("require", "REQUIRED", TlsMode::Required),
    ("verify-ca", "VERIFY_CA", TlsMode::VerifyCa),
    ("verify-full", "VERIFY_IDENTITY", TlsMode::VerifyFull),
];

/// The URL parameters of the mode and of the CA file, as each database's own clients name them.
fn tls_param_names(kind: DbKind) -> [&'static str; 2] {
    match kind {
        DbKind::MySql => ["ssl-mode", "ssl-ca"],
        _ => ["sslmode", "sslrootcert"],
    }
}

/// Host, port, credentials and database of a server URL.
#[derive(Clone, PartialEq, Eq)]
pub struct ServerAddr {
    /// Host name or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// User name (percent-decoded).
    pub user: String,
    /// Password (percent-decoded), if given.
    pub password: Option<String>,
    /// Database name (percent-decoded).
    pub database: String,
    /// TLS to the server (`sslmode` / `ssl-mode`; needs the `tls` feature unless disabled).
    pub tls: TlsMode,
    /// The CA file the server's certificate is checked against (`sslrootcert` / `ssl-ca`);
    /// `None`: the operating system's trust store.
    pub ca: Option<PathBuf>,
}

impl fmt::Debug for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerAddr")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("database", &self.database)
            .field("tls", &self.tls)
            .field("ca", &self.ca)
            .finish()
    }
}

/// Where a URL points.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbTarget {
    /// An SQLite file, relative to the working directory or absolute.
    Sqlite(PathBuf),
    /// A PostgreSQL server.
    Postgres(ServerAddr),
    /// A MySQL or MariaDB server.
    MySql(ServerAddr),
}

/// A parsed database URL. `Display` and `Debug` hide the password.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl {
    target: DbTarget,
    shown: String,
}

impl DbUrl {
    /// Parses a URL; the error names the URL (password hidden) and the expected forms.
    pub fn parse(text: &str) -> Result<DbUrl, UrlError> {
        let fail = |reason: &str| UrlError {
            url: redact(text),
            reason: reason.to_owned(),
        };
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(fail("no scheme"));
        };
        let target = match scheme {
            "sqlite" => DbTarget::Sqlite(sqlite_path(rest).map_err(fail)?),
            "postgres" | "postgresql" => {
                DbTarget::Postgres(server(text, DbKind::Postgres).map_err(|r| fail(&r))?)
            }
            "mysql" => DbTarget::MySql(server(text, DbKind::MySql).map_err(|r| fail(&r))?),
            _ => return Err(fail(&format!("unsupported scheme {scheme:?}"))),
        };
        let url = DbUrl {
            target,
            shown: redact(text),
        };
        if !url.kind().built_in() {
            return Err(fail(&url.kind().missing_feature()));
        }
        Ok(url)
    }

    /// Stands for a pool handed in by the application (`Store::from_pool`): no address of
    /// its own; shown as `<scheme> pool of the application`.
    pub(crate) fn of_pool(kind: DbKind) -> DbUrl {
        let none = || ServerAddr {
            host: String::new(),
            port: 0,
            user: String::new(),
            password: None,
            database: String::new(),
            tls: TlsMode::Disabled,
            ca: None,
        };
        let target = match kind {
            DbKind::Sqlite => DbTarget::Sqlite(PathBuf::new()),
            DbKind::Postgres => DbTarget::Postgres(none()),
            DbKind::MySql => DbTarget::MySql(none()),
        };
        DbUrl {
            target,
            shown: format!("{} pool of the application", kind.scheme()),
        }
    }

    /// Where it points.
    pub fn target(&self) -> &DbTarget {
        &self.target
    }

    /// Which database it is.
    pub fn kind(&self) -> DbKind {
        match self.target {
            DbTarget::Sqlite(_) => DbKind::Sqlite,
            DbTarget::Postgres(_) => DbKind::Postgres,
            DbTarget::MySql(_) => DbKind::MySql,
        }
    }

    /// The SQLite file, for `sqlite://` URLs.
    pub fn sqlite_path(&self) -> Option<&Path> {
        match &self.target {
            DbTarget::Sqlite(p) => Some(p),
            _ => None,
        }
    }

    /// The URL with its password replaced by `***`.
    pub fn redacted(&self) -> &str {
        &self.shown
    }
}

impl fmt::Display for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({})", self.shown)
    }
}

impl std::str::FromStr for DbUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        DbUrl::parse(s)
    }
}

fn sqlite_path(rest: &str) -> Result<PathBuf, &'static str> {
    if rest.is_empty() {
        return Err("the file path is empty");
    }
    if rest.starts_with(':') {
        return Err("in-memory SQLite is not supported (each connection would see its own table)");
    }
    if rest.contains('?') || rest.contains('#') {
        return Err("query parameters are not supported");
    }
    Ok(PathBuf::from(rest))
}

fn server(text: &str, kind: DbKind) -> Result<ServerAddr, String> {
    let url = url::Url::parse(text).map_err(|e| e.to_string())?;
    let decode = |s: &str, what: &str| {
        percent_decode_str(s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| format!("the {what} is not valid UTF-8 after percent-decoding"))
    };
    if url.username().is_empty() {
        return Err("the user is missing".into());
    }
    let host = match url.host() {
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        Some(h) => h.to_string(),
        None => return Err("the host is missing".into()),
    };
    if host.is_empty() {
        return Err("the host is missing".into());
    }
    let Some(port) = url.port() else {
        return Err("the port is missing".into());
    };
    if url.fragment().is_some() {
        return Err("a #fragment is not supported".into());
    }
    let (tls, ca) = tls_params(&url, kind)?;
    let database = url.path().strip_prefix('/').unwrap_or("");
    if database.is_empty() || database.contains('/') {
        return Err("the path must be one database name, /DB".into());
    }
    Ok(ServerAddr {
        host,
        port,
        user: decode(url.username(), "user")?,
        password: url.password().map(|p| decode(p, "password")).transpose()?,
        database: decode(database, "database name")?,
        tls,
        ca,
    })
}

/// The TLS parameters of a server URL, the only ones it may carry: the mode and the CA file.
fn tls_params(url: &url::Url, kind: DbKind) -> Result<(TlsMode, Option<PathBuf>), String> {
    let [mode_name, ca_name] = tls_param_names(kind);
    let (mut mode, mut ca) = (None, None);
    for (key, value) in url.query_pairs() {
        let slot_taken = if key == mode_name {
            let found = TLS_MODES.iter().find(|(pg, my, _)| {
                let name = if kind == DbKind::MySql { my } else { pg };
                value.eq_ignore_ascii_case(name)
            });
            let Some((_, _, m)) = found else {
                let allowed: Vec<&str> = TLS_MODES
                    .iter()
                    .map(|(pg, my, _)| if kind == DbKind::MySql { *my } else { *pg })
                    .collect();
                return Err(format!(
                    "{mode_name}={value} is not supported: use one of {} (a mode that falls \
                     back to plain TCP by itself is refused)",
                    allowed.join(", ")
                ));
            };
            mode.replace(*m).is_some()
        } else if key == ca_name {
            if value.is_empty() {
                return Err(format!("{ca_name} is empty: give the CA's PEM file"));
            }
            ca.replace(PathBuf::from(value.as_ref())).is_some()
        } else {
            return Err(format!(
                "query parameter {key:?} is not supported: allowed {mode_name}, {ca_name}"
            ));
        };
        if slot_taken {
            return Err(format!("query parameter {key:?} is given more than once"));
        }
    }
    let mode = mode.unwrap_or_default();
    if ca.is_some() && !matches!(mode, TlsMode::VerifyCa | TlsMode::VerifyFull) {
        let [verify_ca, verify_full] =
            [TlsMode::VerifyCa, TlsMode::VerifyFull].map(|m| m.param(kind));
        return Err(format!(
            "{ca_name} is used only with {verify_ca} or {verify_full}"
        ));
    }
    if mode != TlsMode::Disabled && !cfg!(feature = "tls") {
        return Err(format!(
            "{} needs vesta-segment built with its feature `tls`",
            mode.param(kind)
        ));
    }
    Ok((mode, ca))
}

/// The URL with any password replaced by `***` (works on malformed URLs too).
pub fn redact(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("://") else {
        return text.to_owned();
    };
    if scheme == "sqlite" {
        return text.to_owned();
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some(at) = authority.rfind('@') else {
        return text.to_owned();
    };
    let (userinfo, host) = authority.split_at(at);
    match userinfo.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{host}{tail}"),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "sqlite")]
    #[test]
    fn sqlite_paths_relative_and_absolute() {
        let u = DbUrl::parse("sqlite://vesta-segments.db").unwrap();
        assert_eq!(u.sqlite_path(), Some(Path::new("vesta-segments.db")));
        let u = DbUrl::parse("sqlite:///var/lib/vesta/seg.db").unwrap();
        assert_eq!(u.sqlite_path(), Some(Path::new("/var/lib/vesta/seg.db")));
        assert_eq!(u.kind(), DbKind::Sqlite);
    }

    #[cfg(all(feature = "postgres", feature = "mysql"))]
    #[test]
    fn server_urls_are_decoded() {
        let u = DbUrl::parse("postgres://leaf:p%40ss@127.0.0.1:5432/leaf").unwrap();
        let DbTarget::Postgres(a) = u.target() else {
            panic!("not postgres")
        };
        assert_eq!(
            (a.host.as_str(), a.port, a.user.as_str()),
            ("127.0.0.1", 5432, "leaf")
        );
        assert_eq!(a.password.as_deref(), Some("p@ss"));
        assert_eq!(a.database, "leaf");
        assert_eq!(
            u.to_string(),
            "postgres://leaf:***@127.0.0.1:5432/leaf",
            "display hides the password"
        );
        assert!(!format!("{u:?}").contains("p%40ss"));
        let u = DbUrl::parse("mysql://root@[::1]:3306/leaf").unwrap();
        let DbTarget::MySql(a) = u.target() else {
            panic!("not mysql")
        };
        assert_eq!((a.host.as_str(), a.password.as_deref()), ("::1", None));
    }

    #[test]
    fn bad_urls_name_the_url_without_its_password_and_the_forms() {
        for (url, reason) in [
            ("vesta.db", "no scheme"),
            ("redis://x:1/0", "unsupported scheme"),
            ("sqlite://", "empty"),
            ("sqlite://:memory:", "in-memory"),
            ("postgres://127.0.0.1:5432/db", "user is missing"),
            ("postgres://u:secret@127.0.0.1/db", "port is missing"),
            ("mysql://u:secret@127.0.0.1:3306", "one database name"),
            ("mysql://u:secret@127.0.0.1:3306/a/b", "one database name"),
            (
                "postgres://u:secret@h:5432/db?sslmode=prefer",
                "sslmode=prefer",
            ),
            (
                "postgres://u:secret@h:5432/db?connect_timeout=3",
                "connect_timeout",
            ),
            (
                "mysql://u:secret@h:3306/db?sslmode=require",
                "allowed ssl-mode, ssl-ca",
            ),
            ("postgres://u:secret@h:5432/db#x", "fragment"),
            ("postgres://u:secret@h:99999/db", "invalid port"),
        ] {
            let err = DbUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(reason), "{url}: {err}");
            assert!(!err.contains("secret"), "{url}: {err}");
            assert!(err.contains("expected sqlite://PATH"), "{url}: {err}");
        }
    }

    #[cfg(all(feature = "postgres", feature = "mysql"))]
    #[test]
    fn tls_parameters_are_read_in_each_databases_spelling() {
        let plain = DbUrl::parse("postgres://u@h:5432/db?sslmode=disable").unwrap();
        let DbTarget::Postgres(a) = plain.target() else {
            panic!("not postgres")
        };
        assert_eq!((a.tls, a.ca.as_deref()), (TlsMode::Disabled, None));
        for bad in [
            "postgres://u@h:5432/db?sslmode=verify-full&sslmode=disable",
            "postgres://u@h:5432/db?sslrootcert=/ca.pem",
            "postgres://u@h:5432/db?sslmode=require&sslrootcert=/ca.pem",
            "mysql://u@h:3306/db?ssl-mode=DISABLED&ssl-ca=/ca.pem",
            "mysql://u@h:3306/db?ssl-mode=PREFERRED",
            "postgres://u@h:5432/db?sslmode=allow",
        ] {
            let err = DbUrl::parse(bad).unwrap_err().to_string();
            assert!(err.contains("ssl"), "{bad}: {err}");
        }
    }

    #[cfg(all(feature = "tls", feature = "postgres", feature = "mysql"))]
    #[test]
    fn tls_modes_and_the_ca_reach_the_address() {
        let u = DbUrl::parse("postgres://u@h:5432/db?sslmode=verify-full&sslrootcert=/etc/ca.pem")
            .unwrap();
        let DbTarget::Postgres(a) = u.target() else {
            panic!("not postgres")
        };
        assert_eq!(a.tls, TlsMode::VerifyFull);
        assert_eq!(a.ca.as_deref(), Some(Path::new("/etc/ca.pem")));
        let u = DbUrl::parse("mysql://u@h:3306/db?ssl-mode=verify_ca&ssl-ca=ca.pem").unwrap();
        let DbTarget::MySql(a) = u.target() else {
            panic!("not mysql")
        };
        assert_eq!(
            (a.tls, a.ca.as_deref()),
            (TlsMode::VerifyCa, Some(Path::new("ca.pem")))
        );
        assert_eq!(a.tls.param(DbKind::MySql), "ssl-mode=VERIFY_CA");
        let u = DbUrl::parse("postgres://u@h:5432/db?sslmode=require").unwrap();
        assert!(u.to_string().ends_with("?sslmode=require"), "{u}");
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn tls_without_the_feature_is_refused_naming_it() {
        let err = DbUrl::parse("postgres://u@h:5432/db?sslmode=require")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sslmode=require needs vesta-segment built with its feature `tls`"),
            "{err}"
        );
    }

    #[test]
    fn redaction_keeps_everything_but_the_password() {
        assert_eq!(
            redact("mysql://root:pw@h:1/db?x=y"),
            "mysql://root:***@h:1/db?x=y"
        );
        assert_eq!(redact("mysql://root@h:1/db"), "mysql://root@h:1/db");
        assert_eq!(redact("nonsense"), "nonsense");
    }
}
