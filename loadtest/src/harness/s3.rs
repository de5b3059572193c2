//! A real S3-compatible server on loopback for storage tests: moto in server mode, from the shared venv
//! that `scripts/lib.sh ensure_venv` builds from `scripts/checks/requirements.txt` (built here once when
//! missing). Never an in-memory stand-in. Killed on drop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};

/// The bucket every server starts with.
pub const BUCKET: &str = "wagate-media";
/// Credentials the server accepts while it does not check them (`refuse_credentials(false)`).
pub const ACCESS_KEY_ID: &str = "wagate-test";
pub const SECRET_ACCESS_KEY: &str = "wagate-test-secret";

pub struct S3Server {
    child: Child,
    pub port: u16,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);

/// `moto_server` of the shared venv, building the venv once per process when it is missing or stale.
fn moto_server() -> anyhow::Result<PathBuf> {
    let mut venv = VENV.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dir) = venv.as_ref() {
        return Ok(dir.join("bin/moto_server"));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg("-c")
        .arg(". scripts/lib.sh && ensure_venv && printf %s \"$VENV\"")
        .current_dir(&root)
        .output()
        .context("running scripts/lib.sh ensure_venv")?;
    if !out.status.success() {
        bail!(
            "ensure_venv failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let bin = dir.join("bin/moto_server");
    if !bin.exists() {
        bail!(
            "{} missing: moto[server] belongs in scripts/checks/requirements.txt",
            bin.display()
        );
    }
    *venv = Some(dir);
    Ok(bin)
}

impl S3Server {
    /// Starts moto on a free loopback port and creates `BUCKET`.
    pub async fn start() -> anyhow::Result<S3Server> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let bin = moto_server()?;
        let port = super::free_port();
        let child = Command::new(bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting moto_server")?;
        let server = S3Server { child, port };
        let http = reqwest::Client::new();
        let bucket = format!("{}/{BUCKET}", server.endpoint());
        for _ in 0..300 {
            if let Ok(resp) = http.put(&bucket).send().await
                && resp.status().is_success()
            {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("moto_server did not come up on port {port}")
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The variables a node needs to keep its media here.
    pub fn node_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("STORAGE_TYPE", "s3".into()),
            ("S3_BUCKET", BUCKET.into()),
            ("S3_REGION", "us-east-1".into()),
            ("S3_ENDPOINT", self.endpoint()),
            ("S3_FORCE_PATH_STYLE", "true".into()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY.into()),
        ]
    }

    /// With `true` the server checks signatures against its (empty) IAM, so every credential is
    /// refused; `false` goes back to accepting any.
    pub async fn refuse_credentials(&self, refuse: bool) -> anyhow::Result<()> {
        let resp = reqwest::Client::new()
            .post(format!("{}/moto-api/reset-auth", self.endpoint()))
            .body(if refuse { "0" } else { "inf" })
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("moto reset-auth answered {}", resp.status());
        }
        Ok(())
    }

    /// Every object key in the bucket (to check what a node wrote).
    pub async fn keys(&self) -> anyhow::Result<Vec<String>> {
        let body = reqwest::Client::new()
            .get(format!("{}/{BUCKET}?list-type=2", self.endpoint()))
            .send()
            .await?
            .text()
            .await?;
        Ok(body
            .split("<Key>")
            .skip(1)
            .filter_map(|part| part.split("</Key>").next())
            .map(str::to_string)
            .collect())
    }

    /// An object's bytes, `None` when it does not exist.
    pub async fn get_object(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        let resp = reqwest::Client::new()
            .get(format!("{}/{BUCKET}/{key}", self.endpoint()))
            .send()
            .await?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !resp.status().is_success() {
            bail!("GET {key} answered {}", resp.status());
        }
        Ok(Some(resp.bytes().await?.to_vec()))
    }

    /// Removes an object behind the node's back (a missing-object check).
    pub async fn delete_object(&self, key: &str) -> anyhow::Result<()> {
        let resp = reqwest::Client::new()
            .delete(format!("{}/{BUCKET}/{key}", self.endpoint()))
            .send()
            .await?;
        if !resp.status().is_success() {
            bail!("DELETE {key} answered {}", resp.status());
        }
        Ok(())
    }
}
