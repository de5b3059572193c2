//! Poll votes: a `pollUpdateMessage` decrypted with the poll's `messageSecret` (which the library keeps in
//! the session's auth store: captured from received polls and history, persisted by its send path for
//! ours) and its selected option hashes (SHA-256 of the option names) matched against the stored poll.
//! The cipher is wacore's (HKDF over the secret with the poll id and the creator and voter JIDs, then
//! AES-256-GCM); this file only finds the secret, the addressing and the names.

use crate::store::SqlBackend;
use crate::whatsapp_rust::Jid as LibJid;
use crate::whatsapp_rust::store::traits::MsgSecretStore;
use crate::whatsapp_rust::wacore::poll::{
    PollVoteCiphertext, compute_option_hash, decrypt_poll_vote_with_secret,
};

use super::events::{EncryptedVote, jid};
use super::ops::{Store, stored};
use wagate_engine_api::{Poll, PollVote};

/// Why a vote could not be read (logged by the caller; the vote is dropped).
#[derive(Debug, thiserror::Error)]
pub(super) enum VoteError {
    #[error("no message secret is stored for poll {0}")]
    NoSecret(String),
    #[error("poll {0} is not in the message store")]
    UnknownPoll(String),
    #[error("{0}")]
    Store(String),
    #[error("vote does not decrypt: {0}")]
    Crypto(String),
}

/// `alternates` are other spellings of the creator and voter (the LID/PN counterpart) to retry with,
/// since a vote written across the LID migration is sealed with the other namespace.
pub(super) async fn decrypt(
    vote: &EncryptedVote,
    secrets: &SqlBackend,
    store: Store<'_>,
    alternates: Option<(LibJid, LibJid)>,
) -> Result<PollVote, VoteError> {
    let chat = vote.chat.to_non_ad().to_string();
    let mut creators = vec![vote.creator.to_non_ad()];
    if let Some((creator, _)) = &alternates {
        creators.push(creator.to_non_ad());
    }
    let mut secret = None;
    for creator in &creators {
        secret = secrets
            .get_msg_secret(&chat, &creator.to_string(), &vote.poll_id)
            .await
            .map_err(|e| VoteError::Store(format!("{e:#}")))?;
        if secret.is_some() {
            break;
        }
    }
    let secret = secret.ok_or_else(|| VoteError::NoSecret(vote.poll_id.clone()))?;
    let ciphertext = PollVoteCiphertext {
        enc_payload: &vote.enc_payload,
        enc_iv: &vote.enc_iv,
    };
    let mut addressings = vec![(vote.creator.to_non_ad(), vote.voter.to_non_ad())];
    if let Some((creator, voter)) = alternates {
        addressings.push((creator.to_non_ad(), voter.to_non_ad()));
    }
    let mut last_error = String::new();
    let mut hashes = None;
    for (creator, voter) in &addressings {
        match decrypt_poll_vote_with_secret(
            ciphertext,
            &secret,
            &vote.poll_id,
            &creator.to_string(),
            &voter.to_string(),
        ) {
            Ok(found) => {
                hashes = Some(found);
                break;
            }
            Err(e) => last_error = e.to_string(),
        }
    }
    let hashes = hashes.ok_or(VoteError::Crypto(last_error))?;
    let poll = stored_poll(store, &vote.poll_id).await?;
    let options = names(&poll, &hashes);
    let (Some(chat_id), Some(voter)) = (jid(&vote.chat), jid(&vote.voter)) else {
        return Err(VoteError::Crypto(
            "vote addressed to an unrepresentable JID".into(),
        ));
    };
    Ok(PollVote {
        poll_id: vote.poll_id.clone(),
        chat_id,
        voter,
        options,
        timestamp: vote.timestamp,
    })
}

/// The option names whose hashes were selected, in the poll's order; unknown hashes are dropped.
fn names(poll: &Poll, hashes: &[Vec<u8>]) -> Vec<String> {
    poll.options
        .iter()
        .filter(|name| {
            let hash = compute_option_hash(name);
            hashes.iter().any(|h| h.as_slice() == hash)
        })
        .cloned()
        .collect()
}

async fn stored_poll(store: Store<'_>, poll_id: &str) -> Result<Poll, VoteError> {
    let row = stored(store, poll_id)
        .await
        .map_err(|e| VoteError::Store(e.to_string()))?
        .ok_or_else(|| VoteError::UnknownPoll(poll_id.to_string()))?;
    let extra: serde_json::Value = row
        .extra
        .as_deref()
        .and_then(|raw| serde_json::from_str(raw).ok())
        .unwrap_or_default();
    serde_json::from_value(extra.get("poll").cloned().unwrap_or_default())
        .map_err(|_| VoteError::UnknownPoll(poll_id.to_string()))
}
