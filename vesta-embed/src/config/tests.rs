//! The config's own tests: loading, checking, and the messages that name the key.

use super::*;
use vesta_core::{Epoch, IdType};

#[test]
fn an_ordinal_is_the_host_names_trailing_number_plus_the_offset() {
    assert_eq!(ordinal_machine("vesta-0", 0).unwrap(), 0);
    assert_eq!(ordinal_machine("vesta-17", 0).unwrap(), 17);
    assert_eq!(ordinal_machine("ids-2-42", 924).unwrap(), 966);
    assert_eq!(ordinal_machine("7", 1).unwrap(), 8);
    let err = ordinal_machine("vesta", 0).unwrap_err().to_string();
    assert!(
        err.contains("\"vesta\"") && err.contains("no trailing number"),
        "{err}"
    );
    let err = ordinal_machine("vesta-99999999999999999999999", 0)
        .unwrap_err()
        .to_string();
    assert!(err.contains("too large"), "{err}");
    let err = ordinal_machine("vesta-5", u64::MAX)
        .unwrap_err()
        .to_string();
    assert!(err.contains("overflows"), "{err}");
}

#[test]
fn ordinal_keys_are_checked_against_the_source() {
    let err = IssuerConfig::from_toml_str(
        "[machine]
ordinal_offset = 3
",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("ordinal_offset 3") && err.contains("not \"ordinal\""),
        "{err}"
    );
    let err = IssuerConfig::from_toml_str(
        "[machine]
source = \"ordinal\"
id = 4
",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("machine.id 4") && err.contains("ordinal"),
        "{err}"
    );
}

#[test]
fn empty_file_is_the_default() {
    assert_eq!(
        IssuerConfig::from_toml_str("").unwrap(),
        IssuerConfig::default()
    );
}

