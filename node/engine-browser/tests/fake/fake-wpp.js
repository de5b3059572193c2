// A stand-in for the @wppconnect/wa-js bundle, for tests: the same `window.WPP` surface the facade calls,
// over a tiny in-page simulated WhatsApp backend. The link lives in localStorage, so it is part of the
// Chromium profile like the real one. The "phone" scans when the test server's /scan answers 1; once linked,
// the page collects what other accounts send from the server's /inbound.
// Sending "/reload" reloads the page mid-send; "/break" navigates to a page where WPP never gets ready; a
// media send whose bytes are "/hang" never answers.
(() => {
  if (location.protocol !== 'http:') return;
  const listeners = {};
  const fire = (name, data) => (listeners[name] || []).forEach((f) => f(data));
  const ready = [];
  const broken = location.pathname === '/broken';
  const linked = () => localStorage.getItem('linked') === '1';
  const ME = '15550001111@c.us';
  let mainReady = false;
  let counter = 0;
  const wid = (s) => ({ _serialized: s, toString: () => s });
  const now = () => Math.floor(Date.now() / 1000);
  // wa-js throws errors carrying a code; so does the fake.
  const wppError = (code, message) => Object.assign(new Error(message || code), { code });
  // A collection the way WhatsApp Web hands them out (the facade reads them through getModelsArray).
  const col = (items) => ({ getModelsArray: () => items.slice() });

  // The simulated backend: the account, a contact, a group, a channel, a label, messages, statuses.
  const ANN = '15550002222@c.us';
  // An account that answers what it is sent with "echo: " and the text.
  const ECHO = '15550007777@c.us';
  const GROUP = '120363000000000001@g.us';
  const CHANNEL = '120363000000000002@newsletter';
  const member = (id, admin, superAdmin) => ({ id: wid(id), isAdmin: admin, isSuperAdmin: superAdmin });
  const chats = {};
  const addChat = (id, name, extra) =>
    (chats[id] = Object.assign({ id: wid(id), name, unreadCount: 0, t: 1, archive: false, pin: 0, labels: [] }, extra || {}));
  addChat(ECHO, 'Echo');
  addChat(ANN, 'Ann', { labels: ['1'] });
  addChat(GROUP, 'Fake Group', {
    isGroup: true,
    groupMetadata: {
      subject: 'Fake Group',
      desc: 'a group of the fake',
      owner: wid(ME),
      creation: 1700000000,
      announce: false,
      restrict: false,
      ephemeralDuration: 0,
      memberAddMode: 'all_member_add',
      participants: col([member(ME, true, true), member(ANN, false, false)]),
    },
  });
  addChat(CHANNEL, 'Fake Channel', {
    isNewsletter: true,
    newsletterMetadata: {
      name: 'Fake Channel',
      description: 'news of the fake',
      inviteCode: 'CHANFAKE',
      size: 42,
      verification: 'verified',
      creationTime: 1700000001,
      membershipType: 'owner',
    },
  });
  const contacts = {
    [ECHO]: { id: wid(ECHO), name: 'Echo', pushname: 'Echo' },
    [ANN]: { id: wid(ANN), name: 'Ann', pushname: 'Ann', isMyContact: true },
  };
  const labels = [{ id: '1', name: 'Customers', colorIndex: 3 }, { id: '2', name: 'Leads', colorIndex: 5 }];
  const blocked = [];
  const requests = { [GROUP]: ['15550003333@c.us', '15550004444@c.us'] };
  const pictures = { [ANN]: 'https://pps.fake/ann.jpg' };
  const invites = { [GROUP]: 'INVITE1' };
  const msgs = [];
  const statuses = [];
  const chatOf = (m) => (m.id.fromMe ? str(m.to) : str(m.from));
  const str = (x) => (x && x._serialized) || String(x);
  const store = (to, type, body, extra) => {
    const id = 'true_' + to + '_FAKE' + ++counter;
    const m = Object.assign({ id: { _serialized: id, fromMe: true }, from: wid(ME), to: wid(to), type, body, t: now() }, extra || {});
    msgs.push(m);
    return { id, ack: 1 };
  };
  const incoming = (from, text, extra) =>
    Object.assign(
      { id: { _serialized: 'false_' + from + '_IN' + ++counter, fromMe: false }, from: wid(from), to: wid(ME), body: text, type: 'chat', t: now(), notifyName: 'Echo' },
      extra || {},
    );
  const findMsg = (id) => {
    const m = msgs.find((x) => x.id._serialized === id);
    if (!m) throw wppError('msg_not_found', 'Message not found: ' + id);
    return m;
  };
  const findChat = (id) => {
    const c = chats[id];
    if (!c) throw wppError('chat_not_found', 'Chat not found: ' + id);
    return c;
  };
  const group = (id) => {
    const c = chats[id];
    if (!c || !c.isGroup) throw wppError('group_not_found', 'Group not found: ' + id);
    return c;
  };
  const members = (id) => group(id).groupMetadata.participants.getModelsArray();
  const setMembers = (id, list) => (group(id).groupMetadata.participants = col(list));
  const setAdmin = (id, ids, on) =>
    setMembers(id, members(id).map((p) => (ids.includes(p.id._serialized) ? member(p.id._serialized, on, false) : p)));
  // The fake poll vote action, found the way the facade finds WhatsApp Web's (module search).
  const votes = {};
  const modules = [{ somethingElse: () => 0 }, { sendVote: async (msg, ids) => (votes[msg.id._serialized] = [...ids]) }];

  // The echo account sends a file back as it got it; its bytes are what `chat.downloadMedia` answers.
  const received = {};
  const echoFile = (to, dataUrl, opts) => {
    const id = 'false_' + to + '_ECHOFILE' + counter;
    const mimetype = String(dataUrl).slice(5).split(';')[0] || 'application/octet-stream';
    received[id] = new Blob([Uint8Array.from(body(dataUrl), (ch) => ch.charCodeAt(0))], { type: mimetype });
    const m = { id: { _serialized: id, fromMe: false }, from: wid(to), to: wid(ME), type: opts.type, t: now() };
    Object.assign(m, { isMedia: true, caption: opts.caption, mimetype, filename: opts.filename, notifyName: 'Echo' });
    setTimeout(() => fire('chat.new_message', m), 30);
  };

  const WPP = {
    isReady: false,
    loader: {
      onReady: (f) => (WPP.isReady ? f() : ready.push(f)),
      search: (cond) => modules.find((m) => cond(m)) || null,
    },
    ev: { on: (name, f) => (listeners[name] = listeners[name] || []).push(f) },
    conn: {
      isAuthenticated: () => linked(),
      isMainReady: () => mainReady,
      getMyUserId: () => (linked() ? wid(ME) : undefined),
      getAuthCode: async () => (linked() ? null : { fullCode: WPP.__qr }),
      genLinkDeviceCodeForPhoneNumber: async (phone) => 'FAKE' + String(phone).slice(-4),
      logout: async () => {
        localStorage.removeItem('linked');
        setTimeout(() => fire('conn.logout'), 10);
        return true;
      },
      markAvailable: async (on) => (WPP.__available = on),
    },
    profile: {
      getMyProfileName: () => 'Fake Phone',
      setMyProfileName: async () => true,
      setMyStatus: async () => true,
      setMyProfilePicture: async (dataUrl) => {
        if (!String(dataUrl).startsWith('data:image/')) throw wppError('invalid_image', 'not an image');
        pictures[ME] = 'https://pps.fake/me.jpg';
        return { eurl: pictures[ME], status: 200 };
      },
      removeMyProfilePicture: async () => delete pictures[ME],
    },
    chat: {
      downloadMedia: async (id) => {
        if (!received[id]) throw wppError('msg_not_found', 'Message not found: ' + id);
        return received[id];
      },
      sendTextMessage: async (to, body) => {
        if (body === '/reload') {
          setTimeout(() => location.reload(), 20);
          return new Promise(() => {});
        }
        if (body === '/break') {
          setTimeout(() => (location.href = '/broken'), 20);
          return new Promise(() => {});
        }
        const sent = store(to, 'chat', body);
        if (to === ECHO) {
          setTimeout(
            () =>
              fire('chat.new_message', {
                id: { _serialized: 'false_' + to + '_ECHO' + counter, fromMe: false },
                from: wid(to),
                to: wid(ME),
                body: 'echo: ' + body,
                type: 'chat',
                t: now(),
                notifyName: 'Echo',
              }),
            30,
          );
        }
        return sent;
      },
      sendFileMessage: async (to, dataUrl, opts) => {
        if (to === 'status@broadcast') {
          const r = store(to, opts.isPtt ? 'ptt' : opts.type, '', { isMedia: true });
          statuses.push(msgs[msgs.length - 1]);
          return r;
        }
        if (body(dataUrl) === '/hang') return new Promise(() => {});
        const sent = store(to, opts.type, opts.caption || '', { isMedia: true, caption: opts.caption });
        if (to === ECHO) echoFile(to, dataUrl, opts);
        return sent;
      },
      sendCreatePollMessage: async (to, name, choices) =>
        store(to, 'poll_creation', name, { pollOptions: choices.map((c, i) => ({ name: c, localId: i })) }),
      sendReactionToMessage: async (id) => (findMsg(id), true),
      editMessage: async (id, text) => {
        const m = findMsg(id);
        m.body = text;
        return { id: m.id._serialized };
      },
      getMessageById: async (id) => findMsg(id),
      getMessages: async (chatId, o) => {
        const all = msgs.filter((m) => chatOf(m) === chatId);
        return all.slice(Math.max(0, all.length - ((o && o.count) || 20)));
      },
      forwardMessages: async (to, ids) => {
        ids.forEach((id) => {
          const m = findMsg(id);
          store(to, m.type, m.body, { isForwarded: true });
        });
        return [true];
      },
      pinMsg: async (id, on) => ((findMsg(id).pinned = on !== false), {}),
      unpinMsg: async (id) => ((findMsg(id).pinned = false), {}),
      starMessage: async (id, on) => ((findMsg(id).star = on), { id, star: on }),
      markIsRead: async () => ({ wid: wid('x') }),
      markIsUnread: async (id) => (findChat(id).unreadCount = 1),
      markIsComposing: async (id) => (findChat(id).state = 'composing'),
      markIsRecording: async (id) => (findChat(id).state = 'recording'),
      markIsPaused: async (id) => (findChat(id).state = 'paused'),
      archive: async (id, on) => ({ wid: wid(id), archive: (findChat(id).archive = on) }),
      pin: async (id, on) => ({ wid: wid(id), pin: !!(findChat(id).pin = on ? now() : 0) }),
      mute: async (id, t) => ((findChat(id).mute = { expiration: t.expiration }), {}),
      unmute: async (id) => delete findChat(id).mute,
      clear: async (id) => {
        findChat(id);
        for (let i = msgs.length - 1; i >= 0; i--) if (chatOf(msgs[i]) === id) msgs.splice(i, 1);
        return { wid: wid(id), status: 200 };
      },
      delete: async (id) => (findChat(id), delete chats[id], { wid: wid(id), status: 200 }),
      get: async (id) => chats[id],
      list: async (o) => {
        const opts = o || {};
        return Object.values(chats).filter(
          (c) =>
            (!opts.onlyNewsletter || c.isNewsletter) &&
            (!opts.withLabels || opts.withLabels.some((l) => c.labels.includes(l))),
        );
      },
    },
    contact: {
      list: async () => Object.values(contacts),
      get: async (id) => contacts[id],
      getProfilePictureUrl: async (id) => pictures[id] || null,
      save: async (id, first, o) => (contacts[id] = { id: wid(id), name: first + (o && o.surname ? ' ' + o.surname : ''), isMyContact: true }),
      remove: async (id) => delete contacts[id],
      // A subscribed contact "comes online" at once.
      subscribePresence: async (id) => {
        setTimeout(() => fire('chat.presence_change', { id: wid(id), isOnline: true, isUser: true, state: 'available', t: now() }), 10);
        return [wid(id)];
      },
    },
    blocklist: {
      all: () => blocked.map(wid),
      blockContact: async (id) => (blocked.includes(id) || blocked.push(id), { wid: wid(id), isBlocked: true }),
      unblockContact: async (id) => (blocked.splice(blocked.indexOf(id) >>> 0, 1), { wid: wid(id), isBlocked: false }),
    },
    group: {
      getAllGroups: async () => Object.values(chats).filter((c) => c.isGroup),
      ensureGroup: async (id) => group(id),
      // A number starting 1555000999 has privacy settings that refuse adds (403).
      addParticipants: async (id, ids) => {
        const answer = {};
        const list = members(id);
        ids.forEach((p) => {
          const refused = p.startsWith('1555000999');
          answer[p] = { wid: p, code: refused ? 403 : 200, message: refused ? 'not-authorized' : 'ok' };
          if (!refused) list.push(member(p, false, false));
        });
        setMembers(id, list);
        return answer;
      },
      removeParticipants: async (id, ids) => setMembers(id, members(id).filter((p) => !ids.includes(p.id._serialized))),
      promoteParticipants: async (id, ids) => setAdmin(id, ids, true),
      demoteParticipants: async (id, ids) => setAdmin(id, ids, false),
      setSubject: async (id, s) => (group(id).groupMetadata.subject = s, true),
      setDescription: async (id, d) => (group(id).groupMetadata.desc = d, true),
      getInviteCode: async (id) => (group(id), invites[id]),
      revokeInviteCode: async (id) => (group(id), (invites[id] = 'INVITE' + ++counter)),
      getGroupInfoFromInviteCode: async (code) => {
        const id = Object.keys(invites).find((g) => invites[g] === code);
        if (!id) throw wppError('invalid_invite_code', 'invite code not valid');
        const m = group(id).groupMetadata;
        return Object.assign({ id, size: members(id).length }, m, { participants: members(id).map((p) => ({ id: p.id._serialized, isAdmin: p.isAdmin, isSuperAdmin: p.isSuperAdmin })) });
      },
      join: async (code) => {
        const id = Object.keys(invites).find((g) => invites[g] === code);
        if (!id) throw wppError('invalid_invite_code', 'invite code not valid');
        return { id, pendingApproval: false };
      },
      leave: async (id) => setMembers(id, members(id).filter((p) => p.id._serialized !== ME)),
      getMembershipRequests: async (id) => (group(id), (requests[id] || []).map((r) => ({ id: wid(r), t: 1700000100, requestMethod: 'InviteLink' }))),
      approve: async (id, ids) => {
        const list = [].concat(ids);
        requests[id] = (requests[id] || []).filter((r) => !list.includes(r));
        setMembers(id, members(id).concat(list.map((p) => member(p, false, false))));
        return list.map((p) => ({ error: null, wid: wid(p) }));
      },
      reject: async (id, ids) => {
        const list = [].concat(ids);
        requests[id] = (requests[id] || []).filter((r) => !list.includes(r));
        return list.map((p) => ({ error: null, wid: wid(p) }));
      },
      setProperty: async (id, prop, value) => {
        const m = group(id).groupMetadata;
        if (prop === 'announcement') m.announce = !!value;
        else if (prop === 'restrict') m.restrict = !!value;
        else if (prop === 'ephemeral') m.ephemeralDuration = Number(value);
        else throw wppError('invalid_property', prop);
        return true;
      },
      setIcon: async (id, dataUrl) => (group(id), (pictures[id] = 'https://pps.fake/group.jpg'), { status: 200 }),
      removeIcon: async (id) => (group(id), delete pictures[id]),
    },
    newsletter: {
      create: async (name, o) => {
        const id = '1203630000000' + (10 + ++counter) + '@newsletter';
        addChat(id, name, {
          isNewsletter: true,
          newsletterMetadata: { name, description: (o && o.description) || '', inviteCode: 'NEW' + counter, size: 0, creationTime: now(), membershipType: 'owner' },
        });
        return { idJid: id, inviteCode: 'NEW' + counter, name, subscribersCount: 0, description: (o && o.description) || null, timestamp: now() };
      },
      ensureNewsletter: async (id) => {
        const c = chats[id];
        if (!c || !c.isNewsletter) throw wppError('newsletter_not_found', 'Channel not found: ' + id);
        return c;
      },
      unfollow: async (id) => (delete chats[id], true),
      destroy: async (id) => (delete chats[id], true),
      mute: async (id, on) => ((chats[id].newsletterMetadata.mute = on ? 'on' : 'off'), chats[id]),
    },
    labels: {
      getAllLabels: async () => labels,
      getLabelById: async (id) => labels.find((l) => l.id === String(id)),
    },
    status: {
      sendTextStatus: async (text) => {
        const r = store('status@broadcast', 'chat', text);
        statuses.push(msgs[msgs.length - 1]);
        return r;
      },
      sendImageStatus: async (dataUrl, o) => WPP.chat.sendFileMessage('status@broadcast', dataUrl, { type: 'image', caption: o.caption }),
      sendVideoStatus: async (dataUrl, o) => WPP.chat.sendFileMessage('status@broadcast', dataUrl, { type: 'video', caption: o.caption }),
      getMyStatus: async () => ({ msgs: col(statuses) }),
      get: (id) => (id === ANN ? { msgs: col([{ id: wid('false_status@broadcast_ANN1_' + ANN), type: 'image', caption: 'beach', isMedia: true, t: 1700000200 }]) } : undefined),
      remove: async (id) => {
        const i = statuses.findIndex((m) => m.id._serialized === id);
        if (i < 0) throw wppError('msg_not_found', 'Status not found: ' + id);
        statuses.splice(i, 1);
        return true;
      },
    },
    whatsapp: {
      // Group IQs the bridge builds itself; the fake answers member_add_mode only, as the server would.
      websocket: {
        generateId: () => 'fake-iq-' + Math.random().toString(16).slice(2),
        smax: (tag, attrs, content) => ({ tag, attrs: attrs || {}, content }),
        sendSmaxStanza: async (node) => {
          const child = [].concat(node.content || [])[0] || {};
          if (node.tag !== 'iq' || node.attrs.xmlns !== 'w:g2' || child.tag !== 'member_add_mode') {
            throw wppError('unexpected_stanza', JSON.stringify(node));
          }
          if (!['admin_add', 'all_member_add'].includes(child.content)) throw wppError('bad_request', String(child.content));
          group(node.attrs.to);
          return { tag: 'iq', attrs: { type: 'result' } };
        },
      },
      functions: {
        createEventCallLink: async (start, type) => 'https://call.whatsapp.com/' + type + '/FAKE' + start,
      },
    },
  };
  // The fake's file sends carry a data URL; "/hang" as its base64 text never answers.
  const body = (dataUrl) => {
    try {
      return atob(String(dataUrl).split(',')[1] || '');
    } catch (_) {
      return '';
    }
  };
  window.__fakeVotes = votes;
  window.WPP = WPP;
  if (broken) return;
  const collectInbound = () =>
    setInterval(async () => {
      const list = await fetch('/inbound').then((r) => r.json()).catch(() => []);
      list.forEach((m) => fire('chat.new_message', incoming(m.from, m.body, { notifyName: null })));
    }, 100);
  const becomeMainReady = () =>
    setTimeout(() => {
      mainReady = true;
      fire('conn.main_ready');
      collectInbound();
    }, 30);
  setTimeout(() => {
    WPP.isReady = true;
    ready.splice(0).forEach((f) => f());
    if (linked()) {
      becomeMainReady();
      return;
    }
    WPP.__qr = '2@fake-' + Math.random().toString(36).slice(2);
    fire('conn.auth_code_change', { fullCode: WPP.__qr });
    const poll = setInterval(async () => {
      const scanned = await fetch('/scan').then((r) => r.text()).catch(() => '0');
      if (scanned === '1' && !linked()) {
        clearInterval(poll);
        localStorage.setItem('linked', '1');
        fire('conn.authenticated');
        becomeMainReady();
      }
    }, 50);
  }, 30);
})();
