// A stand-in for the @wppconnect/wa-js bundle, for tests: the same `window.WPP` surface the facade calls,
// over a tiny in-page simulated WhatsApp backend. The link lives in localStorage, so it is part of the
// Chromium profile like the real one. The "phone" scans when the test server's /scan answers 1.
// Sending "/reload" reloads the page mid-send; "/break" navigates to a page where WPP never gets ready.
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
  const WPP = {
    isReady: false,
    loader: { onReady: (f) => (WPP.isReady ? f() : ready.push(f)) },
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
    },
    profile: { getMyProfileName: () => 'Fake Phone' },
    chat: {
      sendTextMessage: async (to, body) => {
        if (body === '/reload') {
          setTimeout(() => location.reload(), 20);
          return new Promise(() => {});
        }
        if (body === '/break') {
          setTimeout(() => (location.href = '/broken'), 20);
          return new Promise(() => {});
        }
        const id = 'true_' + to + '_FAKE' + ++counter;
        if (to === 'echo@c.us') {
          setTimeout(
            () =>
              fire('chat.new_message', {
                id: { _serialized: 'false_' + to + '_ECHO' + counter, fromMe: false },
                from: wid(to),
                to: wid(ME),
                body: 'echo: ' + body,
                type: 'chat',
                t: Math.floor(Date.now() / 1000),
                notifyName: 'Echo',
              }),
            30,
          );
        }
        return { id, ack: 1 };
      },
      markIsRead: async () => ({ wid: wid('x') }),
      list: async () => [{ id: wid('echo@c.us'), name: 'Echo', unreadCount: 0, t: 1 }],
    },
    contact: { list: async () => [{ id: wid('echo@c.us'), name: 'Echo', pushname: 'Echo' }] },
  };
  window.WPP = WPP;
  if (broken) return;
  const becomeMainReady = () =>
    setTimeout(() => {
      mainReady = true;
      fire('conn.main_ready');
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
