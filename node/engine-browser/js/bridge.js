// wagate browser bridge: the ONE facade the Rust engine calls, over @wppconnect/wa-js (`window.WPP`).
// Versioned: the engine refuses a page whose facade reports another BRIDGE_VERSION. A WhatsApp Web update
// means bumping the wa-js pin in package.json or changing this file, nothing else.
// Installed on every navigation (after the wa-js bundle); installing it twice in one document is a no-op.
// Page -> engine: `window.__wagateEmit(JSON.stringify({type, data}))` (a CDP binding).
// Engine -> page: `window.__wagate.call(name, args)` answers `{ok: true, value}` or `{ok: false, code, message}`.
(() => {
  const BRIDGE_VERSION = 1;
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
  });
  const contact = (c) => ({
    id: str(c.id),
    name: c.name || null,
    pushName: c.pushname || null,
    isBusiness: !!c.isBusiness,
    isMyContact: !!c.isMyContact,
  });

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
    contacts: async () => (await wpp().contact.list()).map(contact),
    contact: async (id) => {
      const c = await wpp().contact.get(id);
      if (!c) throw fail('not_found', 'Contact not found');
      return contact(c);
    },
    checkNumber: async (number) => {
      const r = await wpp().contact.queryExists(number + '@c.us');
      return r ? { exists: true, id: str(r.wid) } : { exists: false, id: null };
    },
    labels: async () =>
      (await wpp().labels.getAllLabels()).map((l) => ({
        id: String(l.id),
        name: l.name,
        colorIndex: typeof l.colorIndex === 'number' ? l.colorIndex : 0,
      })),
    setProfileName: async (name) => {
      await wpp().profile.setMyProfileName(name);
      return true;
    },
    setProfileStatus: async (status) => {
      await wpp().profile.setMyStatus(status);
      return true;
    },
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
      return { ok: false, code: (e && e.code) || 'failed', message: String((e && e.message) || e) };
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
