//! One session's browser: launch, the page (binding, injection on every navigation, the pushes it sends),
//! calls into the facade, and the watchdog that heals what goes wrong without the node:
//! - a reload answers `Reloading` (409) until the bridge is back; past three grace windows it is a
//!   `Disconnected` event;
//! - a crashed renderer answers `PageDead` (503) while a fresh page replaces it;
//! - a process tree above the memory ceiling gets a fresh page (the old renderer goes with its tab).
//!
//! Stop and kill end every process of the tree.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::Page;
use chromiumoxide::browser::Browser;
use chromiumoxide::cdp::browser_protocol::inspector::{
    EnableParams as InspectorEnable, EventTargetCrashed,
};
use chromiumoxide::cdp::browser_protocol::page::{
    EventDomContentEventFired, EventFrameNavigated, NavigateParams,
};
use chromiumoxide::cdp::browser_protocol::target::{CloseTargetParams, GetTargetsParams};
use chromiumoxide::cdp::js_protocol::runtime::{
    AddBindingParams, EvaluateParams, EventBindingCalled,
};
use chromiumoxide::error::CdpError;
use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use crate::bridge::{self, BINDING, BRIDGE_VERSION, CallAnswer, Me, PagePush};
use crate::error::BrowserError;
use crate::launch::Launcher;
use crate::procs::{self, Memory};
use crate::profile;

/// What the page reported, for the node to map onto its session events.
#[derive(Debug, Clone, PartialEq)]
pub enum BrowserEvent {
    /// A QR payload to render (each rotation).
    Qr(String),
    /// The account is linked (after a scan, or from the stored profile).
    Authenticated(Me),
    /// WhatsApp Web is usable.
    Ready,
    /// The phone (or WhatsApp) unlinked this browser; the profile is void.
    LoggedOut,
    /// The page stopped working and did not heal (reason given); the node reconnects.
    Disconnected(String),
    /// A received (or own, from another device) message, as the facade serialises it.
    Message(Value),
    /// A delivery-state change: `{ack, chat, ids}`.
    Ack(Value),
}

/// Who this session is and where its profile lives.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    pub session_id: String,
    /// The Chromium `--user-data-dir`, keyed by session id (the credential).
    pub profile_dir: PathBuf,
    pub proxy_url: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Launched, page loading or waiting for a link.
    Starting,
    Ready,
    /// A navigation replaced the page's document; the bridge is being re-installed.
    Reloading,
    /// The renderer crashed; a fresh page is being loaded.
    Dead,
    Closed,
}

struct State {
    phase: Phase,
    /// Told about every phase change, so calls in flight on a page that just crashed or navigated
    /// answer at once instead of waiting out their budget.
    changes: tokio::sync::watch::Sender<u64>,
    /// When the current phase began.
    since: Instant,
    /// The facade answered in the current document.
    installed: bool,
    authenticated_sent: bool,
    ready_sent: bool,
    launched_at: Instant,
    /// A profile existed at launch: the page gets `auth_wait` to authenticate before a QR is shown.
    had_profile: bool,
    held_qr: Option<String>,
    last_qr: Option<String>,
}

impl State {
    fn new() -> State {
        let now = Instant::now();
        State {
            phase: Phase::Closed,
            changes: tokio::sync::watch::Sender::new(0),
            since: now,
            installed: false,
            authenticated_sent: false,
            ready_sent: false,
            launched_at: now,
            had_profile: false,
            held_qr: None,
            last_qr: None,
        }
    }

    fn enter(&mut self, phase: Phase) {
        if self.phase != phase {
            self.phase = phase;
            self.since = Instant::now();
            self.changes.send_modify(|n| *n += 1);
        }
    }
}

struct Running {
    browser: Browser,
    handler: JoinHandle<()>,
    pid: Option<u32>,
    watchdog: JoinHandle<()>,
}

struct Inner {
    opts: SessionOptions,
    launcher: Launcher,
    events: UnboundedSender<BrowserEvent>,
    state: Mutex<State>,
    /// The live page and the task pumping its events.
    page: Mutex<Option<(Page, Arc<JoinHandle<()>>)>>,
    running: tokio::sync::Mutex<Option<Running>>,
    /// The browser pid, readable without the running lock (memory reads, cleanup).
    pid: Mutex<Option<u32>>,
}

/// One session's Chromium. Cheap to clone; every clone drives the same browser.
#[derive(Clone)]
pub struct BrowserSession {
    inner: Arc<Inner>,
}

