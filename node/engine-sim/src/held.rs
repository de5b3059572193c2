//! Traffic the sim network keeps for a linked device until the device acknowledges it, as the real network
//! does (its delivery receipt). Every piece of traffic handed to a device gets a held id and an `Ack`
//! (`engine::ack`); the supervisor completes it after the event committed, and only then does the network
//! forget it. A refused (dropped) ack puts the traffic back: it is handed over again shortly if the device is
//! still online, else at its next connection.
//!
//! Where held traffic survives the process: embedded, in a journal file in the data directory (`Journal`,
//! `SimConfig::journal_dir`), replayed at start so a node killed mid-stream gets it again after its restart;
//! in a cluster, in Redis (`held:{session}`, `peers_redis.rs`), redelivered when the device connects on
//! whichever node. Without either (unit tests) it lives as long as the network.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::network::{Link, NetState, SimNetwork};
use super::peers::{Op, Traffic};
use wagate_engine_api::{Ack, EngineEvent};

/// How long a refused piece of traffic waits before it is handed to a still-online device again.
const REDELIVER_AFTER: Duration = Duration::from_secs(1);

/// Journal lines appended before the file is rewritten with only what is still held.
const COMPACT_AFTER_LINES: u64 = 200_000;

/// One piece of traffic held for a device, under its held id (ids sort in the order they were given out).
#[derive(Debug, Clone)]
pub struct Held {
    pub id: String,
    pub event: EngineEvent,
}

/// One line of the embedded network's journal.
#[derive(Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
enum Line {
    Hold {
        session: String,
        id: String,
        // Boxed as in `Op::Hold`: a group event's changes make the traffic much larger than a release.
        traffic: Box<Traffic>,
    },
    Release {
        session: String,
        id: String,
    },
}

/// The embedded network's held traffic on disk: an append-only file of holds and releases. A hold reaches
/// the kernel before the network goes on (flushed at once), so a process killed at any point keeps every
/// hold it made; releases wait in the buffer for the next hold (a release lost with the process only makes
/// the device get that traffic once more, which it deduplicates). A torn last line (machine crash) is
/// skipped on replay.
pub struct Journal {
    file: std::io::BufWriter<File>,
    path: PathBuf,
    lines: u64,
}

/// What a journal held when it was opened: `(session, held id, traffic)`, oldest first.
pub type Replayed = Vec<(String, String, Traffic)>;

impl Journal {
    /// Opens (or creates) `dir/sim-held.jsonl`, replays it, and rewrites it with only what is still held.
    pub fn open(dir: &Path) -> std::io::Result<(Journal, Replayed)> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join("sim-held.jsonl");
        let mut held: std::collections::BTreeMap<(String, String), Traffic> = Default::default();
        if let Ok(file) = File::open(&path) {
            for line in BufReader::new(file).lines() {
                let Ok(line) = line else { break };
                match serde_json::from_str::<Line>(&line) {
                    Ok(Line::Hold {
                        session,
                        id,
                        traffic,
                    }) => {
                        held.insert((session, id), *traffic);
                    }
                    Ok(Line::Release { session, id }) => {
                        held.remove(&(session, id));
                    }
                    Err(error) => tracing::warn!(%error, "unreadable sim journal line skipped"),
                }
            }
        }
        let mut replayed: Replayed = held
            .into_iter()
            .map(|((session, id), traffic)| (session, id, traffic))
            .collect();
        replayed.sort_by(|a, b| a.1.cmp(&b.1));
        let mut journal = Journal {
            file: std::io::BufWriter::new(Self::rewrite(
                &path,
                replayed.iter().map(|(s, i, t)| (s.as_str(), i.as_str(), t)),
            )?),
            path,
            lines: 0,
        };
        journal.lines = replayed.len() as u64;
        Ok((journal, replayed))
    }

    /// Writes `held` to a fresh file that replaces the journal; returns it open for appending.
    fn rewrite<'a>(
        path: &Path,
        held: impl Iterator<Item = (&'a str, &'a str, &'a Traffic)>,
    ) -> std::io::Result<File> {
        let fresh = path.with_extension("jsonl.new");
        let mut out = std::io::BufWriter::new(File::create(&fresh)?);
        for (session, id, traffic) in held {
            let line = serde_json::to_string(&LineRef::Hold {
                session,
                id,
                traffic,
            })?;
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        drop(out);
        std::fs::rename(&fresh, path)?;
        OpenOptions::new().append(true).open(path)
    }

    fn append(&mut self, line: &LineRef<'_>) {
        let is_hold = matches!(line, LineRef::Hold { .. });
        let written = serde_json::to_string(line)
            .map_err(std::io::Error::other)
            .and_then(|mut text| {
                text.push('\n');
                self.file.write_all(text.as_bytes())?;
                if is_hold {
                    self.file.flush()?;
                }
                Ok(())
            });
        match written {
            Ok(()) => self.lines += 1,
            Err(error) => {
                tracing::error!(%error, path = %self.path.display(), "sim journal write failed")
            }
        }
    }
}

/// `Line` by reference, for writing.
#[derive(Serialize)]
#[serde(tag = "op", rename_all = "camelCase")]
enum LineRef<'a> {
    Hold {
        session: &'a str,
        id: &'a str,
        traffic: &'a Traffic,
    },
    Release {
        session: &'a str,
        id: &'a str,
    },
}

impl NetState {
    /// A fresh held id: the wall clock first, so ids given out by different processes (a cluster, a
    /// restarted node) sort roughly in the order the traffic arrived.
    pub(super) fn held_id(&mut self) -> String {
        let seq = self.next_seq();
        format!(
            "{:013}{}{:010}",
            chrono::Utc::now().timestamp_millis(),
            self.id_salt(),
            seq
        )
    }

