//! The client's life: build it (our auth backend, our transport factory with the endpoint and the session
//! proxy, the reqwest media client, our event handler), run it, request pairing codes, and tear it down on
//! stop, logout and kill so none of its tasks outlive the engine. The library's own reconnect loop (a
//! Fibonacci backoff up to 15 minutes) is off: our run loop (`run_loop`) makes one connection per library
//! run and schedules the next on the session's reconnect policy (`link.rs`, `attempt_ended`). Status
//! progress arrives as events (`link.rs`); `start` returns as soon as the client runs, and the supervisor's
//! start budget (504) covers a network that never answers.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::http::ReqwestHttpClient;
use crate::proxy::ProxyConfig;
use crate::store::{SqlBackend, delete_session_state, has_device};
use crate::transport::SocketTransportFactory;
use crate::whatsapp_rust::Client;
use crate::whatsapp_rust::bot::Bot;
use crate::whatsapp_rust::pair_code::PairCodeOptions;
use crate::whatsapp_rust::store::Backend;
use crate::whatsapp_rust::types::events::{Event, EventHandler};
use crate::whatsapp_rust::wacore::iq::devices::RemoveCompanionDeviceSpec;
use wagate_db::DataPool;

use super::SocketEngine;
use super::link::{LinkTracker, NextAttempt};
use super::receive::{ClientSlot, Receiver};
use wagate_engine_api::{EngineError, EngineResult, ReconnectPolicy};

/// A graceful stop (flush state, close the socket, let the run loop end) gets this long before the run
/// task is aborted.
const STOP_BUDGET: Duration = Duration::from_secs(10);
/// A kill only closes the socket so the client's tasks end; it does not wait for a flush beyond this.
const KILL_BUDGET: Duration = Duration::from_secs(3);
/// A logout waits this long for a client (the running one or one started for the unlink) to be connected
/// and logged in before it reports the unlink incomplete.
const UNLINK_CONNECT_BUDGET: Duration = Duration::from_secs(10);
/// The unlink request itself, once connected.
const UNLINK_REQUEST_BUDGET: Duration = Duration::from_secs(10);
/// A pairing-code request waits this long for the socket; the spec's "closing socket answers 409".
const PAIRING_SOCKET_WAIT: Duration = Duration::from_secs(5);

/// The running client: the run loop's task, and the switch that ends its wait between attempts.
pub(crate) struct Running {
    client: Arc<Client>,
    task: JoinHandle<()>,
    stop: watch::Sender<bool>,
}

/// The connection attempts of one client: the first inside `Bot::run` (which also starts the client's
/// handlers and workers), each later one a `Client::run` after the delay the link tracker schedules on the
/// session's policy. With the library's auto-reconnect off, every run makes one connection and returns when
/// it ends (or its connect failed).
async fn run_loop(
    bot: Bot,
    link: Arc<LinkTracker>,
    policy: ReconnectPolicy,
    mut stop: watch::Receiver<bool>,
) {
    let client = bot.client();
    link.begin_attempt(false);
    bot.run().await;
    while let Some(NextAttempt { delay, reconnect }) = link.attempt_ended(&policy) {
        if !delay.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = stop.wait_for(|stopped| *stopped) => break,
            }
        }
        if *stop.borrow() {
            break;
        }
        link.begin_attempt(reconnect);
        client.run().await;
    }
}

/// The session's auth state: rows of the data DB keyed by session id, so any node can take the session over.
async fn open_backend(pool: &DataPool, session_id: &str) -> EngineResult<Arc<dyn Backend>> {
    Ok(Arc::new(SqlBackend::new(pool.clone(), session_id)))
}

/// Removes the session's auth state (logout, or a start without stored credentials).
async fn forget_backend(pool: &DataPool, session_id: &str) -> EngineResult<()> {
    delete_session_state(pool, session_id)
        .await
        .map_err(|e| EngineError::Network(format!("socket auth state could not be removed: {e:#}")))
}

/// Forwards library events to the engine: connection events to the link tracker, data to `events.rs`.
struct Handler {
    link: Arc<LinkTracker>,
    mapper: super::events::Mapper,
}