impl BrowserSession {
    pub fn new(
        launcher: Launcher,
        opts: SessionOptions,
        events: UnboundedSender<BrowserEvent>,
    ) -> BrowserSession {
        BrowserSession {
            inner: Arc::new(Inner {
                opts,
                launcher,
                events,
                state: Mutex::new(State::new()),
                page: Mutex::new(None),
                running: tokio::sync::Mutex::new(None),
                pid: Mutex::new(None),
            }),
        }
    }

    pub fn profile_dir(&self) -> &std::path::Path {
        &self.inner.opts.profile_dir
    }

    /// Launches Chromium and opens WhatsApp Web. Returns once the page is loading; the link progresses
    /// through events (`Qr`, `Authenticated`, `Ready`).
    pub async fn start(&self) -> Result<(), BrowserError> {
        let inner = &self.inner;
        let mut running = inner.running.lock().await;
        if running.is_some() {
            return Ok(());
        }
        let permit = inner.launcher.permit().await?;
        let had_profile = profile::exists(&inner.opts.profile_dir);
        let launched = inner
            .launcher
            .launch(&inner.opts.profile_dir, inner.opts.proxy_url.as_deref())
            .await?;
        *inner.pid.lock() = launched.pid;
        {
            let mut st = inner.state.lock();
            let changes = st.changes.clone();
            *st = State::new();
            st.changes = changes;
            st.had_profile = had_profile;
            st.enter(Phase::Starting);
        }
        let opened = async {
            let page = open_page(inner, &launched.browser).await?;
            close_other_tabs(&launched.browser, &page).await;
            navigate(inner, &page).await
        }
        .await;
        if let Err(err) = opened {
            inner.state.lock().enter(Phase::Closed);
            teardown(
                inner,
                launched.browser,
                launched.handler,
                launched.pid,
                false,
            )
            .await;
            return Err(err);
        }
        drop(permit);
        let watchdog = tokio::spawn(watchdog(Arc::downgrade(inner)));
        *running = Some(Running {
            browser: launched.browser,
            handler: launched.handler,
            pid: launched.pid,
            watchdog,
        });
        tracing::debug!(session_id = %inner.opts.session_id, pid = ?launched.pid, "browser launched");
        Ok(())
    }

    /// Closes the browser gracefully (the profile keeps the link), then makes sure no process of the
    /// tree is left.
    pub async fn stop(&self) -> Result<(), BrowserError> {
        self.shutdown(true).await
    }

    /// Ends every process of the tree without asking the browser.
    pub async fn kill(&self) -> Result<(), BrowserError> {
        self.shutdown(false).await
    }

    async fn shutdown(&self, graceful: bool) -> Result<(), BrowserError> {
        let inner = &self.inner;
        inner.state.lock().enter(Phase::Closed);
        let running = inner.running.lock().await.take();
        if let Some((_, pump)) = inner.page.lock().take() {
            pump.abort();
        }
        if let Some(run) = running {
            run.watchdog.abort();
            teardown(inner, run.browser, run.handler, run.pid, graceful).await;
        } else {
            // Nothing launched through us, but a crashed earlier run may have left processes behind.
            procs::kill_all(&procs::with_marker(&profile_marker(inner)));
        }
        *inner.pid.lock() = None;
        Ok(())
    }

    /// Unlinks the account in WhatsApp Web, then stops.
    pub async fn logout(&self) -> Result<(), BrowserError> {
        let unlinked = self.call("logout", &[]).await;
        self.stop().await?;
        unlinked.map(|_| ())
    }

    /// Calls facade function `name`. Typed refusals: `NotReady` before the link, `Reloading` while the
    /// bridge is re-installed, `PageDead` while a crashed page is replaced, `Timeout` past the budget.
    pub async fn call(&self, name: &str, args: &[Value]) -> Result<Value, BrowserError> {
        let budget = self.inner.launcher.config.call_budget;
        self.call_within(name, args, budget).await
    }

    /// `call` without the engine's call budget, for the operations the spec leaves unbounded (group and
    /// channel create, media sends, status posts, call links): only the DevTools protocol timeout
    /// (`BROWSER_PROTOCOL_TIMEOUT_MS`) bounds them, so a slow upload is not cut at 30 seconds.
    pub async fn call_unbounded(&self, name: &str, args: &[Value]) -> Result<Value, BrowserError> {
        let budget = self.inner.launcher.config.protocol_timeout;
        self.call_within(name, args, budget).await
    }

