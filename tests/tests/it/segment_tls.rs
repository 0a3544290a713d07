//! Segment mode and SQL machine-ID leases over TLS, against a real PostgreSQL and a real MariaDB
//! that refuse plain TCP (`hostssl` only; `require_secure_transport`), with certificates from a
//! throwaway CA:
//!
//! - the verifying mode with the CA in the URL: `vesta segment` creates a tag and hands out
//!   numbers, an SQL lease is taken and given back; the encrypting-only mode works too;
//! - the same URL without TLS is refused by the server, and said so in one line (MariaDB says
//!   "access denied");
//! - a CA that did not sign the server's certificate is refused by the client, naming the
//!   certificate check;
//! - bad TLS parameters are refused before any connection, naming the parameter.

use std::path::Path;

use vesta_tests::bin::{vesta_fails, vesta_ok};
use vesta_tests::db::{MariaDb, Postgres};
use vesta_tests::tls::TestCa;

/// How one database spells its TLS parameters, and what it says to a plain login.
struct Spelling {
    /// `sslmode` / `ssl-mode`.
    mode: &'static str,
    /// `sslrootcert` / `ssl-ca`.
    ca: &'static str,
    /// The verifying mode and the encrypting-only one.
    verify: &'static str,
    require: &'static str,
    /// What the server's refusal of a plain login says.
    plain_refused: &'static str,
    /// Parameters refused before connecting, and what the refusal names.
    bad: &'static [(&'static str, &'static str)],
}

fn get_one(url: &str) -> [&str; 7] {
    ["segment", "get", "t", "-n", "1", "--db", url]
}

/// Everything the file header lists, on the database at `plain` (its URL without TLS) whose
/// certificate `ca` signed.
fn tls_only_database(plain: &str, ca: &Path, s: &Spelling) {
    let with_ca =
        |mode: &str, ca: &Path| format!("{plain}?{}={mode}&{}={}", s.mode, s.ca, ca.display());
    let tls = with_ca(s.verify, ca);

    vesta_ok(&["segment", "init", "--db", &tls]);
    vesta_ok(&["segment", "create", "t", "--step", "100", "--db", &tls]);
    let first = vesta_ok(&["segment", "get", "t", "-n", "3", "--db", &tls]);
    let numbers: Vec<u64> = first.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(numbers, [1, 2, 3], "{first}");
    let again: u64 = vesta_ok(&get_one(&tls)).trim().parse().unwrap();
    assert!(
        again > 3,
        "a second process starts on a fresh segment: {again}"
    );
    let leased = vesta_ok(&["gen", "-n", "2", "--machine-db", &tls]);
    assert_eq!(leased.lines().count(), 2, "{leased}");
    // Encrypted without checking the certificate: allowed, and works.
    vesta_ok(&get_one(&format!("{plain}?{}={}", s.mode, s.require)));

    // The server refuses plain TCP (the same user and URL worked over TLS just above).
    vesta_fails(&get_one(plain), &[s.plain_refused]);

    // A CA that did not sign the server's certificate: the client refuses the server.
    let other = TestCa::new("someone else");
    vesta_fails(
        &get_one(&with_ca(s.verify, &other.ca_pem())),
        &["certificate"],
    );

    for (query, needle) in s.bad {
        vesta_fails(&get_one(&format!("{plain}?{query}")), &[needle]);
    }
}

#[test]
fn postgres_over_tls_only() {
    let ca = TestCa::new("vesta test CA");
    let issued = ca.issue("pg");
    let pg = Postgres::start_tls(&issued.cert, &issued.key);
    let spelling = Spelling {
        mode: "sslmode",
        ca: "sslrootcert",
        verify: "verify-full",
        require: "require",
        plain_refused: "no encryption",
        bad: &[
            ("sslmode=prefer", "sslmode=prefer"),
            ("sslmode=verify-full&sslmode=disable", "more than once"),
            ("sslrootcert=/x.pem", "sslrootcert"),
            ("application_name=x", "application_name"),
        ],
    };
    tls_only_database(&pg.create_database("seg"), &ca.ca_pem(), &spelling);
}

#[test]
fn mariadb_over_tls_only() {
    let ca = TestCa::new("vesta test CA");
    let issued = ca.issue("mariadb");
    let db = MariaDb::start_tls(&issued.cert, &issued.key, &ca.ca_pem());
    let spelling = Spelling {
        mode: "ssl-mode",
        ca: "ssl-ca",
        verify: "VERIFY_IDENTITY",
        require: "REQUIRED",
        // MariaDB answers a plain login under `require_secure_transport` as access denied.
        plain_refused: "Access denied",
        bad: &[
            ("ssl-mode=PREFERRED", "ssl-mode=PREFERRED"),
            ("sslmode=require", "sslmode"),
        ],
    };
    tls_only_database(&db.create_database("seg"), &ca.ca_pem(), &spelling);
}
