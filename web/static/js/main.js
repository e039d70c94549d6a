// Entry point: settings and pairing from localStorage, the service worker,
// then either the pairing screen or the app.

import { State } from './state.js';
import { mountApp } from './ui.js';
import { h, randomId } from './util.js';

const root = document.getElementById('app');

export const DEFAULT_SETTINGS = {
  theme: 'system', // system | light | dark
  tools: 'truncated', // all | truncated | hidden
  runtime: 'compact', // off | compact | full
  reasoningOpen: false,
  autoThread: false,
  notify: false,
};

export function loadSettings() {
  try { return { ...DEFAULT_SETTINGS, ...JSON.parse(localStorage.getItem('iris.settings') || '{}') }; } catch { return { ...DEFAULT_SETTINGS }; }
}

export function saveSettings(s) {
  localStorage.setItem('iris.settings', JSON.stringify(s));
  applyTheme(s.theme);
}

export function applyTheme(theme) {
  if (theme === 'light' || theme === 'dark') document.documentElement.dataset.theme = theme;
  else delete document.documentElement.dataset.theme;
}

function loadPairing() {
  try {
    const p = JSON.parse(localStorage.getItem('iris.pairing') || 'null');
    return p && p.url && p.token ? p : null;
  } catch { return null; }
}

function deviceId() {
  let id = localStorage.getItem('iris.device');
  if (!id) { id = randomId('web_'); localStorage.setItem('iris.device', id); }
  return id;
}

function defaultDeviceName() {
  const ua = navigator.userAgent;
  const browser = /Edg\//.test(ua) ? 'Edge' : /Firefox\//.test(ua) ? 'Firefox' : /Chrom(e|ium)\//.test(ua) ? 'Chrome' : /Safari\//.test(ua) ? 'Safari' : 'Browser';
  const os = /Android/.test(ua) ? 'Android' : /iPhone|iPad/.test(ua) ? 'iOS' : /Mac OS/.test(ua) ? 'macOS' : /Windows/.test(ua) ? 'Windows' : /Linux/.test(ua) ? 'Linux' : '';
  return `Web · ${browser}${os ? ' on ' + os : ''}`;
}

/** defaultURL is this page's own gateway: /ws next to where the app is served. */
export function defaultURL() {
  const u = new URL('ws', location.href);
  u.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  u.hash = '';
  u.search = '';
  return u.href;
}

/** tryHello opens a connection, says hello and reports the answer. */
function tryHello(url, token, id, name) {
  return new Promise((resolve) => {
    let ws;
    try { ws = new WebSocket(url); } catch (e) { resolve({ ok: false, error: `Not a WebSocket address: ${e.message}` }); return; }
    const done = (r) => { clearTimeout(t); ws.onclose = null; try { ws.close(1000); } catch { /* closed */ } resolve(r); };
    const t = setTimeout(() => done({ ok: false, error: 'The gateway did not answer within 10 seconds.' }), 10000);
    ws.onopen = () => ws.send(JSON.stringify({ v: 1, id: 1, type: 'hello', payload: { token, device_id: id, device_name: name, caps: { min_protocol: 1, media: true } } }));
    ws.onmessage = (ev) => {
      let f;
      try { f = JSON.parse(ev.data); } catch { return; }
      if (f.type === 'hello.ack') done({ ok: true });
      else if (f.type === 'error') done({ ok: false, error: (f.payload && f.payload.message) || 'The gateway refused the connection.' });
    };
    ws.onclose = (ev) => done({ ok: false, error: ev.reason || 'Could not reach the gateway at this address.' });
  });
}