    async fn call_within(
        &self,
        name: &str,
        args: &[Value],
        budget: Duration,
    ) -> Result<Value, BrowserError> {
        let inner = &self.inner;
        let allowed_before_ready = matches!(name, "pairingCode" | "state");
        let mut changes = {
            let st = inner.state.lock();
            match st.phase {
                Phase::Ready => {}
                Phase::Starting if allowed_before_ready => {}
                Phase::Reloading => return Err(BrowserError::Reloading),
                Phase::Dead => return Err(BrowserError::PageDead),
                Phase::Starting | Phase::Closed => return Err(BrowserError::NotReady),
            }
            st.changes.subscribe()
        };
        let page = inner
            .page
            .lock()
            .as_ref()
            .map(|(p, _)| p.clone())
            .ok_or(BrowserError::NotReady)?;
        let params = EvaluateParams::builder()
            .expression(bridge::call_expression(name, args))
            .await_promise(true)
            .return_by_value(true)
            .build()
            .map_err(BrowserError::Protocol)?;
        let phase_now = || inner.state.lock().phase;
        let answer = tokio::select! {
            answer = tokio::time::timeout(budget, page.execute(params)) => answer,
            _ = changes.changed() => {
                // The page this call went to crashed, navigated or was closed: it will not answer.
                return Err(match phase_now() {
                    Phase::Reloading => BrowserError::Reloading,
                    Phase::Closed => BrowserError::NotReady,
                    _ => BrowserError::PageDead,
                });
            }
        };
        let resp = match answer {
            Err(_) if phase_now() == Phase::Dead => return Err(BrowserError::PageDead),
            Err(_) => return Err(BrowserError::Timeout),
            Ok(Err(err)) => {
                return Err(match phase_now() {
                    Phase::Dead => BrowserError::PageDead,
                    Phase::Reloading => BrowserError::Reloading,
                    _ if is_navigation_error(&err) => BrowserError::Reloading,
                    _ => BrowserError::Protocol(err.to_string()),
                });
            }
            Ok(Ok(resp)) => resp.result,
        };
        if let Some(ex) = resp.exception_details {
            // `__wagate` missing: a new document the bridge has not reached yet.
            return Err(
                if ex.text.contains("__wagate") || phase_now() == Phase::Reloading {
                    BrowserError::Reloading
                } else {
                    BrowserError::Page {
                        code: "failed".into(),
                        message: ex.text,
                    }
                },
            );
        }
        let value = resp.result.value.unwrap_or(Value::Null);
        let answer: CallAnswer = serde_json::from_value(value)
            .map_err(|e| BrowserError::Protocol(format!("bridge answer: {e}")))?;
        if answer.ok {
            return Ok(answer.value);
        }
        let code = answer.code.unwrap_or_else(|| "failed".into());
        if code == "reloading" {
            return Err(BrowserError::Reloading);
        }
        Err(BrowserError::Page {
            code,
            message: answer.message.unwrap_or_default(),
        })
    }

    /// Memory of this session's process tree (zero when not running).
    pub fn memory(&self) -> Memory {
        let pid = *self.inner.pid.lock();
        if pid.is_none() {
            return Memory::default();
        }
        procs::memory(&procs::session_processes(pid, &profile_marker(&self.inner)))
    }

    /// Live processes of this session (the browser's tree and anything naming its profile).
    pub fn processes(&self) -> Vec<u32> {
        procs::session_processes(*self.inner.pid.lock(), &profile_marker(&self.inner))
    }

    /// Whether the page is linked and answering calls.
    pub fn is_ready(&self) -> bool {
        self.inner.state.lock().phase == Phase::Ready
    }

    /// Replaces the page with a fresh one (what the memory ceiling does), answering 409 until healed.
    pub async fn recycle_page(&self) -> Result<(), BrowserError> {
        recycle(&self.inner, Phase::Reloading).await
    }

    /// Kills the session's renderer processes (what the kernel's OOM killer does): for tests of the
    /// recovery path.
    #[doc(hidden)]
    pub fn crash_renderer_for_test(&self) {
        let renderers: Vec<u32> = self
            .processes()
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .map(|c| c.windows(15).any(|w| w == b"--type=renderer"))
                    .unwrap_or(false)
            })
            .collect();
        procs::kill_all(&renderers);
    }
}

fn profile_marker(inner: &Inner) -> String {
    format!("--user-data-dir={}", inner.opts.profile_dir.display())
}

