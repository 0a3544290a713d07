//! The lease stores behind `vesta machine ls` and `vesta machine retire MACHINE`: an SQL
//! database's `vesta_machine` table, an etcd root, a ZooKeeper root (feature `leases`).

use std::io::{self, BufWriter, Write};

use anyhow::Context;
use vesta_core::Epoch;
use vesta_embed::lease::{EtcdClient, EtcdSettings, MachineRow, SqlLease, SqlSettings};
use vesta_embed::{IssuerConfig, MachineSource};

use super::machine::{LsArgs, StoreArgs};

/// A lease store resolved from [`StoreArgs`]: its checked settings (and, for ZooKeeper, the
/// config `vesta zk ls` reads).
enum Store {
    Sql(SqlSettings),
    Etcd(EtcdSettings),
    Zk(Box<IssuerConfig>),
}

impl StoreArgs {
    /// The store named by the flags (SQL unless `--etcd` or `--zk`), over the config file's
    /// sections or the defaults; `--root` and `--scope` must go with their stores.
    fn resolve(self) -> anyhow::Result<Store> {
        let other = self.etcd.is_some() || self.zk.is_some();
        if self.root.is_some() && !other {
            anyhow::bail!("--root applies to --etcd or --zk leases (SQL leases have --scope)");
        }
        if self.scope.is_some() && other {
            anyhow::bail!(
                "--scope applies to SQL leases (--machine-db); etcd and ZooKeeper have --root"
            );
        }
        let mut config = match &self.config {
            Some(path) => IssuerConfig::from_toml_file(path).context("--config")?,
            None => IssuerConfig::default(),
        };
        // The store alone is wanted, whatever this config's own machine ID is.
        config.machine.id = None;
        config.machine.ordinal_offset = 0;
        config.machine.state_file = None;
        if let Some(endpoints) = &self.etcd {
            config.machine.source = MachineSource::Etcd;
            config.etcd.endpoints = endpoints.split(',').map(|e| e.trim().to_owned()).collect();
            if let Some(root) = self.root {
                config.etcd.root = root;
            }
            return Ok(Store::Etcd(EtcdSettings::from_config(&config)?));
        }
        if let Some(connect) = self.zk {
            config.zookeeper.connect = connect;
            if let Some(root) = self.root {
                config.zookeeper.root = root;
            }
            return Ok(Store::Zk(Box::new(config)));
        }
        config.machine.source = MachineSource::Sql;
        if let Some(db) = self.machine_db {
            config.machine.db = Some(db);
        }
        if let Some(scope) = self.scope {
            config.machine.scope = scope;
        }
        Ok(Store::Sql(config.sql_lease()?))
    }
}

/// A small runtime for a command's calls to a store.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// `vesta machine retire MACHINE`: the mark a lease store keeps for `machine` retired.
pub fn retire(machine: Option<u64>, store: StoreArgs, after: &str) -> anyhow::Result<()> {
    let machine = machine.context("the machine ID to retire")?;
    let (retired, place) = match store.resolve()? {
        Store::Etcd(settings) => {
            let place = format!("etcd {} {}", settings.shown, settings.root);
            let client = EtcdClient::new(settings);
            let retired = runtime()?.block_on(client.retire(machine));
            (retired.map_err(anyhow::Error::msg)?, place)
        }
        Store::Zk(mut config) => {
            config.machine.source = MachineSource::Zookeeper;
            let settings = vesta_embed::lease::ZkSettings::from_config(&config)?;
            let place = format!("ZooKeeper {} {}", settings.connect, settings.root);
            (vesta_embed::lease::retire_zk(&settings, machine)?, place)
        }
        Store::Sql(settings) => {
            let place = format!("{} scope {}", settings.db, settings.scope);
            let retired = runtime()?.block_on(async {
                let db = SqlLease::connect(&settings).await?;
                let retired = db.retire(machine).await;
                db.close().await;
                retired
            });
            (retired.map_err(anyhow::Error::msg)?, place)
        }
    };
    if retired {
        println!("retired the mark of machine {machine} in {place}; {after}");
    } else {
        println!("no mark of machine {machine} in {place}: nothing to retire");
    }
    Ok(())
}