#[test]
fn unknown_keys_are_named() {
    let err = IssuerConfig::from_toml_str("[id]\ntpye = 1\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("tpye"), "{err}");
    let err = IssuerConfig::from_toml_str("[machin]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("machin"), "{err}");
}

#[test]
fn epoch_and_type_accept_both_spellings() {
    let c = IssuerConfig::from_toml_str(
        "[id]\ntype = \"min-granularity\"\nepoch = \"2015-01-01T00:00:00+08:00\"\n",
    )
    .unwrap();
    assert_eq!(c.id.epoch, Some(Epoch::VESTA));
    assert_eq!(c.id.id_type, Some(IdType::MinGranularity));
    let c = IssuerConfig::from_toml_str("[id]\ntype = 0\nepoch = 1420041600000\n").unwrap();
    assert_eq!(c.id.id_type, Some(IdType::MaxPeak));
    let err = IssuerConfig::from_toml_str("[id]\ntype = 2\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("type 2 is out of range"), "{err}");
}

/// A value of the wrong kind or sign names the key and what it takes, not "did not match
/// any variant of untagged enum".
#[test]
fn a_bad_epoch_or_type_names_its_key_and_forms() {
    let accepted = "ms since 1970 (0 or more) or an RFC 3339 date-time after 1970";
    for (toml, want) in [
        (
            "[id]\nepoch = -5\n",
            format!("invalid config: id.epoch `-5` is not valid: expected {accepted} (line 2)"),
        ),
        (
            "[id]\nepoch = \"yesterday\"\n",
            format!(
                "invalid config: id.epoch `yesterday` is not valid: expected {accepted} \
                     (line 2)"
            ),
        ),
        (
            "[id]\nepoch = 1.5\n",
            format!(
                "invalid config: invalid type: floating point `1.5`, expected id.epoch as \
                     {accepted} (line 2)"
            ),
        ),
        (
            "[id]\ntype = -1\n",
            "invalid config: type `-1` is not valid: expected max-peak (seconds), \
                 min-granularity (millis), 0 or 1 (line 2)"
                .to_owned(),
        ),
        (
            "[id]\ntype = true\n",
            "invalid config: invalid type: boolean `true`, expected type as max-peak \
                 (seconds), min-granularity (millis), 0 or 1 (line 2)"
                .to_owned(),
        ),
        (
            "[id.layout]\nunit_ms = 1\nepoch = -5\nfields = []\n",
            format!(
                "invalid config: id.layout.epoch `-5` is not valid: expected {accepted} \
                     (line 3)"
            ),
        ),
    ] {
        let err = IssuerConfig::from_toml_str(toml).unwrap_err().to_string();
        assert_eq!(err, want, "{toml}");
    }
    let c = IssuerConfig::from_toml_str("[id]\nepoch = 0\ntype = 1\n").unwrap();
    assert_eq!(c.id.epoch, Some(Epoch::from_unix_ms(0)));
    assert_eq!(c.id.id_type, Some(IdType::MinGranularity));
}

#[test]
fn shipped_conf_file_is_the_default() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../conf/vesta.toml");
    assert_eq!(
        IssuerConfig::from_toml_file(path).unwrap(),
        IssuerConfig::default()
    );
}

#[test]
fn a_key_that_moved_sections_says_where_it_went() {
    let err = IssuerConfig::from_toml_str("[zookeeper]\nstart_guard_max_wait_ms = 3000\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unknown field `start_guard_max_wait_ms`"),
        "{err}"
    );
    assert!(
        err.contains("start_guard_max_wait_ms moved to [machine]: see CHANGELOG.md"),
        "{err}"
    );
    assert!(err.contains("(line 2)"), "{err}");
    let c = IssuerConfig::from_toml_str(
        "[machine]\nstart_guard_max_wait_ms = 3000\nstate_file_interval_ms = 250\n",
    )
    .unwrap();
    assert_eq!(c.start_guard_max_wait(), Duration::from_millis(3000));
    assert_eq!(c.state_file_interval().unwrap(), Duration::from_millis(250));
    // Other unknown keys get no hint.
    let err = IssuerConfig::from_toml_str("[zookeeper]\nreport_interval = 1\n")
        .unwrap_err()
        .to_string();
    assert!(!err.contains("moved"), "{err}");
}

/// A wait set past its bound is refused by name, at load and at start alike.
#[test]
fn every_wait_has_an_upper_bound() {
    for (key, text) in [
        (
            "machine.start_guard_max_wait_ms",
            "[machine]\nstart_guard_max_wait_ms = 600001",
        ),
        (
            "machine.state_file_interval_ms",
            "[machine]\nstate_file_interval_ms = 60001",
        ),
        ("clock.sync_wait_ms", "[clock]\nsync_wait_ms = 3600001"),
        (
            "zookeeper.session_timeout_ms",
            "[zookeeper]\nsession_timeout_ms = 600001",
        ),
        (
            "etcd.timeout_ms",
            "[etcd]\ntimeout_ms = 18446744073709551615",
        ),
    ] {
        let err = IssuerConfig::from_toml_str(text).unwrap_err().to_string();
        assert!(err.contains(key) && err.contains("out of range"), "{err}");
    }
    let mut c = IssuerConfig::default();
    c.machine.start_guard_max_wait_ms = u64::MAX;
    let err = crate::Issuer::start_with_clock(c, vesta_core::ManualClock::new(1_700_000_000_000))
        .unwrap_err()
        .to_string();
    assert!(err.contains("allowed 0..=600000"), "{err}");
    // The largest allowed loads.
    IssuerConfig::from_toml_str("[machine]\nstart_guard_max_wait_ms = 600000").unwrap();
}

#[test]
fn a_state_file_interval_below_10_ms_is_refused_by_name() {
    let mut c = IssuerConfig::default();
    c.machine.state_file_interval_ms = 9;
    let err = c.state_file_interval().unwrap_err().to_string();
    assert!(
        err.contains("machine.state_file_interval_ms 9 is too small: at least 10"),
        "{err}"
    );
}

#[test]
fn static_machine_defaults_to_the_pools_first_id() {
    let mut c = IssuerConfig::default();
    assert_eq!(c.static_machine().unwrap(), 0);
    c.gen_method = GenMethod::Server;
    assert_eq!(c.static_machine().unwrap(), 924);
}

#[test]
fn a_preset_layout_takes_its_own_epoch_unless_one_is_set() {
    let c = IssuerConfig::from_toml_str("[id]\nlayout = \"leaf\"\n").unwrap();
    let leaf = c.layout().unwrap();
    assert_eq!(leaf.name(), "leaf");
    assert_eq!(leaf.epoch().unix_ms(), 1_288_834_974_657);
    // A 10-bit worker, all of it in every mode (the pools are Vesta's); a server's default ID
    // still sits apart from an embedded issuer's 0.
    let pools = c.pools().unwrap();
    assert_eq!((pools.embed(), pools.server()), (0..=1023, 0..=1023));
    let mut server = c.clone();
    server.gen_method = GenMethod::Rest;
    assert_eq!(server.static_machine().unwrap(), 924);
    let worker = IssuerConfig::from_toml_str("[id]\nlayout = \"leaf\"\n[machine]\nid = 1023\n");
    assert_eq!(worker.unwrap().static_machine().unwrap(), 1023);
    // A split, when configured, holds for every layout.
    let split = "[id]\nlayout = \"leaf\"\n[machine]\nid = 1023\nserver_pool_start = 1000\n";
    let err = IssuerConfig::from_toml_str(split).unwrap_err().to_string();
    assert!(err.contains("outside the embed pool 0..=999"), "{err}");
    let c = IssuerConfig::from_toml_str(
        "[id]\nlayout = \"sonyflake\"\nepoch = \"2020-01-01T00:00:00Z\"\n[machine]\nid = 40000\n",
    )
    .unwrap();
    assert_eq!(c.layout().unwrap().epoch().unix_ms(), 1_577_836_800_000);
    assert_eq!(c.pools().unwrap().embed(), 0..=65535);
}

#[test]
fn vesta_only_keys_with_another_layout_are_refused_by_name() {
    let err = IssuerConfig::from_toml_str("[id]\nlayout = \"leaf\"\ntype = \"min-granularity\"\n")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid config: id.type applies to the vesta layout only, not leaf: remove it"
    );
    let err = IssuerConfig::from_toml_str("[id]\nlayout = \"twitter\"\nversion = 1\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("id.version applies to the vesta layout only"),
        "{err}"
    );
    let err = IssuerConfig::from_toml_str("[id]\nversion = 2\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("id.version 2 is out of range: allowed 0..=1"),
        "{err}"
    );
    let err = IssuerConfig::from_toml_str("[id]\nlayout = \"snowflake\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("layout `snowflake` is not valid"), "{err}");
    assert!(err.contains("leaf, twitter"), "{err}");
    let err = IssuerConfig::from_toml_str("[id]\nlayout = \"custom\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("described as a table: [id.layout]"), "{err}");
}

#[test]
fn a_custom_layout_is_described_under_id_layout() {
    let toml = r#"
[id.layout]
name = "orders"
unit_ms = 1
epoch = "2020-01-01T00:00:00Z"
fields = [
  { kind = "time", bits = 41 },
  { kind = "node", parts = [{ name = "idc", bits = 6 }, { name = "business", bits = 6 }] },
  { kind = "seq", bits = 10 },
]

[machine]
id = 3000
"#;
    let c = IssuerConfig::from_toml_str(toml).unwrap();
    let layout = c.layout().unwrap();
    assert_eq!(layout.name(), "orders");
    assert_eq!(layout.describe_bits(), "time 22-62, node 10-21, seq 0-9");
    assert_eq!(c.pools().unwrap().server(), 0..=4095);
    let bad = toml.replace("bits = 41", "bits = 42");
    let err = IssuerConfig::from_toml_str(&bad).unwrap_err();
    // Said once: the message is not repeated as the error's source (printed by the
    // `vesta` binary after it).
    assert!(std::error::Error::source(&err).is_none(), "{err:?}");
    assert_eq!(
        err.to_string(),
        "invalid config: id.layout: the fields take 64 bits: allowed at most 63 (signed = \
             true keeps the top bit 0 for SQL BIGINT and Java long)"
    );
    let bad = toml.replace("kind = \"seq\"", "kind = \"sequence\"");
    let err = IssuerConfig::from_toml_str(&bad).unwrap_err().to_string();
    assert!(err.contains("kind `sequence` is not valid"), "{err}");
    let bad = toml.replace("id = 3000", "id = 4096");
    let err = IssuerConfig::from_toml_str(&bad).unwrap_err().to_string();
    assert!(
        err.contains("machine 4096 is outside the node field 0..=4095"),
        "{err}"
    );
}

/// A command line's registry without `--machine` over a config that fixes `machine.id`: a
/// lease would silently drop the config's ID, so it is refused naming both; with the ID given
/// again it registers it; with no fixed ID it leases.
#[test]
fn a_lease_flag_over_a_fixed_config_id_is_refused_naming_both() {
    use super::{ChoiceConflict, Registry};
    let mut c = IssuerConfig::from_toml_str("[machine]\nid = 388\n").unwrap();
    let err = c
        .clone()
        .choose_machine(None, Some((Registry::Sql, "sqlite://m.db")))
        .unwrap_err();
    assert_eq!(
        err,
        ChoiceConflict::FixedIdWithLease {
            machine: 388,
            registry: Registry::Sql
        }
    );
    assert_eq!(
        err.to_string(),
        "the config's machine.id 388 is set, and machine.db is given without a machine ID, \
         which leases one from the pool instead: register 388 there, or remove machine.id"
    );
    c.choose_machine(Some(388), Some((Registry::Sql, "sqlite://m.db")))
        .unwrap();
    assert_eq!(
        (c.machine.id, c.machine.db.as_deref()),
        (Some(388), Some("sqlite://m.db"))
    );
    let mut leased = IssuerConfig::default();
    leased
        .choose_machine(None, Some((Registry::Etcd, "http://127.0.0.1:2379")))
        .unwrap();
    assert_eq!(leased.machine.source, MachineSource::Etcd);
}

#[test]
fn layout_sections_are_read_from_any_vesta_config() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rest.toml");
    let server = "[server]\nlisten = \"127.0.0.1:8080\"\n\n[id]\nlayout = \"leaf\"\n\n\
                  [machine]\nid = 1000\nsource = \"static\"\n\n[segment]\ndb = \"sqlite://x.db\"\n\
                  [seq]\nstep = 10\n";
    std::fs::write(&file, server).unwrap();
    // The full issuer config refuses the servers' sections.
    let err = IssuerConfig::from_toml_file(&file).unwrap_err().to_string();
    assert!(err.contains("unknown field `segment`"), "{err}");
    let config = IssuerConfig::layout_sections_from_toml_file(&file).unwrap();
    assert_eq!(config.layout().unwrap().name(), "leaf");
    assert_eq!(config.machine.id, Some(1000));
    // Inside the sections it reads, an unknown key is still refused, naming it.
    std::fs::write(&file, "[server]\nx = 1\n[id]\nlayuot = \"leaf\"\n").unwrap();
    let err = IssuerConfig::layout_sections_from_toml_file(&file)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `layuot`"), "{err}");
    std::fs::write(&file, "[machine]\nsever_pool_start = 3\n").unwrap();
    let err = IssuerConfig::layout_sections_from_toml_file(&file)
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `sever_pool_start`"), "{err}");
}

/// The plan says how the machine ID is chosen, what keeps it and whether it is held on this
/// host, in one value that every registry's settings, the start and the console read.
#[test]
fn the_plan_decides_fixed_or_leased_its_keeper_and_the_host_hold_once() {
    let mut c = IssuerConfig::default();
    let plan = c.plan().unwrap();
    assert_eq!(
        plan.choice,
        MachineChoice::Fixed {
            machine: 0,
            from: FixedFrom::PoolDefault
        }
    );
    assert_eq!((plan.pool_name, plan.pool.clone()), ("embed", 0..=923));
    assert_eq!(
        (plan.keeper.clone(), plan.host_hold),
        (Keeper::Nothing, false)
    );
    assert_eq!(
        plan.to_string(),
        "static (none chosen: the pool's first), not registered anywhere"
    );

    c.machine.id = Some(7);
    c.hold_on_host = true;
    let plan = c.plan().unwrap();
    assert_eq!((plan.fixed(), plan.host_hold), (Some(7), true));
    assert_eq!(
        plan.to_string(),
        "static, not registered anywhere, held on this host"
    );
    // A state file is always held on the host, whatever the program asks.
    c.hold_on_host = false;
    c.machine.state_file = Some("/var/lib/vesta/m7.state".into());
    let plan = c.plan().unwrap();
    assert_eq!(
        (plan.keeper.clone(), plan.host_hold),
        (Keeper::StateFile("/var/lib/vesta/m7.state".into()), true)
    );
    assert_eq!(
        plan.to_string(),
        "static, not registered anywhere, its mark in the state file /var/lib/vesta/m7.state, \
         held on this host"
    );

    // Registered in ZooKeeper: the registry refuses a second holder; no host hold.
    c.machine.state_file = None;
    c.hold_on_host = true;
    c.zookeeper.connect = "127.0.0.1:2181".into();
    let plan = c.plan().unwrap();
    let Keeper::ZooKeeper(zk) = &plan.keeper else {
        panic!("{plan:?}")
    };
    assert_eq!((zk.fixed, zk.pool.clone()), (Some(7), 0..=923));
    assert_eq!(
        (plan.registry(), plan.host_hold),
        (Some(Registry::ZooKeeper), false)
    );
    assert_eq!(
        plan.to_string(),
        "static, registered in ZooKeeper 127.0.0.1:2181 under /vesta/default"
    );
    assert_eq!(
        crate::lease::ZkSettings::from_config(&c).unwrap(),
        **zk,
        "a registry's settings are the plan's"
    );

    // Leased from etcd, by a server: its pool; the settings say so, not machine.source again.
    let mut e = IssuerConfig {
        gen_method: vesta_core::GenMethod::Server,
        ..IssuerConfig::default()
    };
    e.machine.source = MachineSource::Etcd;
    e.etcd.endpoints = vec!["http://127.0.0.1:2379".into()];
    let plan = e.plan().unwrap();
    assert_eq!(plan.choice, MachineChoice::Leased);
    assert_eq!((plan.first_machine(), plan.host_hold), (924, false));
    let Keeper::Etcd(etcd) = &plan.keeper else {
        panic!("{plan:?}")
    };
    assert_eq!(
        (etcd.fixed, etcd.pool_name, etcd.pool.clone()),
        (None, "server", 924..=1023)
    );
    assert_eq!(
        plan.to_string(),
        "leased from etcd http://127.0.0.1:2379 under /vesta/default"
    );
    // A static machine.id with a leasing source: refused once, by the plan, for every source
    // (and for the settings built from it).
    e.machine.id = Some(930);
    let err = crate::lease::EtcdSettings::from_config(&e)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "invalid config: machine.id 930 is set but machine.source is etcd, which leases a \
         machine ID from the pool: remove machine.id, or use source = \"static\""
    );

    // Registered in an SQL table: its URL is not shown, its scope is.
    let mut q = IssuerConfig::default();
    q.machine.id = Some(5);
    q.machine.db = Some("sqlite:///tmp/m.db".into());
    let plan = q.plan().unwrap();
    assert_eq!(plan.registry(), Some(Registry::Sql));
    assert_eq!(
        plan.to_string(),
        "static, registered in the SQL table vesta_machine, scope \"default\""
    );
    assert_eq!(q.sql_lease().unwrap().fixed, Some(5));
    assert_eq!(MachineSource::Sql.registry(), Some(Registry::Sql));
    assert_eq!(MachineSource::Ordinal.registry(), None);
}