fn is_navigation_error(err: &CdpError) -> bool {
    let text = err.to_string();
    [
        "context was destroyed",
        "navigated or closed",
        "Cannot find context",
        "Target closed",
    ]
    .iter()
    .any(|s| text.contains(s))
}

fn emit(inner: &Inner, event: BrowserEvent) {
    // The receiver is gone only when the node dropped the session; nothing is owed then.
    let _ = inner.events.send(event);
}

/// A new tab with the binding, crash reporting and the event pump; installed as the session's page.
async fn open_page(inner: &Arc<Inner>, browser: &Browser) -> Result<Page, BrowserError> {
    let proto = |e: CdpError| BrowserError::Launch(e.to_string());
    let page = browser.new_page("about:blank").await.map_err(proto)?;
    page.execute(AddBindingParams::new(BINDING))
        .await
        .map_err(proto)?;
    page.execute(InspectorEnable::default())
        .await
        .map_err(proto)?;
    let pushes = page
        .event_listener::<EventBindingCalled>()
        .await
        .map_err(proto)?;
    let navigations = page
        .event_listener::<EventFrameNavigated>()
        .await
        .map_err(proto)?;
    let loads = page
        .event_listener::<EventDomContentEventFired>()
        .await
        .map_err(proto)?;
    let crashes = page
        .event_listener::<EventTargetCrashed>()
        .await
        .map_err(proto)?;
    let weak = Arc::downgrade(inner);
    let pump_page = page.clone();
    let pump = tokio::spawn(async move {
        let mut pushes = pushes.fuse();
        let mut navigations = navigations.fuse();
        let mut loads = loads.fuse();
        let mut crashes = crashes.fuse();
        loop {
            tokio::select! {
                Some(push) = pushes.next() => {
                    let Some(inner) = weak.upgrade() else { break };
                    if push.name == BINDING
                        && let Some(push) = bridge::decode(&push.payload)
                    {
                        on_push(&inner, push);
                    }
                }
                Some(nav) = navigations.next() => {
                    let Some(inner) = weak.upgrade() else { break };
                    if nav.frame.parent_id.is_none() {
                        on_navigated(&inner);
                    }
                }
                Some(_) = loads.next() => {
                    let Some(inner) = weak.upgrade() else { break };
                    inject(&inner, &pump_page).await;
                }
                Some(_) = crashes.next() => {
                    let Some(inner) = weak.upgrade() else { break };
                    tracing::warn!(session_id = %inner.opts.session_id, "browser page crashed");
                    let mut st = inner.state.lock();
                    if st.phase != Phase::Closed {
                        st.enter(Phase::Dead);
                    }
                }
                else => break,
            }
        }
    });
    let old = inner.page.lock().replace((page.clone(), Arc::new(pump)));
    if let Some((old, pump)) = old {
        pump.abort();
        // The crashed or bloated tab goes with its renderer; a failure means it is already gone.
        let _ = tokio::time::timeout(Duration::from_secs(5), old.close()).await;
    }
    Ok(page)
}

/// Closes the tab Chromium opens by itself: each tab holds a renderer process.
async fn close_other_tabs(browser: &Browser, ours: &Page) {
    let Ok(targets) = browser
        .execute(GetTargetsParams::default())
        .await
        .map(|r| r.result.target_infos)
    else {
        return;
    };
    for target in targets {
        if target.r#type == "page" && &target.target_id != ours.target_id() {
            let _ = browser
                .execute(CloseTargetParams::new(target.target_id))
                .await;
        }
    }
}

async fn navigate(inner: &Inner, page: &Page) -> Result<(), BrowserError> {
    let url = inner.launcher.config.url.clone();
    let resp = page
        .execute(NavigateParams::new(url.clone()))
        .await
        .map_err(|e| BrowserError::Launch(format!("opening {url}: {e}")))?;
    if let Some(err) = &resp.result.error_text {
        return Err(BrowserError::Launch(format!("opening {url}: {err}")));
    }
    Ok(())
}

/// Installs wa-js and the facade in the current document (both no-ops when present).
async fn inject(inner: &Inner, page: &Page) {
    let expr = bridge::injection(&inner.launcher.bundle);
    let Ok(params) = EvaluateParams::builder().expression(expr).build() else {
        return;
    };
    match tokio::time::timeout(inner.launcher.config.call_budget, page.execute(params)).await {
        Ok(Ok(resp)) => {
            if let Some(ex) = resp.result.exception_details {
                tracing::warn!(session_id = %inner.opts.session_id, error = %ex.text, "bridge injection threw");
            }
        }
        // A navigation raced the injection: the next load (or the watchdog) injects again.
        Ok(Err(err)) => {
            tracing::debug!(session_id = %inner.opts.session_id, error = %err, "bridge injection")
        }
        Err(_) => {
            tracing::debug!(session_id = %inner.opts.session_id, "bridge injection timed out")
        }
    }
}

