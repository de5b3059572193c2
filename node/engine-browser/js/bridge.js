// wagate browser bridge: the ONE facade the Rust engine calls, over @wppconnect/wa-js (`window.WPP`).
// Versioned: the engine refuses a page whose facade reports another BRIDGE_VERSION. A WhatsApp Web update
// means bumping the wa-js pin in package.json or changing this file, nothing else.
// Installed on every navigation (after the wa-js bundle); installing it twice in one document is a no-op.
// Page -> engine: `window.__wagateEmit(JSON.stringify({type, data}))` (a CDP binding).
// Engine -> page: `window.__wagate.call(name, args)` answers `{ok: true, value}` or `{ok: false, code, message}`.
(() => {
  const BRIDGE_VERSION = 4;
  if (window.__wagate && window.__wagate.version === BRIDGE_VERSION) {
    window.__wagate.announce();
    return;
  }

  const emit = (type, data) => {
    try {
      window.__wagateEmit(JSON.stringify({ type, data: data === undefined ? null : data }));
    } catch (_) {
      // The binding is gone only while the page is being torn down; the engine re-syncs on install.
    }
  };
  const wpp = () => window.WPP;
  const str = (x) => (x == null ? null : x._serialized || String(x));
  const fail = (code, message) => {
    const err = new Error(message);
    err.code = code;
    return err;
  };
  const me = () => {
    const w = wpp();
    return {
      id: str(w.conn.getMyUserId()),
      pushName: (w.profile && w.profile.getMyProfileName && w.profile.getMyProfileName()) || null,
    };
  };
  const MEDIA_TYPES = new Set(['image', 'video', 'audio', 'ptt', 'document', 'sticker']);
  // Downloaded media waiting for the engine to read it in slices (one CDP message per slice, never the whole
  // file as one string), by token; closed by the engine when done or failed.
  const downloads = new Map();
  const base64 = async (blob) => {
    const bytes = new Uint8Array(await blob.arrayBuffer());
    let text = '';
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(text);
  };
  const message = (m) => ({
    id: str(m.id),
    from: str(m.from),
    to: str(m.to),
    author: str(m.author),
    fromMe: !!(m.id && m.id.fromMe),
    type: m.type || 'chat',
    body: m.body || m.caption || '',
    timestamp: m.t || 0,
    pushName: m.notifyName || null,
    quotedId: m.quotedStanzaID || null,
    quotedBody: (m.quotedMsg && (m.quotedMsg.body || m.quotedMsg.caption)) || null,
    mentionedIds: arr(m.mentionedJidList).map(str),
    location: m.type === 'location' ? { lat: m.lat, lng: m.lng, description: m.loc || null } : null,
    poll:
      m.type === 'poll_creation'
        ? {
            name: m.pollName || '',
            options: arr(m.pollOptions).map((o) => o.name),
            allowMultiple: (m.pollSelectableOptionsCount || 0) !== 1,
          }
        : null,
    hasMedia: MEDIA_TYPES.has(m.type),
    mimetype: m.mimetype || null,
    filename: m.filename || null,
  });
  const sent = (r) => ({ id: str(r.id), timestamp: Math.floor(Date.now() / 1000) });
  const chat = (c) => ({
    id: str(c.id),
    name: c.name || c.formattedTitle || null,
    unreadCount: c.unreadCount || 0,
    timestamp: c.t || 0,
    archived: !!c.archive,
    pinned: !!c.pin,
    isGroup: !!c.isGroup,
    ...mute(c),
  });
  // WhatsApp Web keeps a mute's end in seconds, -1 for "always"; the engine speaks epoch ms, 0 = always.
  const mute = (c) => {
    const exp = (c.mute && Number(c.mute.expiration)) || 0;
    return { muted: exp === -1 || exp * 1000 > Date.now(), muteExpiration: exp > 0 ? exp * 1000 : 0 };
  };
  const contact = (c, blocked, picture) => ({
    id: str(c.id),
    name: c.name || null,
    pushName: c.pushname || null,
    isBusiness: !!c.isBusiness,
    isMyContact: !!c.isMyContact,
    isBlocked: !!(blocked && blocked.has(str(c.id))),
    profilePicUrl: picture || null,
  });
  const blockedSet = async () => new Set((await wpp().blocklist.all()).map((w) => str(w)));

  // A WhatsApp Web collection, an array or nothing, as an array.
  const arr = (c) => {
    if (!c) return [];
    if (Array.isArray(c)) return c;
    if (typeof c.getModelsArray === 'function') return c.getModelsArray();
    if (Array.isArray(c.models)) return c.models;
    if (typeof c.toArray === 'function') return c.toArray();
    return [];
  };
  const myId = () => str(wpp().conn.getMyUserId());
  const participant = (p) => ({
    id: str(p.id),
    isAdmin: !!(p.isAdmin || p.isSuperAdmin),
    isSuperAdmin: !!p.isSuperAdmin,
  });
  const groupMeta = (c) => (c && c.groupMetadata) || {};
  const groupSummary = (c) => {
    const meta = groupMeta(c);
    const members = arr(meta.participants).map(participant);
    const me = myId();
    return {
      id: str(c.id),
      name: meta.subject || c.name || c.formattedTitle || '',
      participantsCount: members.length,
      isAdmin: members.some((p) => p.id === me && p.isAdmin),
    };
  };
  // Group detail from a chat's metadata or from an invite-code answer (same field names).
  const groupInfo = (id, meta) => ({
    id: str(id),
    subject: meta.subject || '',
    description: meta.desc || '',
    owner: str(meta.owner),
    createdAt: meta.creation || 0,
    participants: arr(meta.participants).map(participant),
  });
  // wa-js has no setter for who may add members: the same group IQ a phone sends, built and sent with wa-js's
  // own stanza helpers (as its call functions do). The page's copy is updated too, as the server's
  // notification would, so the answer shows the new mode.
  const setMemberAddMode = async (id, mode) => {
    const ws = wpp().whatsapp.websocket;
    const member = ws.smax('member_add_mode', {}, mode);
    await ws.sendSmaxStanza(ws.smax('iq', { to: id, type: 'set', xmlns: 'w:g2', id: ws.generateId() }, [member]));
    const meta = groupMeta(await wpp().group.ensureGroup(id));
    if (typeof meta.set === 'function') meta.set('memberAddMode', mode);
    else meta.memberAddMode = mode;
  };
  const groupSettings = (meta) => ({
    announce: !!meta.announce,
    locked: !!meta.restrict,
    ephemeralSeconds: meta.ephemeralDuration || 0,
    adminAddOnly: meta.memberAddMode === 'admin_add',
  });
  const channel = (c) => {
    const m = (c && c.newsletterMetadata) || {};
    const role = m.membershipType || (m.viewerMetadata && m.viewerMetadata.role) || '';
    return {
      id: str(c.id),
      name: m.name || c.name || c.formattedTitle || '',
      description: m.description || '',
      inviteCode: m.inviteCode || '',
      subscriberCount: m.size || m.subscribersCount || 0,
      picture: m.pictureUrl || null,
      verified: m.verification === 'verified',
      createdAt: m.creationTime || 0,
      isOwner: role === 'owner',
      isMuted: !!(c.mute && c.mute.expiration !== 0) || m.mute === 'on',
    };
  };
  const label = (l) => ({
    id: String(l.id),
    name: l.name,
    colorIndex: typeof l.colorIndex === 'number' ? l.colorIndex : 0,
  });
  const statusItem = (m, owner) => ({
    id: str(m.id),
    contact: owner,
    type: m.type || 'chat',
    caption: m.caption || m.body || null,
    hasMedia: !!m.isMedia || ['image', 'video', 'audio', 'ptt'].includes(m.type),
    timestamp: m.t || 0,
  });
  const statusesOf = (model, owner) => arr(model && model.msgs).map((m) => statusItem(m, owner));
  const mustExist = (x, what) => {
    if (!x) throw fail('not_found', what + ' not found');
    return x;
  };
  const ok = () => true;

  // Presence is not pushed to the engine (the browser column never emits presence.update); reads are
  // answered from what this page heard since it subscribed.
  const presence = {};
  const PRESENCE_STATES = { available: 1, unavailable: 1, composing: 1, recording: 1, paused: 1 };
  const presenceState = (s) => (PRESENCE_STATES[s] ? s : s === 'typing' ? 'composing' : 'unavailable');

  // The narrow surface the engine calls; everything else in WPP stays out of reach.
  const api = {
    state: () => {
      const w = wpp();
      const ready = !!(w && w.isReady);
      const authenticated = ready && !!w.conn.isAuthenticated();
      return {
        version: BRIDGE_VERSION,
        ready,
        authenticated,
        mainReady: authenticated && !!w.conn.isMainReady(),
        me: authenticated ? me() : null,
      };
    },
    me: () => me(),
    pairingCode: (phone) => wpp().conn.genLinkDeviceCodeForPhoneNumber(phone),
    logout: () => wpp().conn.logout(),
    sendText: async (to, body, opts) => {
      const o = opts || {};
      const options = { linkPreview: !!o.linkPreview, mentionedList: o.mentions || [] };
      if (o.quotedId) options.quotedMsg = o.quotedId;
      return sent(await wpp().chat.sendTextMessage(to, body, options));
    },
    sendFile: async (to, dataUrl, opts) => {
      const o = opts || {};
      return sent(
        await wpp().chat.sendFileMessage(to, dataUrl, {
          type: o.type || 'auto-detect',
          filename: o.filename || undefined,
          caption: o.caption || undefined,
          mimetype: o.mimetype || undefined,
          isPtt: !!o.isPtt,
          quotedMsg: o.quotedId || undefined,
        }),
      );
    },
    sendLocation: async (to, lat, lng, description) =>
      sent(await wpp().chat.sendLocationMessage(to, { lat, lng, name: description || undefined })),
    sendPoll: async (to, name, choices, selectable) =>
      sent(await wpp().chat.sendCreatePollMessage(to, name, choices, { selectableCount: selectable })),
    sendContact: async (to, id, name) =>
      sent(await wpp().chat.sendVCardContactMessage(to, { id, name })),
    react: async (msgId, emoji) => {
      await wpp().chat.sendReactionToMessage(msgId, emoji || false);
      return true;
    },
    edit: async (msgId, text) => sent(await wpp().chat.editMessage(msgId, text)),
    revoke: async (chatId, msgId, forEveryone) => {
      await wpp().chat.deleteMessage(chatId, msgId, false, !!forEveryone);
      return true;
    },
    // Chat-level receipt: wa-js marks a whole chat read (message ids are not honoured on this engine).
    markRead: async (chatId) => {
      await wpp().chat.markIsRead(chatId);
      return true;
    },
    markUnread: async (chatId) => {
      await wpp().chat.markIsUnread(chatId);
      return true;
    },
    chats: async () => (await wpp().chat.list()).map(chat),
    contacts: async () => {
      const blocked = await blockedSet();
      return (await wpp().contact.list()).map((c) => contact(c, blocked));
    },
    contact: async (id) => {
      const c = await wpp().contact.get(id);
      if (!c) throw fail('not_found', 'Contact not found');
      const picture = await wpp().contact.getProfilePictureUrl(id, true).catch(() => null);
      return contact(c, await blockedSet(), picture);
    },
    checkNumber: async (number) => {
      const r = await wpp().contact.queryExists(number + '@c.us');
      return r ? { exists: true, id: str(r.wid) } : { exists: false, id: null };
    },
    labels: async () => (await wpp().labels.getAllLabels()).map(label),
    label: async (id) => label(mustExist(await wpp().labels.getLabelById(id), 'Label')),
    labelChats: async (id) => {
      mustExist(await wpp().labels.getLabelById(id), 'Label');
      return (await wpp().chat.list({ withLabels: [id] })).map(chat);
    },
    chatLabels: async (chatId) => {
      const c = mustExist(await wpp().chat.get(chatId), 'Chat');
      const ids = (c.labels || []).map(String);
      return (await wpp().labels.getAllLabels()).filter((l) => ids.includes(String(l.id))).map(label);
    },

    // --- messages ---
    // wa-js answers no id for a forward: the copy is the newest own message in the target chat.
    forward: async (to, msgId) => {
      mustExist(await wpp().chat.getMessageById(msgId), 'Message');
      await wpp().chat.forwardMessages(to, [msgId]);
      const last = (await wpp().chat.getMessages(to, { count: 1 })).map(message)[0];
      if (!last || !last.fromMe) throw fail('failed', 'forwarded, but the copy is not in the chat yet');
      return { id: last.id, timestamp: last.timestamp || Math.floor(Date.now() / 1000) };
    },
    pin: async (msgId, seconds) => {
      await wpp().chat.pinMsg(msgId, true, seconds || undefined);
      return true;
    },
    unpin: async (msgId) => {
      await wpp().chat.unpinMsg(msgId);
      return true;
    },
    star: async (msgId, star) => {
      await wpp().chat.starMessage(msgId, !!star);
      return true;
    },
    // wa-js has no vote call: WhatsApp Web's own vote action, found through wa-js's module search.
    votePoll: async (msgId, options) => {
      const msg = mustExist(await wpp().chat.getMessageById(msgId), 'Poll');
      const choices = arr(msg.pollOptions);
      if (msg.type !== 'poll_creation' || !choices.length) throw fail('bad_input', 'not a poll: ' + msgId);
      const ids = new Set();
      for (const name of options || []) {
        const o = choices.find((c) => c.name === name);
        if (!o) throw fail('bad_input', 'the poll has no option "' + name + '"');
        ids.add(o.localId);
      }
      const action = wpp().loader.search((m) => m && typeof m.sendVote === 'function');
      if (!action) throw fail('failed', 'this WhatsApp Web build exposes no poll vote action');
      await action.sendVote(msg, ids);
      return true;
    },

    // --- chat actions ---
    archiveChat: async (chatId, on) => {
      await wpp().chat.archive(chatId, !!on);
      return true;
    },
    pinChat: async (chatId, on) => {
      await wpp().chat.pin(chatId, !!on);
      return true;
    },
    // untilMs: null unmutes, 0 mutes indefinitely (-1 is WhatsApp's "always"), else epoch milliseconds.
    muteChat: async (chatId, untilMs) => {
      if (untilMs == null) await wpp().chat.unmute(chatId);
      else await wpp().chat.mute(chatId, { expiration: untilMs === 0 ? -1 : Math.floor(untilMs / 1000) });
      return true;
    },
    chatState: async (chatId, state) => {
      const c = wpp().chat;
      if (state === 'typing') await c.markIsComposing(chatId);
      else if (state === 'recording') await c.markIsRecording(chatId);
      else await c.markIsPaused(chatId);
      return true;
    },
    clearChat: async (chatId) => {
      await wpp().chat.clear(chatId, false);
      return true;
    },
    deleteChat: async (chatId) => {
      await wpp().chat.delete(chatId);
      return true;
    },

    // --- contacts ---
    profilePicture: async (id) => (await wpp().contact.getProfilePictureUrl(id, true)) || null,
    block: async (id) => {
      await wpp().blocklist.blockContact(id);
      return true;
    },
    unblock: async (id) => {
      await wpp().blocklist.unblockContact(id);
      return true;
    },
    blocked: async () => (await wpp().blocklist.all()).map((w) => str(w)),
    saveContact: async (id, first, last) => {
      await wpp().contact.save(id, first, { surname: last || undefined, syncAddressBook: true });
      return true;
    },
    deleteContact: async (id) => {
      await wpp().contact.remove(id);
      return true;
    },

    // --- groups (create is refused: the browser column answers 501) ---
    groups: async () => (await wpp().group.getAllGroups()).filter(Boolean).map(groupSummary),
    group: async (id) => {
      const c = await wpp().group.ensureGroup(id);
      return groupInfo(c.id, groupMeta(c));
    },
    // action: add | remove | promote | demote; one result per participant.
    participants: async (id, action, ids) => {
      const g = wpp().group;
      if (action === 'add') {
        const r = (await g.addParticipants(id, ids)) || {};
        return ids.map((p) => {
          const one = r[p] || {};
          const code = Number(one.code) || 200;
          return { id: p, success: code === 200, status: code, message: one.message || (code === 200 ? 'added' : 'not added') };
        });
      }
      const f = { remove: g.removeParticipants, promote: g.promoteParticipants, demote: g.demoteParticipants }[action];
      if (!f) throw fail('bad_input', 'unknown participant action ' + action);
      await f(id, ids);
      return ids.map((p) => ({ id: p, success: true, status: 200, message: action + 'd' }));
    },
    groupSubject: async (id, subject) => {
      await wpp().group.setSubject(id, subject);
      return true;
    },
    groupDescription: async (id, description) => {
      await wpp().group.setDescription(id, description);
      return true;
    },
    inviteCode: async (id) => wpp().group.getInviteCode(id),
    revokeInvite: async (id) => wpp().group.revokeInviteCode(id),
    join: async (code) => str((await wpp().group.join(code)).id),
    joinInfo: async (code) => {
      const info = await wpp().group.getGroupInfoFromInviteCode(code);
      return groupInfo(info.id, info);
    },
    leave: async (id) => {
      await wpp().group.leave(id);
      return true;
    },
    membershipRequests: async (id) =>
      (await wpp().group.getMembershipRequests(id)).map((r) => ({ id: str(r.id), t: r.t || 0 })),
    // ids null: every pending request.
    answerMembership: async (id, approve, ids) => {
      const g = wpp().group;
      const targets = ids || (await g.getMembershipRequests(id)).map((r) => str(r.id));
      if (!targets.length) return [];
      const r = await (approve ? g.approve : g.reject)(id, targets);
      return (r || []).map((x) => ({
        id: str(x.wid),
        success: !x.error,
        status: x.error ? Number(x.error) || 400 : 200,
        message: x.error ? String(x.error) : approve ? 'approved' : 'rejected',
      }));
    },
    // --- received media: open (download), read slices, close ---
    mediaOpen: async (msgId) => {
      const blob = await wpp().chat.downloadMedia(msgId);
      if (!blob) throw fail('not_found', 'no media for ' + msgId);
      const token = 'm' + Date.now().toString(36) + Math.random().toString(36).slice(2);
      downloads.set(token, blob);
      return { token, size: blob.size, mimetype: blob.type || null };
    },
    mediaRead: async (token, offset, length) => {
      const blob = downloads.get(token);
      if (!blob) throw fail('not_found', 'no open download ' + token);
      return base64(blob.slice(offset, offset + length));
    },
    mediaClose: async (token) => downloads.delete(token),
    groupSettings: async (id) => groupSettings(groupMeta(await wpp().group.ensureGroup(id))),
    updateGroupSettings: async (id, u) => {
      const g = wpp().group;
      if (u.adminAddOnly != null) await setMemberAddMode(id, u.adminAddOnly ? 'admin_add' : 'all_member_add');
      if (u.announce != null) await g.setProperty(id, 'announcement', !!u.announce);
      if (u.locked != null) await g.setProperty(id, 'restrict', !!u.locked);
      if (u.ephemeralSeconds != null) await g.setProperty(id, 'ephemeral', u.ephemeralSeconds);
      return groupSettings(groupMeta(await g.ensureGroup(id)));
    },
    groupPicture: async (id) => (await wpp().contact.getProfilePictureUrl(id, true)) || null,
    setGroupPicture: async (id, dataUrl) => {
      await wpp().group.setIcon(id, dataUrl);
      return true;
    },
    removeGroupPicture: async (id) => {
      await wpp().group.removeIcon(id);
      return true;
    },

    // --- channels (owner transfer, admin demote and subscribe-by-invite are refused: 501) ---
    channels: async () => (await wpp().chat.list({ onlyNewsletter: true })).map(channel),
    channel: async (id) => channel(await wpp().newsletter.ensureNewsletter(id)),
    createChannel: async (name, description) => {
      const r = await wpp().newsletter.create(name, { description: description || undefined });
      return {
        id: r.idJid,
        name: r.name || name,
        description: r.description || '',
        inviteCode: r.inviteCode || '',
        subscriberCount: r.subscribersCount || 0,
        picture: null,
        verified: false,
        createdAt: r.timestamp || Math.floor(Date.now() / 1000),
        isOwner: true,
        isMuted: false,
      };
    },
    channelMessages: async (id, limit) =>
      (await wpp().chat.getMessages(id, { count: limit })).map(message),
    unfollowChannel: async (id) => {
      await wpp().newsletter.unfollow(id);
      return true;
    },
    deleteChannel: async (id) => {
      await wpp().newsletter.destroy(id);
      return true;
    },
    muteChannel: async (id, on) => {
      await wpp().newsletter.mute(id, !!on);
      return true;
    },

    // --- status posts (recipients are ignored: the account's status-privacy audience sees them) ---
    // kind: text | image | video | audio; dataUrl null for text.
    postStatus: async (kind, content, opts) => {
      const s = wpp().status;
      const o = opts || {};
      let r;
      if (kind === 'text') {
        r = await s.sendTextStatus(content, {
          backgroundColor: o.backgroundColor || undefined,
          font: o.font == null ? undefined : o.font,
        });
      } else if (kind === 'image') {
        r = await s.sendImageStatus(content, { caption: o.caption || undefined });
      } else if (kind === 'video') {
        r = await s.sendVideoStatus(content, { caption: o.caption || undefined });
      } else if (kind === 'audio') {
        r = await wpp().chat.sendFileMessage('status@broadcast', content, {
          type: 'audio',
          isPtt: true,
          createChat: true,
        });
      } else {
        throw fail('bad_input', 'a status post is text, image, video or voice');
      }
      return { id: str(r && r.id), timestamp: Math.floor(Date.now() / 1000) };
    },
    myStatuses: async () => statusesOf(await wpp().status.getMyStatus(), myId()),
    contactStatuses: async (id) => statusesOf(wpp().status.get(id), id),
    deleteStatus: async (id) => {
      await wpp().status.remove(id);
      return true;
    },

    // --- calls (no call detection on this engine: no call events, no rejection) ---
    callLink: async (kind, startMs) =>
      wpp().whatsapp.functions.createEventCallLink(Math.floor(startMs / 1000), kind === 'video' ? 'video' : 'voice'),

    // --- presence ---
    setPresence: async (available) => {
      await wpp().conn.markAvailable(!!available);
      return true;
    },
    subscribePresence: async (id) => {
      await wpp().contact.subscribePresence(id);
      return true;
    },
    presence: async (id) => presence[id] || null,
    setProfileName: async (name) => {
      await wpp().profile.setMyProfileName(name);
      return true;
    },
    setProfileStatus: async (status) => {
      await wpp().profile.setMyStatus(status);
      return true;
    },
    setProfilePicture: async (dataUrl) => {
      await wpp().profile.setMyProfilePicture(dataUrl);
      return true;
    },
    removeProfilePicture: async () => {
      await wpp().profile.removeMyProfilePicture();
      return true;
    },
  };

  // wa-js throws WPPErrors with codes of its own (msg_not_found, invalid_chat_id, not_admin, ...): sorted
  // into the few the engine maps to statuses; anything else is a failure of the page.
  const OWN_CODES = { not_found: 1, bad_input: 1, rejected: 1, unsupported: 1, failed: 1 };
  const errorCode = (code) => {
    const c = String(code || 'failed');
    if (OWN_CODES[c]) return c;
    if (/not_found|not_exist|doesnt_exist/.test(c)) return 'not_found';
    if (/^invalid|_invalid|^bad_/.test(c)) return 'bad_input';
    if (/not_admin|not_allowed|not_authorized|forbidden|permission|not_member/.test(c)) return 'rejected';
    return 'failed';
  };

  const call = async (name, args) => {
    const f = Object.prototype.hasOwnProperty.call(api, name) ? api[name] : null;
    if (!f) return { ok: false, code: 'unsupported', message: 'bridge has no ' + name };
    const w = wpp();
    if (name !== 'state' && !(w && w.isReady)) {
      return { ok: false, code: 'reloading', message: 'WhatsApp Web is loading' };
    }
    try {
      const value = await f(...(args || []));
      return { ok: true, value: value === undefined ? null : value };
    } catch (e) {
      return { ok: false, code: errorCode(e && e.code), message: String((e && e.message) || e) };
    }
  };

  let hooked = false;
  const hook = () => {
    if (hooked) return;
    hooked = true;
    const w = wpp();
    w.ev.on('conn.auth_code_change', (code) => code && emit('qr', code.fullCode));
    w.ev.on('conn.authenticated', () => emit('authenticated', me()));
    w.ev.on('conn.main_ready', () => emit('ready', me()));
    w.ev.on('conn.logout', () => emit('logged_out', null));
    w.ev.on('chat.new_message', (m) => emit('message', message(m)));
    w.ev.on('chat.msg_ack_change', (a) =>
      emit('ack', { ack: a.ack, chat: str(a.chat), ids: (a.ids || []).map((k) => str(k)) }),
    );
    w.ev.on('chat.presence_change', (p) => {
      const t = p.t || Math.floor(Date.now() / 1000);
      const who = p.participants && p.participants.length ? p.participants : [{ id: p.id, state: p.state }];
      presence[str(p.id)] = who.map((x) => ({
        id: str(x.id),
        state: presenceState(x.state || (p.isOnline ? 'available' : 'unavailable')),
        lastSeen: x.state === 'unavailable' || (!x.state && !p.isOnline) ? t : null,
      }));
    });
    announce();
    // A QR already on screen before we hooked.
    if (!w.conn.isAuthenticated()) {
      const code = w.conn.getAuthCode && w.conn.getAuthCode();
      Promise.resolve(code).then((c) => c && c.fullCode && emit('qr', c.fullCode));
    }
  };
  const announce = () => emit('bridge', api.state());

  window.__wagate = { version: BRIDGE_VERSION, call, announce };
  emit('installed', BRIDGE_VERSION);
  const w = wpp();
  if (!w) {
    emit('bridge_error', 'window.WPP is missing: the wa-js bundle did not load');
  } else if (w.isReady) {
    hook();
  } else {
    w.loader.onReady(hook);
  }
})();