    /// Puts `event` (for `session`) in the durable store: the journal, or Redis in a cluster.
    pub(super) fn store_held(&mut self, session: &str, id: &str, event: &EngineEvent) {
        let Some(traffic) = Traffic::held_form(event) else {
            return;
        };
        if self.is_clustered() {
            self.emit(Op::Hold {
                session: session.to_string(),
                id: id.to_string(),
                traffic: Box::new(traffic),
            });
        } else if let Some(journal) = self.journal.as_mut() {
            journal.append(&LineRef::Hold {
                session,
                id,
                traffic: &traffic,
            });
        }
    }

    /// The device acknowledged `id`: the durable store forgets it.
    fn release_held(&mut self, session: &str, id: &str) {
        if self.is_clustered() {
            self.emit(Op::Release {
                session: session.to_string(),
                id: id.to_string(),
            });
        } else if let Some(journal) = self.journal.as_mut() {
            journal.append(&LineRef::Release { session, id });
            if journal.lines > COMPACT_AFTER_LINES {
                self.compact_journal();
            }
        }
    }

    /// Rewrites the journal with what the devices still hold.
    fn compact_journal(&mut self) {
        let mut live: Vec<(String, String, Traffic)> = Vec::new();
        for (session, device) in &self.devices {
            let held = device.pending.iter().chain(device.in_flight.values());
            for h in held {
                if let Some(traffic) = Traffic::held_form(&h.event) {
                    live.push((session.clone(), h.id.clone(), traffic));
                }
            }
        }
        live.sort_by(|a, b| a.1.cmp(&b.1));
        let Some(journal) = self.journal.as_mut() else {
            return;
        };
        let held = live.iter().map(|(s, i, t)| (s.as_str(), i.as_str(), t));
        match Journal::rewrite(&journal.path, held) {
            Ok(file) => {
                journal.file = std::io::BufWriter::new(file);
                journal.lines = live.len() as u64;
            }
            Err(error) => tracing::error!(%error, "sim journal not compacted"),
        }
    }

    /// Hands held traffic to `session`'s device when it is online (it stays in flight until acknowledged),
    /// else keeps it for the device's next connection.
    pub(super) fn hand_over(&mut self, session: &str, held: Held) {
        let is_online = self
            .devices
            .get(session)
            .is_some_and(|d| d.link == Link::Online && d.events.is_some());
        let ack = is_online.then(|| self.ack_for(session, &held.id));
        let Some(device) = self.devices.get_mut(session) else {
            return;
        };
        let sent = match (ack, &device.events) {
            (Some(ack), Some(tx)) => match tx.send_acked(held.event.clone(), ack) {
                Ok(()) => true,
                Err(unsent) => {
                    // The receiver is gone: keep it here instead, without a refusal re-queueing it twice
                    // (which would also take the network's lock, held now).
                    unsent.ack.disarm();
                    false
                }
            },
            _ => false,
        };
        if sent {
            device.in_flight.insert(held.id.clone(), held);
        } else {
            device.pending.push(held);
        }
    }

    /// The acknowledgement the device owes for `id`.
    fn ack_for(&self, session: &str, id: &str) -> Ack {
        let net = self.me.clone();
        let (session, id) = (session.to_string(), id.to_string());
        Ack::new(move |taken: bool| {
            if let Some(net) = SimNetwork::upgrade(&net) {
                net.settle_held(&session, &id, taken);
            }
        })
    }

    /// The device is gone for good (logged out): nothing is kept for it any more.
    pub(super) fn forget_held(&mut self, session: &str) {
        let Some(device) = self.devices.get_mut(session) else {
            return;
        };
        let ids: Vec<String> = device
            .pending
            .drain(..)
            .map(|h| h.id)
            .chain(device.in_flight.drain().map(|(id, _)| id))
            .collect();
        if self.is_clustered() {
            self.emit(Op::ForgetHeld(session.to_string()));
        } else {
            for id in ids {
                self.release_held(session, &id);
            }
        }
    }

    /// Puts what a journal replayed back where it was: held for each session until its device connects.
    pub(super) fn restore_held(&mut self, replayed: Replayed) {
        for (session, id, traffic) in replayed {
            if let Some(event) = traffic.into_held_event() {
                let device = self.devices.entry(session).or_default();
                device.pending.push(Held { id, event });
            }
        }
    }
}

impl SimNetwork {
    /// The device's answer for held traffic `id`: taken (forgotten everywhere) or refused (handed over again).
    fn settle_held(&self, session: &str, id: &str, taken: bool) {
        let mut state = self.lock();
        let entry = state
            .devices
            .get_mut(session)
            .and_then(|d| d.in_flight.remove(id));
        if taken {
            state.release_held(session, id);
            return;
        }
        let Some(held) = entry else { return };
        let Some(device) = state.devices.get_mut(session) else {
            return;
        };
        device.pending.push(held);
        if device.link == Link::Online && !device.redelivery_due {
            device.redelivery_due = true;
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let net = self.clone();
                let session = session.to_string();
                runtime.spawn(async move {
                    tokio::time::sleep(REDELIVER_AFTER).await;
                    net.redeliver(&session);
                });
            }
        }
    }

    /// Hands what waits for `session` to its device again, if it is online.
    pub(super) fn redeliver(&self, session: &str) {
        let mut state = self.lock();
        let Some(device) = state.devices.get_mut(session) else {
            return;
        };
        device.redelivery_due = false;
        if device.link != Link::Online {
            return;
        }
        let mut pending = std::mem::take(&mut device.pending);
        pending.sort_by(|a, b| a.id.cmp(&b.id));
        for held in pending {
            state.hand_over(session, held);
        }
    }
}