/// `vesta machine ls`.
pub fn list(args: LsArgs) -> anyhow::Result<()> {
    let json = args.json;
    match args.store.resolve()? {
        Store::Etcd(settings) => list_etcd(settings, json),
        Store::Zk(config) => super::zk::list_leases(*config, None, None, None, json),
        Store::Sql(settings) => list_sql(settings, json),
    }
}

fn list_sql(settings: SqlSettings, json: bool) -> anyhow::Result<()> {
    let rows = runtime()?.block_on(async {
        let db = SqlLease::connect_existing(&settings).await?;
        let rows = db.list().await;
        db.close().await;
        rows
    });
    let rows = rows.map_err(anyhow::Error::msg)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        write_json_lines(&mut out, &rows)?;
    } else {
        let title = format!("{} scope {}", settings.db, settings.scope);
        write_table(&mut out, &title, &rows)?;
    }
    out.flush()?;
    Ok(())
}

fn list_etcd(settings: EtcdSettings, json: bool) -> anyhow::Result<()> {
    let client = EtcdClient::new(settings.clone());
    let rows = runtime()?
        .block_on(client.rows())
        .map_err(anyhow::Error::msg)?;
    let mut out = BufWriter::new(io::stdout().lock());
    if json {
        write_json_lines(&mut out, &rows)?;
    } else {
        let held = rows.iter().filter(|r| r.holder.is_some()).count();
        writeln!(
            out,
            "etcd {} {}: {} machine IDs, {held} held",
            settings.shown,
            settings.root,
            rows.len()
        )?;
        if !rows.is_empty() {
            writeln!(out, "{:>7}  {:<40}  MARK", "MACHINE", "HOLDER")?;
        }
        for r in &rows {
            let mark = r.mark_ms.map_or_else(|| "-".into(), Epoch::rfc3339);
            writeln!(
                out,
                "{:>7}  {:<40}  {mark}",
                r.machine,
                r.holder.as_deref().unwrap_or("-")
            )?;
        }
    }
    out.flush()?;
    Ok(())
}

/// One JSON object per row, a line each (`--json`).
fn write_json_lines<T: serde::Serialize>(out: &mut impl Write, rows: &[T]) -> anyhow::Result<()> {
    for row in rows {
        serde_json::to_writer(&mut *out, row)?;
        writeln!(out)?;
    }
    Ok(())
}

fn write_table(out: &mut impl Write, title: &str, rows: &[MachineRow]) -> io::Result<()> {
    let held = rows.iter().filter(|r| r.lease_left_ms > 0).count();
    writeln!(out, "{title}: {} machine IDs, {held} leased", rows.len())?;
    if rows.is_empty() {
        return Ok(());
    }
    let holder_w = rows
        .iter()
        .map(|r| r.holder.len().max(1))
        .max()
        .unwrap_or(0)
        .max("HOLDER".len());
    writeln!(
        out,
        "{:>7}  {:<holder_w$}  {:>10}  {:<24}  UPDATED",
        "MACHINE", "HOLDER", "LEASE_LEFT", "MARK"
    )?;
    for r in rows {
        let holder = if r.holder.is_empty() { "-" } else { &r.holder };
        let left = if r.lease_left_ms > 0 {
            format!("{} ms", r.lease_left_ms)
        } else {
            "expired".into()
        };
        let mark = if r.mark_ms > 0 {
            Epoch::rfc3339(r.mark_ms)
        } else {
            "-".into()
        };
        writeln!(
            out,
            "{:>7}  {holder:<holder_w$}  {left:>10}  {mark:<24}  {}",
            r.machine,
            Epoch::rfc3339(r.updated_ms)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_who_holds_what() {
        let rows = vec![
            MachineRow {
                machine: 0,
                holder: "h1:42:1700000000000".into(),
                lease_left_ms: 9_000,
                mark_ms: 1_764_000_000_000,
                updated_ms: 1_764_000_000_000,
            },
            MachineRow {
                machine: 1,
                holder: String::new(),
                lease_left_ms: 0,
                mark_ms: 0,
                updated_ms: 1_764_000_000_000,
            },
        ];
        let mut out = Vec::new();
        write_table(&mut out, "sqlite://m.db scope default", &rows).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "sqlite://m.db scope default: 2 machine IDs, 1 leased"
        );
        assert!(lines[2].contains("h1:42:1700000000000") && lines[2].contains("9000 ms"));
        assert!(
            lines[3].contains("expired") && lines[3].contains(" - "),
            "{}",
            lines[3]
        );
    }
}
