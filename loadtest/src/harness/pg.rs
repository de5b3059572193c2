//! A throwaway PostgreSQL database on the loopback server, created per test and dropped afterwards.
//! The server is the one the test command starts (127.0.0.1:5432, trust auth); `WAGATE_TEST_PG_HOST`,
//! `WAGATE_TEST_PG_PORT` and `WAGATE_TEST_PG_USER` override it.

use std::process::Command;

pub struct PgDatabase {
    pub name: String,
    pub url: String,
}

fn setting(var: &str, default: &str) -> String {
    std::env::var(var).unwrap_or_else(|_| default.to_string())
}

fn psql(sql: &str) -> anyhow::Result<()> {
    let out = Command::new("psql")
        .args(["-h", &setting("WAGATE_TEST_PG_HOST", "127.0.0.1")])
        .args(["-p", &setting("WAGATE_TEST_PG_PORT", "5432")])
        .args(["-U", &setting("WAGATE_TEST_PG_USER", "postgres")])
        .args(["-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
        .output()?;
    if !out.status.success() {
        anyhow::bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(())
}

impl PgDatabase {
    pub fn create() -> anyhow::Result<PgDatabase> {
        let name = format!("wagate_t_{}", uuid::Uuid::new_v4().simple());
        psql(&format!("CREATE DATABASE {name}"))?;
        let url = format!(
            "postgres://{}@{}:{}/{name}",
            setting("WAGATE_TEST_PG_USER", "postgres"),
            setting("WAGATE_TEST_PG_HOST", "127.0.0.1"),
            setting("WAGATE_TEST_PG_PORT", "5432"),
        );
        Ok(PgDatabase { name, url })
    }
}

impl PgDatabase {
    /// Runs one query and returns its rows, unaligned, fields separated by `|` (e.g. a row's columns).
    pub fn query(&self, sql: &str) -> anyhow::Result<String> {
        let out = Command::new("psql")
            .args(["-h", &setting("WAGATE_TEST_PG_HOST", "127.0.0.1")])
            .args(["-p", &setting("WAGATE_TEST_PG_PORT", "5432")])
            .args(["-U", &setting("WAGATE_TEST_PG_USER", "postgres")])
            .args(["-d", &self.name, "-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
            .output()?;
        if !out.status.success() {
            anyhow::bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

impl Drop for PgDatabase {
    fn drop(&mut self) {
        let _ = psql(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ));
    }
}