impl EventHandler for Handler {
    fn handle_event(&self, event: Arc<Event>) {
        if !self.link.on_event(&event) {
            self.mapper.map(&event);
        }
    }
}

impl SocketEngine {
    /// The mapper for a new client, and its receive worker running until the client (which owns the
    /// mapper through its event handler) is gone.
    fn spawn_receiver(&self) -> (super::events::Mapper, super::gate::CommitGate, ClientSlot) {
        let (work, queue) = tokio::sync::mpsc::unbounded_channel();
        let slot = ClientSlot::default();
        let receiver = Receiver {
            session_id: self.session_id().to_string(),
            events: self.ctx.events.clone(),
            pool: self.pool.clone(),
            store: self.ctx.store.clone(),
            media: self.ctx.media.clone(),
            client: slot.clone(),
            own: None,
            fetch: None,
        };
        tokio::spawn(receiver.run(queue));
        let gate = super::gate::CommitGate::new(work.clone());
        let mapper = super::events::Mapper::new(
            self.session_id().to_string(),
            work,
            self.calls.clone(),
            self.presence.clone(),
        );
        (mapper, gate, slot)
    }
}

impl SocketEngine {
    pub(super) async fn start_client(&self) -> EngineResult<()> {
        let mut running = self.running.lock().await;
        if running.is_some() {
            return Err(EngineError::Busy("engine already started".into()));
        }
        let proxy = match self.ctx.proxy_url.as_deref() {
            Some(url) => {
                Some(ProxyConfig::parse(url).map_err(|e| EngineError::BadInput(e.to_string()))?)
            }
            None => None,
        };
        if self.ctx.linked.is_none() {
            // No stored link: whatever auth state is left (an unlink that did not finish) must not be reused.
            forget_backend(&self.pool, self.session_id()).await?;
        }
        let backend = open_backend(&self.pool, self.session_id()).await?;
        let transport = SocketTransportFactory::new(self.config.endpoint.clone(), proxy.clone())
            .with_observer(self.link.clone());
        let (mapper, gate, slot) = self.spawn_receiver();
        let handler = Handler {
            link: self.link.clone(),
            mapper,
        };
        let bot = Bot::builder()
            .with_backend_arc(backend)
            .with_transport_factory(transport)
            .with_http_client(ReqwestHttpClient::new(proxy.as_ref()))
            .with_event_handler(handler)
            // Received messages are acknowledged to the server only after our commit (`gate.rs`).
            .with_inbound_durability_hook(gate)
            .build()
            .await
            .map_err(|e| EngineError::Network(format!("socket client could not be built: {e}")))?;
        let client = bot.client();
        // Reconnects follow the session's policy (`run_loop`), not the library's backoff.
        client.enable_auto_reconnect.store(false, Ordering::Relaxed);
        self.link.set_client(&client);
        *slot.lock() = Arc::downgrade(&client);
        *self.client.lock() = Some(client.clone());
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run_loop(
            bot,
            self.link.clone(),
            self.ctx.reconnect,
            stopped,
        ));
        *running = Some(Running { client, task, stop });
        Ok(())
    }

    /// Disconnects gracefully (state flushed) and waits for the client's run loop to end.
    pub(super) async fn stop_client(&self) -> EngineResult<()> {
        self.teardown(STOP_BUDGET).await;
        Ok(())
    }

    pub(super) async fn kill_client(&self) -> EngineResult<()> {
        self.teardown(KILL_BUDGET).await;
        Ok(())
    }

    /// Unlinks the device on the server, then tears the client down and removes the auth state whatever
    /// happened: the spec's logout is local first, and reports an unlink that did not complete (502).
    pub(super) async fn logout_client(&self) -> EngineResult<()> {
        // From here on the client's connection events are not the session's: a connect made only to send
        // the unlink must not read as `ready` once the logout has moved the session on.
        self.link.begin_teardown();
        let unlinked = self.unlink().await;
        self.link.mark_logged_out();
        self.teardown(STOP_BUDGET).await;
        forget_backend(&self.pool, self.session_id()).await?;
        if let Err(error) = &unlinked {
            tracing::warn!(session_id = %self.session_id(), %error, "logout: the device was not unlinked");
        }
        unlinked
    }

    /// Sends the companion-device removal with a logged-in client: the running one, or (when the session's
    /// client is not running) one started from the stored credentials just for this. Both get a bounded
    /// wait for the connection, since an offline network would otherwise hold the logout forever.
    async fn unlink(&self) -> EngineResult<()> {
        let running = self.client.lock().clone();
        let linked = has_device(&self.pool, self.session_id())
            .await
            .map_err(|e| EngineError::Network(format!("{e:#}")))?;
        let client = match running {
            // A client still showing QR codes never paired: there is nothing on the server to unlink.
            Some(client) if !linked && !client.is_logged_in() => return Ok(()),
            Some(client) => client,
            None => {
                if !linked {
                    return Err(EngineError::Network(
                        "the device could not be unlinked: no stored credentials to connect with"
                            .into(),
                    ));
                }
                self.start_client().await?;
                self.client.lock().clone().ok_or(EngineError::NotReady)?
            }
        };
        // `wait_for_connected` also waits for the first sync; being logged in is all an unlink needs, so the
        // flags decide once the wait ends either way.
        let _ = client.wait_for_connected(UNLINK_CONNECT_BUDGET).await;
        if !(client.is_connected() && client.is_logged_in()) {
            return Err(EngineError::Network(format!(
                "the device could not be unlinked: WhatsApp was not reached within {} s",
                UNLINK_CONNECT_BUDGET.as_secs()
            )));
        }
        let own = client.pn().ok_or_else(|| {
            EngineError::Network(
                "the device could not be unlinked: own phone number unknown".into(),
            )
        })?;
        // Not the library's `logout()`: it logs a failed request and carries on, and the API must say
        // whether the server took the unlink.
        match tokio::time::timeout(
            UNLINK_REQUEST_BUDGET,
            client.execute(RemoveCompanionDeviceSpec::new(&own)),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(EngineError::Network(format!(
                "the device could not be unlinked: {e}"
            ))),
            Err(_) => Err(EngineError::Timeout),
        }
    }

    async fn teardown(&self, budget: Duration) {
        self.link.begin_teardown();
        let running = self.running.lock().await.take();
        let client = self.client.lock().take();
        if let Some(Running {
            client,
            mut task,
            stop,
        }) = running
        {
            // Ends a wait between attempts; a connection in progress ends with the disconnect.
            let _ = stop.send(true);
            let graceful = tokio::time::timeout(budget, async {
                client.disconnect().await;
                let _ = (&mut task).await;
            })
            .await;
            if graceful.is_err() {
                tracing::warn!(session_id = %self.session_id(), "socket client did not stop in time; aborted");
                task.abort();
            }
        } else if let Some(client) = client {
            let _ = tokio::time::timeout(budget, client.disconnect()).await;
        }
        if self.link.is_logged_out()
            && let Err(error) = forget_backend(&self.pool, self.session_id()).await
        {
            tracing::warn!(session_id = %self.session_id(), %error, "auth state of a logged-out device not removed");
        }
    }

    /// An 8-character code for linking by phone number. Only while the socket is up and unlinked: a closing
    /// socket (the QR still shows for a moment) answers 409, as does a linked client.
    pub(super) async fn pairing_code(&self, phone: &str) -> EngineResult<String> {
        let client = self.client.lock().clone().ok_or(EngineError::NotReady)?;
        if client.is_logged_in() {
            return Err(EngineError::Busy("the device is already linked".into()));
        }
        if client.wait_for_socket(PAIRING_SOCKET_WAIT).await.is_err() {
            return Err(EngineError::Busy(
                "the connection is being re-established; request a code when the next QR is shown"
                    .into(),
            ));
        }
        let options = PairCodeOptions {
            phone_number: phone.to_string(),
            ..PairCodeOptions::default()
        };
        let code = client
            .pair_with_code(options)
            .await
            .map_err(|e| EngineError::Busy(format!("pairing code refused: {e}")))?;
        // The library may format it `ABCD-EFGH`; the API answers the 8 characters.
        Ok(code.chars().filter(char::is_ascii_alphanumeric).collect())
    }
}