fn on_navigated(inner: &Inner) {
    let mut st = inner.state.lock();
    st.installed = false;
    if st.phase == Phase::Ready {
        st.enter(Phase::Reloading);
    }
}

fn on_push(inner: &Inner, push: PagePush) {
    match push {
        PagePush::Installed => inner.state.lock().installed = true,
        PagePush::Bridge(state) => {
            inner.state.lock().installed = true;
            if state.version != BRIDGE_VERSION {
                tracing::error!(session_id = %inner.opts.session_id, version = state.version, "bridge version mismatch");
                return;
            }
            if state.authenticated && state.main_ready {
                healthy(inner, state.me.unwrap_or_default());
            }
        }
        PagePush::BridgeError(message) => {
            tracing::warn!(session_id = %inner.opts.session_id, %message, "bridge not installed");
        }
        PagePush::Qr(payload) => on_qr(inner, payload),
        PagePush::Authenticated(me) => authenticated(inner, me),
        PagePush::Ready(me) => healthy(inner, me),
        PagePush::LoggedOut => {
            inner.state.lock().enter(Phase::Closed);
            emit(inner, BrowserEvent::LoggedOut);
        }
        PagePush::Message(m) => emit(inner, BrowserEvent::Message(m)),
        PagePush::Ack(a) => emit(inner, BrowserEvent::Ack(a)),
        PagePush::Unknown(kind) => tracing::debug!(%kind, "unknown bridge push"),
    }
}

fn on_qr(inner: &Inner, payload: String) {
    let mut st = inner.state.lock();
    if st.phase != Phase::Starting || st.last_qr.as_deref() == Some(payload.as_str()) {
        return;
    }
    if st.had_profile && st.launched_at.elapsed() < inner.launcher.config.auth_wait {
        // A stored profile may still authenticate: the QR waits until the authentication wait is over.
        st.held_qr = Some(payload);
        return;
    }
    st.last_qr = Some(payload.clone());
    drop(st);
    emit(inner, BrowserEvent::Qr(payload));
}

fn authenticated(inner: &Inner, me: Me) {
    let mut st = inner.state.lock();
    if st.authenticated_sent {
        return;
    }
    st.authenticated_sent = true;
    st.held_qr = None;
    drop(st);
    emit(inner, BrowserEvent::Authenticated(me));
}

/// The bridge reports a linked, loaded WhatsApp Web: first time `Ready`; after a reload or a crash the
/// session simply carries on (no event: the spec keeps `ready` unchanged).
fn healthy(inner: &Inner, me: Me) {
    authenticated(inner, me);
    let mut st = inner.state.lock();
    match st.phase {
        Phase::Starting => {
            st.enter(Phase::Ready);
            if !st.ready_sent {
                st.ready_sent = true;
                drop(st);
                emit(inner, BrowserEvent::Ready);
            }
        }
        Phase::Reloading | Phase::Dead => st.enter(Phase::Ready),
        Phase::Ready | Phase::Closed => {}
    }
}

/// Opens a fresh tab in place of the current one. `phase` is what calls answer until it heals.
async fn recycle(inner: &Arc<Inner>, phase: Phase) -> Result<(), BrowserError> {
    {
        let mut st = inner.state.lock();
        if st.phase == Phase::Closed {
            return Err(BrowserError::NotReady);
        }
        if st.phase != Phase::Dead {
            st.enter(phase);
        }
        st.installed = false;
    }
    let running = inner.running.lock().await;
    let Some(run) = running.as_ref() else {
        return Err(BrowserError::NotReady);
    };
    let page = open_page(inner, &run.browser).await?;
    drop(running);
    navigate(inner, &page).await
}

