//! A real S3-compatible server on loopback for storage tests: moto in server mode, from the small venv
//! that `scripts/lib.sh ensure_s3_venv` builds from `scripts/checks/s3-requirements.txt` (`scripts/test.sh`
//! builds it first; built here once when missing). Never an in-memory stand-in. Killed on drop. The
//! checks that look into the bucket behind the node's back use signed requests (`object_store`), as moto
//! refuses anonymous reads of objects.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, bail};
use futures::TryStreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt};

/// The bucket every server starts with.
pub const BUCKET: &str = "wagate-media";
/// Credentials the server accepts while it does not check them (`refuse_credentials(false)`).
pub const ACCESS_KEY_ID: &str = "wagate-test";
pub const SECRET_ACCESS_KEY: &str = "wagate-test-secret";

pub struct S3Server {
    child: Child,
    pub port: u16,
    /// The data directory of an `s3s-fs` server, removed with it.
    _root: Option<tempfile::TempDir>,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

static VENV: Mutex<Option<PathBuf>> = Mutex::new(None);

/// `moto_server` of the S3 venv, building the venv once per process when it is missing or stale.
fn moto_server() -> anyhow::Result<PathBuf> {
    let mut venv = VENV.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(dir) = venv.as_ref() {
        return Ok(dir.join("bin/moto_server"));
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg("-c")
        .arg(". scripts/lib.sh && ensure_s3_venv && printf %s \"$S3_VENV\"")
        .current_dir(&root)
        .output()
        .context("running scripts/lib.sh ensure_s3_venv")?;
    if !out.status.success() {
        bail!(
            "ensure_s3_venv failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let bin = dir.join("bin/moto_server");
    if !bin.exists() {
        bail!(
            "{} missing: moto belongs in scripts/checks/s3-requirements.txt",
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
        let server = S3Server {
            child,
            port,
            _root: None,
        };
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

    /// Starts an `s3s-fs` server (crates.io `s3s-fs`, a Rust S3 server over a directory) from `bin` on a
    /// free loopback port, with `BUCKET` and the test credentials. Benchmarks only: moto is a Python
    /// server whose own throughput caps what a node can show against it. `refuse_credentials` is moto's.
    pub async fn start_s3s_fs(bin: &std::path::Path) -> anyhow::Result<S3Server> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let root = tempfile::tempdir().context("s3s-fs data directory")?;
        std::fs::create_dir(root.path().join(BUCKET)).context("s3s-fs bucket directory")?;
        let port = super::free_port();
        let child = Command::new(bin)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--access-key",
                ACCESS_KEY_ID,
                "--secret-key",
                SECRET_ACCESS_KEY,
            ])
            .arg(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let server = S3Server {
            child,
            port,
            _root: Some(root),
        };
        for _ in 0..300 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        bail!("s3s-fs did not come up on port {port}")
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

    /// A signed client of the bucket, for checks behind the node's back (and the benchmark's ceiling:
    /// the server alone, without a node).
    pub fn bucket(&self) -> anyhow::Result<impl ObjectStore> {
        AmazonS3Builder::new()
            .with_bucket_name(BUCKET)
            .with_region("us-east-1")
            .with_endpoint(self.endpoint())
            .with_allow_http(true)
            .with_virtual_hosted_style_request(false)
            .with_access_key_id(ACCESS_KEY_ID)
            .with_secret_access_key(SECRET_ACCESS_KEY)
            .build()
            .context("S3 client of the test server")
    }

    /// Every object key in the bucket (to check what a node wrote).
    pub async fn keys(&self) -> anyhow::Result<Vec<String>> {
        let listed: Vec<_> = self.bucket()?.list(None).try_collect().await?;
        Ok(listed
            .into_iter()
            .map(|meta| meta.location.to_string())
            .collect())
    }

    /// An object's bytes, `None` when it does not exist.
    pub async fn get_object(&self, key: &str) -> anyhow::Result<Option<Vec<u8>>> {
        match self.bucket()?.get(&ObjectPath::from(key)).await {
            Ok(found) => Ok(Some(found.bytes().await?.to_vec())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => bail!("GET {key}: {e}"),
        }
    }

    /// Removes an object behind the node's back (a missing-object check).
    pub async fn delete_object(&self, key: &str) -> anyhow::Result<()> {
        self.bucket()?
            .delete(&ObjectPath::from(key))
            .await
            .with_context(|| format!("DELETE {key}"))
    }
}
