//! Database URLs: `sqlite://PATH` (relative or absolute), `postgres://USER[:PASS]@HOST:PORT/DB`
//! and `mysql://USER[:PASS]@HOST:PORT/DB` (MariaDB too). Parsed strictly — every part the
//! issue's format names must be there, nothing else may be — and shown without the password.

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
}

impl fmt::Debug for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerAddr")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("database", &self.database)
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
            "postgres" | "postgresql" => DbTarget::Postgres(server(text).map_err(|r| fail(&r))?),
            "mysql" => DbTarget::MySql(server(text).map_err(|r| fail(&r))?),
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

fn server(text: &str) -> Result<ServerAddr, String> {
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
    if url.query().is_some() || url.fragment().is_some() {
        return Err("query parameters are not supported".into());
    }
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
    })
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

    #[test]
    fn sqlite_paths_relative_and_absolute() {
        let u = DbUrl::parse("sqlite://vesta-segments.db").unwrap();
        assert_eq!(u.sqlite_path(), Some(Path::new("vesta-segments.db")));
        let u = DbUrl::parse("sqlite:///var/lib/vesta/seg.db").unwrap();
        assert_eq!(u.sqlite_path(), Some(Path::new("/var/lib/vesta/seg.db")));
        assert_eq!(u.kind(), DbKind::Sqlite);
    }

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
            ("postgres://u:secret@h:5432/db?sslmode=require", "query"),
            ("postgres://u:secret@h:99999/db", "invalid port"),
        ] {
            let err = DbUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(reason), "{url}: {err}");
            assert!(!err.contains("secret"), "{url}: {err}");
            assert!(err.contains("expected sqlite://PATH"), "{url}: {err}");
        }
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