function mountPairing(notice) {
  document.title = 'Pair · Iris';
  const hashParams = new URLSearchParams(location.hash.replace(/^#\/?pair\??/, ''));
  const prev = (() => { try { return JSON.parse(localStorage.getItem('iris.lastServer') || 'null'); } catch { return null; } })();
  const url = h('input', { id: 'pair-url', name: 'url', type: 'url', required: true, autocomplete: 'url', spellcheck: 'false', value: hashParams.get('url') || (prev && prev.url) || defaultURL() });
  const token = h('input', { id: 'pair-token', name: 'token', type: 'password', required: true, autocomplete: 'current-password', 'aria-describedby': 'pair-token-hint', value: hashParams.get('token') || '' });
  const name = h('input', { id: 'pair-name', name: 'name', type: 'text', required: true, maxlength: 64, value: (prev && prev.deviceName) || defaultDeviceName() });
  const err = h('p', { class: 'form-error', role: 'alert', id: 'pair-error' }, notice || '');
  const btn = h('button', { type: 'submit', class: 'btn primary wide' }, 'Connect');
  const form = h('form', {
    class: 'pair-form', 'aria-describedby': 'pair-help',
    onsubmit: async (e) => {
      e.preventDefault();
      err.textContent = '';
      btn.disabled = true;
      btn.textContent = 'Connecting…';
      const p = { url: url.value.trim(), token: token.value.trim(), deviceId: deviceId(), deviceName: name.value.trim() || defaultDeviceName() };
      const r = await tryHello(p.url, p.token, p.deviceId, p.deviceName);
      btn.disabled = false;
      btn.textContent = 'Connect';
      if (!r.ok) { err.textContent = r.error; token.focus(); return; }
      localStorage.setItem('iris.pairing', JSON.stringify(p));
      localStorage.setItem('iris.lastServer', JSON.stringify({ url: p.url, deviceName: p.deviceName }));
      history.replaceState(null, '', location.pathname);
      start(p);
    },
  },
  h('div', { class: 'field' }, h('label', { for: 'pair-url' }, 'Gateway address'), url,
    h('p', { class: 'hint' }, 'The WebSocket address of your irisgate, ending in /ws.')),
  h('div', { class: 'field' }, h('label', { for: 'pair-token' }, 'Token'), token,
    h('p', { class: 'hint', id: 'pair-token-hint' }, 'Printed by irisgate when it first starts, or made with ', h('code', null, 'irisgate token create --name NAME'),
      '. ', h('code', null, 'irisgate pair'), ' prints a link (and a QR code to scan) that opens this page with the token filled in.')),
  h('div', { class: 'field' }, h('label', { for: 'pair-name' }, 'Name of this device'), name),
  err, btn);
  root.replaceChildren(h('main', { class: 'pair' },
    h('div', { class: 'pair-card' },
      h('div', { class: 'pair-brand' }, h('img', { src: 'icons/icon.svg', alt: '', width: 56, height: 56 }), h('h1', null, 'Iris')),
      h('p', { class: 'lead', id: 'pair-help' }, 'Pair this browser with your gateway to chat with your agent.'),
      form)));
  (token.value ? btn : token).focus();
}

async function start(pairing) {
  const st = new State(pairing, loadSettings());
  await st.init();
  window.__iris = st; // for the browser tests and the devtools console
  mountApp(root, st, {
    saveSettings: (s) => { st.settings = s; saveSettings(s); },
    unpair: async () => {
      st.conn.stop();
      await st.db.clear();
      localStorage.removeItem('iris.pairing');
      location.replace(location.pathname); // start clean, on the pairing screen
    },
  });
  st.addEventListener('conn', (e) => {
    if (e.detail.state === 'auth') {
      localStorage.removeItem('iris.pairing');
      st.conn.stop();
      sessionStorage.setItem('iris.notice', `The gateway refused this browser's token (${e.detail.error || 'auth'}). Pair again.`);
      location.replace(location.pathname);
    }
  });
  st.start();
}

function registerSW() {
  if (!('serviceWorker' in navigator)) return;
  const had = !!navigator.serviceWorker.controller;
  navigator.serviceWorker.register('sw.js').catch((e) => console.warn('service worker', e));
  navigator.serviceWorker.addEventListener('controllerchange', () => {
    if (had) document.dispatchEvent(new CustomEvent('iris-update'));
  });
}

applyTheme(loadSettings().theme);
registerSW();
const pairing = loadPairing();
if (pairing) {
  start(pairing);
} else {
  const notice = sessionStorage.getItem('iris.notice');
  sessionStorage.removeItem('iris.notice');
  mountPairing(notice);
}