/// Re-injects reloading pages, flushes a held QR, recovers crashed pages, enforces the memory ceiling,
/// and declares a page that does not heal within three grace windows disconnected.
async fn watchdog(weak: std::sync::Weak<Inner>) {
    let interval = match weak.upgrade() {
        Some(inner) => inner.launcher.config.watch_interval,
        None => return,
    };
    let mut recovery: Option<JoinHandle<()>> = None;
    let mut last_memory_check = Instant::now();
    loop {
        tokio::time::sleep(interval).await;
        let Some(inner) = weak.upgrade() else { return };
        let cfg = inner.launcher.config.clone();
        let (phase, elapsed, installed, held) = {
            let mut st = inner.state.lock();
            let held = (st.phase == Phase::Starting && st.launched_at.elapsed() >= cfg.auth_wait)
                .then(|| st.held_qr.take())
                .flatten();
            (st.phase, st.since.elapsed(), st.installed, held)
        };
        if let Some(qr) = held {
            inner.state.lock().had_profile = false;
            on_qr(&inner, qr);
        }
        match phase {
            Phase::Closed => return,
            Phase::Reloading | Phase::Dead if elapsed >= cfg.reinject_grace * 3 => {
                inner.state.lock().enter(Phase::Closed);
                let reason = if phase == Phase::Dead {
                    "browser page crashed and did not recover within three grace windows"
                } else {
                    "page re-injection did not heal within three grace windows"
                };
                tracing::warn!(session_id = %inner.opts.session_id, reason, "browser page given up");
                emit(&inner, BrowserEvent::Disconnected(reason.to_string()));
                return;
            }
            Phase::Dead if recovery.as_ref().is_none_or(|t| t.is_finished()) => {
                // In its own task: a recovery that hangs must not stop the grace-window count.
                let inner = inner.clone();
                let budget = cfg.call_budget;
                recovery = Some(tokio::spawn(async move {
                    match tokio::time::timeout(budget, recycle(&inner, Phase::Dead)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => {
                            tracing::warn!(session_id = %inner.opts.session_id, error = %err, "page recovery failed")
                        }
                        Err(_) => {
                            tracing::warn!(session_id = %inner.opts.session_id, "page recovery timed out")
                        }
                    }
                }));
            }
            Phase::Starting | Phase::Reloading | Phase::Dead if !installed => {
                let page = inner.page.lock().as_ref().map(|(p, _)| p.clone());
                if let Some(page) = page {
                    inject(&inner, &page).await;
                }
            }
            Phase::Ready => {
                let every = cfg
                    .watch_interval
                    .max(Duration::from_secs(15))
                    .min(cfg.watch_interval * 50);
                if cfg.max_rss_mb > 0 && last_memory_check.elapsed() >= every {
                    last_memory_check = Instant::now();
                    let mem = BrowserSession {
                        inner: inner.clone(),
                    }
                    .memory();
                    if mem.pss_bytes > cfg.max_rss_mb * 1024 * 1024 {
                        tracing::warn!(session_id = %inner.opts.session_id, pss_mb = mem.pss_bytes >> 20, "browser over its memory ceiling: recycling the page");
                        if let Err(err) = recycle(&inner, Phase::Reloading).await {
                            tracing::warn!(session_id = %inner.opts.session_id, error = %err, "page recycle failed");
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// Closes (or kills) the browser, then kills whatever of its tree is left and reaps the browser.
async fn teardown(
    inner: &Inner,
    mut browser: Browser,
    handler: JoinHandle<()>,
    pid: Option<u32>,
    graceful: bool,
) {
    let marker = profile_marker(inner);
    // Collected first: once the browser is gone its children re-parent and the tree is lost.
    let mut pids = procs::session_processes(pid, &marker);
    if graceful {
        let closed = tokio::time::timeout(Duration::from_secs(5), browser.close()).await;
        if matches!(closed, Ok(Ok(_))) {
            let _ = tokio::time::timeout(Duration::from_secs(5), browser.wait()).await;
        }
    }
    pids.extend(procs::session_processes(pid, &marker));
    procs::kill_all(&pids);
    // Reaps the browser process (ours); the helpers were re-parented and are reaped by init.
    let _ = tokio::time::timeout(Duration::from_secs(5), browser.kill()).await;
    let _ = tokio::time::timeout(Duration::from_secs(5), browser.wait()).await;
    handler.abort();
    // SIGKILL is delivered asynchronously: wait until the kernel has ended them all, sweeping once more
    // for helpers started late (crash handlers show up by profile path only).
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        pids.retain(|p| procs::is_alive(*p));
        pids.extend(procs::with_marker(&marker));
        pids.sort_unstable();
        pids.dedup();
        if pids.is_empty() || Instant::now() > deadline {
            break;
        }
        procs::kill_all(&pids);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !pids.is_empty() {
        tracing::warn!(session_id = %inner.opts.session_id, ?pids, "browser processes survived SIGKILL");
    }
}
