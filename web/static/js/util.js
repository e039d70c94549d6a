// Small helpers shared by the views: an element builder, icons, formatting.

/** h builds an element: h('button', {class: 'x', onclick}, 'text', child…). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else if (k === 'style') Object.assign(el.style, v);
      else if (k === 'value' || k === 'checked' || k === 'selected' || k === 'disabled' || k === 'hidden') el[k] = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

const SVGNS = 'http://www.w3.org/2000/svg';
// Icon paths (24×24, stroke). Kept tiny and drawn with currentColor.
const ICONS = {
  search: 'M11 4a7 7 0 1 0 0 14a7 7 0 0 0 0-14zM20 20l-4-4',
  settings: 'M4 7h9M17 7h3M4 17h3M11 17h9M15 5v4M9 15v4',
  back: 'M15 5l-7 7 7 7',
  send: 'M4 12l16-8-6 16-2-7z',
  stop: 'M7 7h10v10H7z',
  steer: 'M5 12h11M12 6l6 6-6 6',
  attach: 'M16 7l-7 7a2 2 0 0 0 3 3l7-7a4 4 0 0 0-6-6l-7 7a6 6 0 0 0 8 8l6-6',
  plus: 'M12 5v14M5 12h14',
  more: 'M6 12h.01M12 12h.01M18 12h.01',
  star: 'M12 4l2.4 5 5.6.6-4.2 3.8 1.2 5.6-5-2.9-5 2.9 1.2-5.6L4 9.6 9.6 9z',
  close: 'M6 6l12 12M18 6L6 18',
  download: 'M12 4v11M7 10l5 5 5-5M5 20h14',
  file: 'M7 3h7l5 5v13H7zM14 3v5h5',
  chevron: 'M9 6l6 6-6 6',
  check: 'M5 12l5 5 9-10',
  thread: 'M5 5h14v10H9l-4 4z',
  bell: 'M6 16V11a6 6 0 0 1 12 0v5l2 2H4zM10 20h4',
  copy: 'M8 8h11v11H8zM5 16V5h11',
  trash: 'M5 7h14M10 7V4h4v3M7 7l1 13h8l1-13',
  clock: 'M12 3a9 9 0 1 0 0 18a9 9 0 0 0 0-18zM12 7v5l3 2',
  script: 'M4 5h16v14H4zM7 9l3 3-3 3M12 15h5',
};

/** icon returns an inline SVG icon, hidden from assistive technology. */
export function icon(name, cls = '') {
  const svg = document.createElementNS(SVGNS, 'svg');
  svg.setAttribute('viewBox', '0 0 24 24');
  svg.setAttribute('aria-hidden', 'true');
  svg.setAttribute('focusable', 'false');
  svg.setAttribute('class', 'icon ' + cls);
  const p = document.createElementNS(SVGNS, 'path');
  p.setAttribute('d', ICONS[name] || ICONS.more);
  svg.append(p);
  return svg;
}

/** colorFor picks a stable avatar colour from a name. */
export function colorFor(name) {
  const palette = ['#3b6fd8', '#2f8f6b', '#b5562b', '#8a4fc4', '#c23b6a', '#23808f', '#7a6a12', '#5a6b7d'];
  let x = 0;
  for (const ch of String(name)) x = (x * 31 + ch.codePointAt(0)) >>> 0;
  return palette[x % palette.length];
}

/** avatar renders a channel's icon, or its initial on its colour. */
export function avatar(ch, size = 'md') {
  if (ch && ch.icon) {
    const mime = ch.icon.startsWith('/9j/') ? 'image/jpeg' : 'image/png';
    return h('img', { class: `avatar avatar-${size}`, src: `data:${mime};base64,${ch.icon}`, alt: '' });
  }
  const name = (ch && ch.name) || '?';
  const letter = (Array.from(name.trim())[0] || '?').toUpperCase();
  return h('span', { class: `avatar avatar-${size}`, style: { background: (ch && ch.color) || colorFor(name) }, 'aria-hidden': 'true' }, letter);
}

export function fmtTime(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  const now = new Date();
  if (d.toDateString() === now.toDateString()) return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  return d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
}

export function fmtSize(n) {
  if (n == null) return '';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10240 ? 1 : 0)} KB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function debounce(fn, ms) {
  let t;
  return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); };
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export function randomId(prefix, n = 12) {
  const a = new Uint8Array(n);
  crypto.getRandomValues(a);
  return prefix + Array.from(a, (b) => 'abcdefghijklmnopqrstuvwxyz0123456789'[b % 36]).join('');
}

/** laneKey names one conversation: a channel's flat lane or a thread. */
export function laneKey(chatId, threadId) {
  return threadId ? `${chatId}/${threadId}` : chatId;
}

export function splitLane(key) {
  const i = key.indexOf('/');
  return i < 0 ? { chat_id: key, thread_id: undefined } : { chat_id: key.slice(0, i), thread_id: key.slice(i + 1) };
}

/** fuzzy scores how well query matches target as a subsequence (higher is
 * better); -Infinity when it does not. Prefix and word-start hits win. */
export function fuzzy(query, target) {
  const q = query.toLowerCase();
  const t = target.toLowerCase();
  if (!q) return 0;
  if (t.startsWith(q)) return 1000 - t.length;
  let score = 0, ti = 0, run = 0;
  for (const c of q) {
    const i = t.indexOf(c, ti);
    if (i < 0) return -Infinity;
    run = i === ti ? run + 1 : 0;
    score += 10 + run * 5 - (i - ti);
    if (i === 0 || /[\s/_\-.]/.test(t[i - 1])) score += 8;
    ti = i + 1;
  }
  return score - t.length * 0.1;
}

export function truncate(s, n) {
  s = String(s ?? '');
  return s.length > n ? s.slice(0, n - 1) + '…' : s;
}

/** mediaKind maps a MIME type to the protocol's media kind. */
export function mediaKind(mime) {
  if (/^image\//.test(mime)) return 'image';
  if (/^audio\//.test(mime)) return 'audio';
  if (/^video\//.test(mime)) return 'video';
  return 'document';
}

/** announce speaks a short message through the live region. */
export function announce(text) {
  const r = document.getElementById('announcer');
  if (r) { r.textContent = ''; setTimeout(() => { r.textContent = text; }, 30); }
}

/** originOf says who wrote a message: the person, the agent, the gateway
 * (system), a cron job (its model is "cron: <job>") or a script's delivery
 * (model "delivery"). History lists the last two as assistant messages, so
 * the model is what tells them apart; live they also come as role cron. */
export function originOf(role, model) {
  const m = typeof model === 'string' ? model : '';
  if (role === 'user') return { origin: 'user' };
  if (role === 'system') return { origin: 'system' };
  if (m.startsWith('cron: ')) return { origin: 'cron', source: m.slice(6) };
  if (m === 'delivery' || role === 'cron') return { origin: 'delivery' };
  return { origin: 'agent' };
}

/** msgFields are what an item keeps of a message payload. */
export function msgFields(p) {
  const o = { id: p.message_id, role: p.role, text: p.text ?? '', ts: p.ts, ...originOf(p.role, p.model) };
  for (const k of ['reasoning', 'media', 'reply_to', 'model', 'tokens', 'runtime']) if (p[k] !== undefined) o[k] = p[k];
  return o;
}
